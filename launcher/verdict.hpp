#pragma once
// What happened to a run, and the machine-readable verdict (--meta) made from it. Pure.
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "isolate/limits.hpp"

namespace gpubox::launcher {

struct RunOutcome {
    bool setup_failed = false;  // gpubox itself failed (XX)
    int setup_code = 0;         // 125 setup, 126/127 exec
    std::string message;        // the error, for XX
    bool have_status = false;
    int status = 0;             // the workload's wait status, as init reported it
    int init_status = 0;        // init's own wait status
    std::string killed_for;     // "", "wall_time", "cpu_time", "memory", "stdout", "stderr"
    double wall_seconds = 0, cpu_seconds = 0;
    long max_rss_kb = 0, csw_voluntary = 0, csw_forced = 0;
    std::optional<std::uint64_t> memory_peak_bytes;  // cgroup memory.peak, or the sampled maximum
    bool oom_killed = false;
    std::string cgroup;  // the sandbox's cgroup, if it had one
};

struct Verdict {
    std::string status;  // OK RE SG TO ML OL XX
    std::optional<int> exit_code, signal;
    bool killed = false;
    std::string limit;  // which limit ended the run
    std::string message;
    int gpubox_exit = 0;
};

Verdict judge(const RunOutcome& o, const isolate::Limits& limits);

using Mechanisms = std::vector<std::pair<std::string, std::string>>;
std::string render_meta_json(const Verdict& v, const RunOutcome& o, const isolate::Limits& l, const Mechanisms& m);
std::string render_meta_isolate(const Verdict& v, const RunOutcome& o);

}  // namespace gpubox::launcher
