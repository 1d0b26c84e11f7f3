// --meta-format isolate: the verdict as isolate's meta file, for `gpubox run` and isolate mode
// (launcher/ioi/) alike.
#include "launcher/monitor/meta_isolate.hpp"

#include <signal.h>

#include <algorithm>
#include <cstdio>

#include "common/text.hpp"

namespace gpubox::launcher {

using isolate::LimitName;

IsolateResult isolate_result(const Verdict& v, const RunOutcome& o, const isolate::Limits& l) {
    IsolateResult r;
    // isolate's child reports a failed execve() as exit status 127 of the program.
    if (v.status == Status::internal_error && (o.setup_code == 126 || o.setup_code == 127)) {
        r.status = "RE";
        r.exitcode = 127;
        r.message = "Exited with error status 127";
        return r;
    }
    if (v.status == Status::internal_error) {
        r.status = "XX";
        r.message = v.message;
        return r;
    }
    if (v.status == Status::time_limit) {
        r.status = "TO", r.killed = v.killed;
        r.message = v.limit == LimitName::wall_time ? "Time limit exceeded (wall clock)"
                                                    : "Time limit exceeded";
        return r;
    }
    r.oom = o.oom_killed || v.status == Status::memory_limit;
    if (v.status == Status::output_limit) r.exitsig = SIGXFSZ;
    else if (v.signal) r.exitsig = v.signal;
    else r.exitcode = v.exit_code;
    // isolate reads the clocks once the program has ended: past a limit is TO, whatever the exit.
    const bool cpu_over = l.cpu_seconds && o.cpu_seconds > *l.cpu_seconds;
    if (cpu_over || (l.wall_seconds && o.wall_seconds > *l.wall_seconds)) {
        r.status = "TO", r.exitsig.reset(), r.exitcode.reset();
        r.message = cpu_over ? "Time limit exceeded" : "Time limit exceeded (wall clock)";
        return r;
    }
    if (r.exitsig) r.status = "SG", r.message = cat("Caught fatal signal ", *r.exitsig);
    else if (r.exitcode && *r.exitcode != 0)
        r.status = "RE", r.message = cat("Exited with error status ", *r.exitcode);
    return r;
}

std::string isolate_seconds(double s) {
    const long ms = static_cast<long>(s * 1000);
    char buf[32];
    std::snprintf(buf, sizeof buf, "%ld.%03ld", ms / 1000, ms % 1000);
    return buf;
}

namespace {

// max-rss is the program's peak resident set; cg-mem the sandbox's memory peak: the cgroup's
// memory.peak, else at least what the sampler summed and at least the largest resident set
// (a sample every 5 ms misses a short peak, and a run that short is never sampled).
std::string isolate_stats(const RunOutcome& o, bool oom) {
    const long peak_kb = o.memory_peak_bytes ? static_cast<long>(*o.memory_peak_bytes / 1024) : 0;
    std::string out = cat(
        "time:", isolate_seconds(o.cpu_seconds), "\ntime-wall:", isolate_seconds(o.wall_seconds),
        "\nmax-rss:", o.max_rss_kb ? o.max_rss_kb : peak_kb, "\ncsw-voluntary:", o.csw_voluntary,
        "\ncsw-forced:", o.csw_forced,
        "\ncg-mem:", o.memory_peak_cgroup ? peak_kb : std::max(peak_kb, o.max_rss_kb), "\n");
    if (oom) out += "cg-oom-killed:1\n";
    return out;
}

std::string one_line(std::string msg) {
    for (char& c : msg)
        if (c == '\n') c = ' ';
    return msg;
}

}  // namespace

std::string render_meta_isolate(const Verdict& v, const RunOutcome& o, const isolate::Limits& l) {
    const IsolateResult r = isolate_result(v, o, l);
    const std::string head =
        r.status.empty() ? "" : cat("status:", r.status, "\nmessage:", one_line(r.message), "\n");
    // A run isolate ends itself (a limit, its own failure) reports first, then its statistics.
    if (r.killed) return head + "killed:1\n" + isolate_stats(o, r.oom);
    if (r.status == "XX") return head + isolate_stats(o, r.oom);
    std::string out = isolate_stats(o, r.oom);
    if (r.exitcode) out += cat("exitcode:", *r.exitcode, "\n");
    if (r.exitsig) out += cat("exitsig:", *r.exitsig, "\n");
    return out + head;
}

}  // namespace gpubox::launcher
