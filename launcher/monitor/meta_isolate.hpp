#pragma once
// --meta-format isolate: what isolate would have said of a run. Pure.
#include <optional>
#include <string>

#include "isolate/limits.hpp"
#include "launcher/monitor/verdict.hpp"

namespace gpubox::launcher {

// What isolate would have said of this run (see render_meta_isolate for `l`).
struct IsolateResult {
    std::string status, message;  // status "" for a normal exit: isolate writes none
    std::optional<int> exitcode, exitsig;
    bool killed = false, oom = false;
};
IsolateResult isolate_result(const Verdict& v, const RunOutcome& o, const isolate::Limits& l);
// isolate's "%d.%03d": whole milliseconds, truncated.
std::string isolate_seconds(double s);
// isolate's meta file (isolate.c: final_stats(), err(), die()), keys in isolate's order. `l`:
// the limits isolate reports against; a run that ended past its CPU or wall-clock limit is TO,
// as isolate checks after the program ended. max-rss and cg-mem are always written.
std::string render_meta_isolate(const Verdict& v, const RunOutcome& o, const isolate::Limits& l);

}  // namespace gpubox::launcher
