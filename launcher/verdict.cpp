#include "launcher/verdict.hpp"

#include <signal.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <nlohmann/json.hpp>

#include "common/text.hpp"
#include "launcher/exit_codes.hpp"

namespace gpubox::launcher {
namespace {

std::string seconds(double s) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3f", s);
    return buf;
}

std::string limit_text(const std::string& name, const isolate::Limits& l) {
    if (name == "wall_time") return cat("wall-clock limit ", seconds(*l.wall_seconds), " s");
    if (name == "cpu_time") return cat("CPU time limit ", seconds(*l.cpu_seconds), " s");
    if (name == "memory") return cat("memory limit ", *l.memory_bytes, " bytes");
    if (name == "stdout") return cat("stdout limit ", *l.stdout_bytes, " bytes");
    if (name == "stderr") return cat("stderr limit ", *l.stderr_bytes, " bytes");
    return name;
}

}  // namespace

Verdict judge(const RunOutcome& o, const isolate::Limits& l) {
    Verdict v;
    if (o.setup_failed) {
        v.status = "XX";
        v.message = o.message;
        v.gpubox_exit = o.setup_code;
        return v;
    }
    const int st = o.have_status ? o.status : o.init_status;
    if (WIFEXITED(st) && o.have_status) v.exit_code = WEXITSTATUS(st);
    if (WIFSIGNALED(st)) v.signal = WTERMSIG(st);
    v.gpubox_exit = v.exit_code ? *v.exit_code : v.signal ? 128 + *v.signal : kExitSetupFailed;
    if (!o.killed_for.empty()) {
        v.killed = true;
        v.limit = o.killed_for;
        v.status = o.killed_for == "memory" ? "ML" : (o.killed_for == "stdout" || o.killed_for == "stderr") ? "OL" : "TO";
        v.message = cat("killed: ", limit_text(o.killed_for, l), " exceeded");
        v.signal = SIGKILL;
        v.exit_code.reset();
        v.gpubox_exit = 128 + SIGKILL;
        return v;
    }
    // A program that failed having reached its memory limit failed at it: a write into gpubox's
    // tmpfs, whose budget is the limit, ends in ENOSPC exactly there.
    const bool over_memory = l.memory_bytes && (o.oom_killed || (o.memory_peak_bytes && *o.memory_peak_bytes >= *l.memory_bytes) ||
                                                 static_cast<std::uint64_t>(o.max_rss_kb) * 1024 >= *l.memory_bytes);
    if (v.signal && *v.signal == SIGXCPU && l.cpu_seconds) {
        v.status = "TO", v.killed = true, v.limit = "cpu_time";
        v.message = cat("killed: ", limit_text("cpu_time", l), " exceeded (RLIMIT_CPU)");
    } else if ((v.signal || (v.exit_code && *v.exit_code != 0)) && over_memory) {
        v.status = "ML", v.limit = "memory", v.killed = o.oom_killed;
        v.message = cat(o.oom_killed ? "killed by the OOM killer: " : "failed at the ", limit_text("memory", l));
    } else if (v.signal) {
        v.status = "SG";
        v.message = cat("killed by signal ", *v.signal, " (", sigabbrev_np(*v.signal) ? sigabbrev_np(*v.signal) : "?", ")");
    } else if (v.exit_code && *v.exit_code != 0) {
        v.status = "RE";
        v.message = cat("exited with code ", *v.exit_code);
    } else if (v.exit_code) {
        v.status = "OK";
        v.message = "exited normally";
    } else {
        v.status = "XX";
        v.message = "the sandbox's init died before reporting";
    }
    return v;
}

std::string render_meta_json(const Verdict& v, const RunOutcome& o, const isolate::Limits& l, const Mechanisms& m) {
    using nlohmann::json;
    json j;
    j["status"] = v.status;
    j["exit_code"] = v.exit_code ? json(*v.exit_code) : json();
    j["signal"] = v.signal ? json(*v.signal) : json();
    j["wall_time"] = std::stod(seconds(o.wall_seconds));
    j["cpu_time"] = std::stod(seconds(o.cpu_seconds));
    j["max_rss_kb"] = o.max_rss_kb;
    j["memory_peak_kb"] = o.memory_peak_bytes ? json(*o.memory_peak_bytes / 1024) : json();
    j["killed"] = v.killed;
    j["limit"] = v.limit.empty() ? json() : json(v.limit);
    j["message"] = v.message;
    j["oom_killed"] = o.oom_killed;
    j["csw_voluntary"] = o.csw_voluntary;
    j["csw_forced"] = o.csw_forced;
    j["gpubox_exit_code"] = v.gpubox_exit;
    j["cgroup"] = o.cgroup.empty() ? json() : json(o.cgroup);
    json limits = json::object();
    auto value = [&](const std::string& name) -> json {
        if (name == "wall_time" && l.wall_seconds) return *l.wall_seconds;
        if (name == "cpu_time" && l.cpu_seconds) return *l.cpu_seconds;
        if (name == "memory" && l.memory_bytes) return *l.memory_bytes;
        if (name == "pids" && l.pids) return *l.pids;
        if (name == "fsize" && l.fsize_bytes) return *l.fsize_bytes;
        if (name == "nofile" && l.nofile) return *l.nofile;
        if (name == "stack" && l.stack_bytes) return *l.stack_bytes;
        if (name == "address_space" && l.as_bytes) return *l.as_bytes;
        if (name == "stdout" && l.stdout_bytes) return *l.stdout_bytes;
        if (name == "stderr" && l.stderr_bytes) return *l.stderr_bytes;
        return json();
    };
    for (const auto& [name, how] : m) limits[name] = {{"value", value(name)}, {"mechanism", how}};
    j["limits"] = limits;
    return j.dump(2) + "\n";
}

std::string render_meta_isolate(const Verdict& v, const RunOutcome& o) {
    std::string out = cat("time:", seconds(o.cpu_seconds), "\ntime-wall:", seconds(o.wall_seconds),
                          "\nmax-rss:", o.max_rss_kb, "\ncsw-voluntary:", o.csw_voluntary,
                          "\ncsw-forced:", o.csw_forced, "\n");
    if (v.exit_code) out += cat("exitcode:", *v.exit_code, "\n");
    if (v.signal) out += cat("exitsig:", *v.signal, "\n");
    if (v.killed) out += "killed:1\n";
    if (o.memory_peak_bytes && !o.cgroup.empty()) out += cat("cg-mem:", *o.memory_peak_bytes / 1024, "\n");
    if (o.oom_killed) out += "cg-oom-killed:1\n";
    if (v.status != "OK") out += cat("status:", v.status, "\n");
    std::string msg = v.message;
    for (char& c : msg)
        if (c == '\n') c = ' ';
    out += cat("message:", msg, "\n");
    return out;
}

}  // namespace gpubox::launcher
