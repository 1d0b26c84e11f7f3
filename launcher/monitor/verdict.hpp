#pragma once
// What happened to a run, and the machine-readable verdict (--meta) made from it. Pure.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "isolate/limits.hpp"

namespace gpubox::launcher {

// Why the monitor killed the sandbox: a limit, the grace after a forwarded signal, or a parent
// gone (--die-with-parent).
enum class KillReason {
    none,
    wall_time,
    cpu_time,
    memory,
    stdout_,
    stderr_,
    kill_after,
    parent_died
};
// The limit a kill was for, if it was for one.
std::optional<isolate::LimitName> limit_of(KillReason why);

struct RunOutcome {
    bool setup_failed = false;  // gpubox itself failed (XX)
    int setup_code = 0;         // 125 setup, 126/127 exec
    std::string message;        // the error, for XX
    bool have_status = false;
    int status = 0;       // the workload's wait status, as init reported it
    int init_status = 0;  // init's own wait status
    KillReason killed_for = KillReason::none;
    // SIGTERM, SIGINT or SIGHUP sent to gpubox: forwarded, or received as the sandbox ended.
    int terminated_by = 0;
    double kill_after = 0;  // the grace it had, for the message
    double wall_seconds = 0, cpu_seconds = 0;
    long max_rss_kb = 0, csw_voluntary = 0, csw_forced = 0;
    double monitor_cpu_seconds = 0;  // gpubox's own (the monitor's), never the workload's
    std::optional<std::uint64_t> memory_peak_bytes;  // cgroup memory.peak, or the sampled maximum
    bool memory_peak_cgroup = false;                 // memory.peak, not the sampler's
    // The sampler's: of memory_peak_bytes' passes, the most in socket buffers (sock_diag)
    std::optional<std::uint64_t> socket_peak_bytes;
    bool oom_killed = false;
    std::string cgroup;   // the sandbox's cgroup, if it had one
    int clock_error = 0;  // the errno the kernel refused init the workload's CPU counter with
};

// A run's status, named in --meta as isolate and the judges name it (to_string).
enum class Status {
    ok,              // OK: exited with code 0
    runtime_error,   // RE: exited with another code
    signaled,        // SG: killed by a signal
    time_limit,      // TO: past its CPU or wall-clock limit
    memory_limit,    // ML: killed at, or failed at, its memory limit
    output_limit,    // OL: past its stdout or stderr limit
    internal_error,  // XX: gpubox failed, or the sandbox died before reporting
};
std::string_view to_string(Status s);  // "OK", "RE", "SG", "TO", "ML", "OL", "XX"
// A status and its name compare equal ("OK" for Status::ok): the name is the status as the meta
// file, the judges and the tests spell it.
bool operator==(Status s, std::string_view name);

struct Verdict {
    Status status = Status::internal_error;
    std::optional<int> exit_code, signal;
    bool killed = false;
    std::optional<isolate::LimitName> limit;  // which limit ended the run
    // Why the run was ended from outside (a scheduler's scancel or time limit, a parent gone):
    // "" (it was not), "SIGTERM", "SIGINT", "SIGHUP" (sent to gpubox, forwarded to the workload)
    // or "parent_died" (--die-with-parent). `killed` says whether gpubox then killed it.
    std::string terminated;
    std::string message;
    int gpubox_exit = 0;
};

Verdict judge(const RunOutcome& o, const isolate::Limits& limits);

using Mechanisms = std::vector<std::pair<isolate::LimitName, std::string>>;
std::string render_meta_json(const Verdict& v, const RunOutcome& o, const isolate::Limits& l,
                             const Mechanisms& m);
// isolate's status for a verdict: isolate knows OK, RE, SG, TO and XX only (CMS grades any other
// status as a normal exit). A memory kill is SG (SIGKILL, with cg-oom-killed), an output kill
// SG (SIGXFSZ, as isolate's RLIMIT_FSIZE), a program that failed at its memory limit RE or SG.
std::string isolate_status(const Verdict& v);

}  // namespace gpubox::launcher
