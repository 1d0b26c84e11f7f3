#include "launcher/monitor/verdict.hpp"

#include <algorithm>

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/text.hpp"
#include "launcher/sandbox/exit_codes.hpp"

namespace gpubox::launcher {
namespace {

std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", s);
    return buf;
}

using isolate::LimitName;

std::string limit_text(LimitName name, const isolate::Limits& l) {
    switch (name) {
        case LimitName::wall_time: return cat("wall-clock limit ", seconds(*l.wall_seconds), " s");
        case LimitName::cpu_time: return cat("CPU time limit ", seconds(*l.cpu_seconds), " s");
        // Sizes as the options take them (64M), as the user most likely wrote them.
        case LimitName::memory: return cat("memory limit ", unit_size(*l.memory_bytes));
        case LimitName::stdout_: return cat("stdout limit ", unit_size(*l.stdout_bytes));
        case LimitName::stderr_: return cat("stderr limit ", unit_size(*l.stderr_bytes));
        case LimitName::fsize: return cat("file size limit ", unit_size(*l.fsize_bytes));
        default: return std::string(to_string(name));
    }
}

// --meta's "limits": the value asked for each limit that has one.
nlohmann::json limit_value(LimitName name, const isolate::Limits& l) {
    using nlohmann::json;
    const auto value = [](const auto& v) { return v ? json(*v) : json(); };
    switch (name) {
        case LimitName::wall_time: return value(l.wall_seconds);
        case LimitName::cpu_time: return value(l.cpu_seconds);
        case LimitName::memory: return value(l.memory_bytes);
        case LimitName::pids: return value(l.pids);
        case LimitName::fsize: return value(l.fsize_bytes);
        case LimitName::nofile: return value(l.nofile);
        case LimitName::stack: return value(l.stack_bytes);
        case LimitName::address_space: return value(l.as_bytes);
        case LimitName::stdout_: return value(l.stdout_bytes);
        case LimitName::stderr_: return value(l.stderr_bytes);
        case LimitName::tmpfs:
        case LimitName::kill: return json();
    }
    return json();
}

}  // namespace

namespace {

constexpr std::pair<Status, std::string_view> kStatusNames[] = {
    {Status::ok, "OK"},
    {Status::runtime_error, "RE"},
    {Status::signaled, "SG"},
    {Status::time_limit, "TO"},
    {Status::memory_limit, "ML"},
    {Status::output_limit, "OL"},
    {Status::internal_error, "XX"},
};

}  // namespace

std::string_view to_string(Status s) {
    for (const auto& [status, name] : kStatusNames)
        if (status == s) return name;
    return "XX";
}

bool operator==(Status s, std::string_view name) { return to_string(s) == name; }

std::optional<LimitName> limit_of(KillReason why) {
    switch (why) {
        case KillReason::wall_time: return LimitName::wall_time;
        case KillReason::cpu_time: return LimitName::cpu_time;
        case KillReason::memory: return LimitName::memory;
        case KillReason::stdout_: return LimitName::stdout_;
        case KillReason::stderr_: return LimitName::stderr_;
        case KillReason::none:
        case KillReason::kill_after:
        case KillReason::parent_died: return std::nullopt;
    }
    return std::nullopt;
}

namespace {

// A run the monitor ended from outside: after --kill-after's grace, or with gpubox's parent.
Verdict judge_terminated(const RunOutcome& o, Verdict v) {
    if (o.killed_for == KillReason::parent_died) v.terminated = "parent_died";
    v.status = Status::signaled;
    v.killed = true;
    v.signal = SIGKILL;
    v.exit_code.reset();
    v.gpubox_exit = kExitSignalBase + SIGKILL;
    v.message =
        o.killed_for == KillReason::parent_died
            ? std::string(
                  "terminated: gpubox's parent died (--die-with-parent); the sandbox was killed")
            : cat("terminated: ", v.terminated,
                  " sent to gpubox; the sandbox was killed after --kill-after ",
                  seconds(o.kill_after), " s");
    return v;
}

// A run the monitor killed for passing `limit`.
Verdict judge_limit_kill(LimitName limit, const isolate::Limits& l, Verdict v) {
    v.killed = true;
    v.limit = limit;
    v.status = limit == LimitName::memory                                   ? Status::memory_limit
               : limit == LimitName::stdout_ || limit == LimitName::stderr_ ? Status::output_limit
                                                                            : Status::time_limit;
    v.message = cat("killed: ", limit_text(limit, l), " exceeded");
    v.signal = SIGKILL;
    v.exit_code.reset();
    v.gpubox_exit = kExitSignalBase + SIGKILL;
    return v;
}

// A run that ended by itself: its exit code or signal, read against its limits.
Verdict judge_ending(const RunOutcome& o, const isolate::Limits& l, Verdict v) {
    // A program that failed having reached its memory limit failed at it: a write into gpubox's
    // tmpfs, whose budget is the limit, ends in ENOSPC exactly there.
    const bool over_memory =
        l.memory_bytes &&
        (o.oom_killed || (o.memory_peak_bytes && *o.memory_peak_bytes >= *l.memory_bytes) ||
         static_cast<std::uint64_t>(o.max_rss_kb) * 1024 >= *l.memory_bytes);
    if (v.signal && *v.signal == SIGXCPU && l.cpu_seconds) {
        v.status = Status::time_limit;
        v.killed = true;
        v.limit = LimitName::cpu_time;
        v.message = cat("killed: ", limit_text(LimitName::cpu_time, l), " exceeded (RLIMIT_CPU)");
    } else if (v.signal && *v.signal == SIGXFSZ && l.fsize_bytes) {
        // isolate's status for it (SG), but killed at a limit as the line and "limit" say.
        v.status = Status::signaled;
        v.killed = true;
        v.limit = LimitName::fsize;
        v.message =
            cat("killed: ", limit_text(LimitName::fsize, l), " exceeded (RLIMIT_FSIZE: SIGXFSZ)");
    } else if ((v.signal || (v.exit_code && *v.exit_code != 0)) && over_memory) {
        v.status = Status::memory_limit;
        v.limit = LimitName::memory;
        v.killed = o.oom_killed;
        v.message = cat(o.oom_killed ? "killed by the OOM killer: " : "failed at the ",
                        limit_text(LimitName::memory, l));
    } else if (v.signal) {
        v.status = Status::signaled;
        v.message = cat("killed by signal ", *v.signal, " (",
                        sigabbrev_np(*v.signal) ? sigabbrev_np(*v.signal) : "?", ")");
    } else if (v.exit_code && *v.exit_code != 0) {
        v.status = Status::runtime_error;
        v.message = cat("exited with code ", *v.exit_code);
    } else if (v.exit_code) {
        v.status = Status::ok;
        v.message = "exited normally";
    } else {
        v.status = Status::internal_error;
        v.message = "the sandbox's init died before reporting";
    }
    if (!v.terminated.empty())
        v.message += cat(" (terminated: ", v.terminated, " sent to gpubox, forwarded)");
    return v;
}

}  // namespace

Verdict judge(const RunOutcome& o, const isolate::Limits& l) {
    Verdict v;
    if (o.setup_failed) {
        v.status = Status::internal_error;
        v.message = o.message;
        v.gpubox_exit = o.setup_code;
        return v;
    }
    const int st = o.have_status ? o.status : o.init_status;
    if (WIFEXITED(st) && o.have_status) v.exit_code = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) v.signal = WTERMSIG(st);
    v.gpubox_exit = v.exit_code ? *v.exit_code
                    : v.signal  ? kExitSignalBase + *v.signal
                                : kExitSetupFailed;
    if (o.terminated_by)
        v.terminated =
            sigabbrev_np(o.terminated_by) ? cat("SIG", sigabbrev_np(o.terminated_by)) : "signal";
    if (o.killed_for == KillReason::kill_after || o.killed_for == KillReason::parent_died)
        return judge_terminated(o, v);
    if (const std::optional<LimitName> limit = limit_of(o.killed_for))
        return judge_limit_kill(*limit, l, v);
    return judge_ending(o, l, v);
}

std::string render_meta_json(const Verdict& v, const RunOutcome& o, const isolate::Limits& l,
                             const Mechanisms& m) {
    using nlohmann::json;
    json j;
    j["status"] = to_string(v.status);
    j["exit_code"] = v.exit_code ? json(*v.exit_code) : json();
    j["signal"] = v.signal ? json(*v.signal) : json();
    j["wall_time"] = std::stod(seconds(o.wall_seconds));
    j["cpu_time"] = std::stod(seconds(o.cpu_seconds));
    j["max_rss_kb"] = o.max_rss_kb;
    j["memory_peak_kb"] = o.memory_peak_bytes ? json(*o.memory_peak_bytes / 1024) : json();
    j["socket_memory_peak_kb"] = o.socket_peak_bytes ? json(*o.socket_peak_bytes / 1024) : json();
    j["killed"] = v.killed;
    j["limit"] = v.limit ? json(to_string(*v.limit)) : json();
    j["message"] = v.message;
    j["terminated"] = v.terminated.empty() ? json() : json(v.terminated);
    j["isolate_status"] = isolate_status(v);
    j["oom_killed"] = o.oom_killed;
    j["csw_voluntary"] = o.csw_voluntary;
    j["csw_forced"] = o.csw_forced;
    j["monitor_cpu_time"] = std::stod(seconds(o.monitor_cpu_seconds));
    j["gpubox_exit_code"] = v.gpubox_exit;
    j["cgroup"] = o.cgroup.empty() ? json() : json(o.cgroup);
    json limits = json::object();
    for (const auto& [name, how] : m)
        limits[std::string(to_string(name))] = {{"value", limit_value(name, l)},
                                                {"mechanism", how}};
    j["limits"] = limits;
    return j.dump(2) + "\n";
}

std::string isolate_status(const Verdict& v) {
    if (v.status == Status::output_limit) return "SG";
    if (v.status == Status::memory_limit) return v.signal ? "SG" : "RE";
    return std::string(to_string(v.status));
}

}  // namespace gpubox::launcher
