#include "launcher/ioi/plan.hpp"

#include <sys/resource.h>

#include <algorithm>

#include "common/error.hpp"
#include "common/text.hpp"
#include "rootfs/paths.hpp"

namespace gpubox::ioi {
namespace {

using rootfs::UserMount;

// An active rule, in isolate's order: what it binds, where.
struct Bound {
    std::string target;  // "/usr"
    std::string host;    // "/usr", "<box>/box"; "" for a filesystem
    unsigned flags;
};

std::string host_side(const std::string& outside, const BoxPaths& box) {
    return starts_with(outside, "./") ? box.dir + outside.substr(1) : outside;
}

// Rules gpubox's own mounts stand in for: proc, sysfs and devpts at their places, /dev, /dev/shm
// and /tmp. A filesystem anywhere else, but tmpfs, cannot be had.
bool gpubox_provides(const DirRule& r) {
    const std::string& in = r.inside;
    if (r.flags & kDirFs) {
        const std::string& fs = *r.outside;
        if ((fs == "proc" && in == "proc") || (fs == "sysfs" && in == "sys") ||
            (fs == "devpts" && in == "dev/pts") ||
            (fs == "tmpfs" && (in == "dev/shm" || in == "tmp")))
            return true;
        if (fs != "tmpfs")
            throw PlanError(cat("--dir=", in, "=", fs, ":fs: gpubox mounts ", fs,
                                " only at its own place (/proc, /sys, /dev/pts)"));
        return false;
    }
    if (r.flags & kDirTmp) return in == "tmp";
    return in == "dev" && (r.flags & kDirDev);
}

void refuse_flags(const DirRule& r) {
    if (r.flags & kDirNoexec)
        throw PlanError(
            cat("--dir=", r.inside,
                ":noexec: gpubox cannot bind a directory noexec (its binds are "
                "exec, nosuid, nodev); leave the option out or keep binaries elsewhere"));
    if (r.flags & kDirDev)
        throw PlanError(cat("--dir=", r.inside,
                            ":dev: device access needs root; the sandbox has gpubox's own /dev "
                            "(null, zero, full, random, urandom, tty, pts, shm)"));
}

std::vector<Bound> active_rules(const IsolateArgs& a, const BoxPaths& box,
                                const IsolateHost& host) {
    std::vector<Bound> out;
    for (const DirRule& r : a.dirs) {
        if (!r.outside || (!a.default_dirs && (r.flags & kDirDefault))) continue;
        if (gpubox_provides(r)) continue;
        refuse_flags(r);
        const bool fs = (r.flags & (kDirFs | kDirTmp)) != 0;
        const std::string src = fs ? "" : host_side(*r.outside, box);
        if (!fs && (r.flags & kDirMaybe) && !host.exists(src)) continue;
        out.push_back({rootfs::normalize_container_path("/" + r.inside, "--dir"), src, r.flags});
    }
    return out;
}

std::vector<UserMount> plan_mounts(const std::vector<Bound>& rules) {
    std::vector<UserMount> out;
    for (const Bound& b : rules) {
        if (b.host.empty()) out.push_back({UserMount::Type::tmpfs, "", b.target});
        else
            out.push_back({(b.flags & kDirRw) ? UserMount::Type::bind : UserMount::Type::ro_bind,
                           b.host, b.target});
    }
    return out;
}

// isolate opens redirections in /box, before -c applies.
Redirect plan_redirect(const std::string& path, const std::vector<Bound>& rules, bool output) {
    if (path.empty()) return {};
    const std::string p =
        rootfs::normalize_container_path(path[0] == '/' ? path : "/box/" + path, "redirection");
    if (p == "/dev/null") return {path, "/dev", "null", true};
    const Bound* best = nullptr;  // the last rule mounted over p wins, as the mounts stack
    for (const Bound& b : rules)
        if (!b.host.empty() && rootfs::is_within(p, b.target)) best = &b;
    if (!best)
        throw PlanError(cat("open(\"", path,
                            "\"): gpubox opens redirections in a bound directory (such as /box); ",
                            quote(p), " is in none"));
    if (output && !(best->flags & kDirRw))
        throw PlanError(cat("open(\"", path, "\"): Read-only file system"));
    const std::string rel =
        p == best->target ? "." : p.substr(best->target == "/" ? 1 : best->target.size() + 1);
    return {path, best->host, rel, (best->flags & kDirRw) != 0};
}

isolate::Limits plan_limits(const IsolateArgs& a, const IsolateHost& host) {
    isolate::Limits l;
    if (a.time > 0) l.cpu_seconds = std::max(a.time, a.extra_time);  // isolate kills past both
    if (a.wall_time > 0) l.wall_seconds = a.wall_time;
    if (a.mem_kb) l.as_bytes = a.mem_kb * 1024;
    if (a.cg && a.cg_mem_kb) l.memory_bytes = a.cg_mem_kb * 1024;
    if (a.processes && *a.processes)
        l.pids = *a.processes;  // -p and -p0: any number (gpubox's default cap)
    if (a.fsize_kb) {
        l.fsize_bytes = a.fsize_kb * 1024;
        // Output to a file reaches it through gpubox's relay, where RLIMIT_FSIZE cannot see it:
        // the relay's cap stands in, and its kill is reported as isolate's SIGXFSZ.
        if (!a.stdout_file.empty() || host.regular_file[1]) l.stdout_bytes = l.fsize_bytes;
        if (!a.stderr_file.empty() || (!a.stderr_to_stdout && host.regular_file[2]))
            l.stderr_bytes = l.fsize_bytes;
    }
    l.stack_bytes = a.stack_kb ? a.stack_kb * 1024 : RLIM_INFINITY;  // isolate: unlimited unless -k
    if (a.open_files) l.nofile = a.open_files;
    return l;
}

}  // namespace

BoxPaths box_paths(const std::string& boxes_root, int box_id) {
    const std::string dir = cat(boxes_root, "/", box_id);
    return {dir, dir + "/box", dir + "/root"};
}

std::string unsupported_isolate_request(const IsolateArgs& a, unsigned uid, unsigned gid) {
    if (a.as_uid.has_value() != a.as_gid.has_value())
        return "--as-uid and --as-gid must be used either both or none";
    if ((a.as_uid && *a.as_uid != uid) || (a.as_gid && *a.as_gid != gid))
        return cat("--as-uid/--as-gid: gpubox runs unprivileged as the caller (uid ", uid, ", gid ",
                   gid, ") and cannot act on behalf of another user");
    if (a.tty_hack)
        return "--tty-hack is not supported: the program runs in a session of its own, without a "
               "terminal";
    if (a.inherit_fds)
        return "--inherit-fds is not supported: gpubox passes the program fds 0-2 only";
    if (a.core_kb)
        return "--core: gpubox cannot let the program write core files (only --core=0, the "
               "default)";
    if (a.mode == IsolateMode::init && a.quota)
        return "--quota: disk quotas need root (quotactl); gpubox cannot set them (bound the box "
               "with --fsize)";
    return "";
}

std::vector<std::pair<std::string, std::string>> plan_isolate_env(
    const IsolateArgs& a, const std::vector<std::pair<std::string, std::string>>& environ) {
    std::vector<std::pair<std::string, std::string>> env =
        a.full_env ? environ : decltype(environ){};
    std::vector<EnvRule> rules = {{"LIBC_FATAL_STDERR_", "1"}};
    rules.insert(rules.end(), a.env.begin(), a.env.end());
    for (const EnvRule& r : rules) {
        std::erase_if(env, [&](const auto& kv) { return kv.first == r.var; });
        if (r.value && !r.value->empty()) env.emplace_back(r.var, *r.value);
        if (r.value) continue;
        auto it = std::find_if(environ.begin(), environ.end(),
                               [&](const auto& kv) { return kv.first == r.var; });
        if (it != environ.end()) env.push_back(*it);
    }
    return env;
}

std::string isolate_workdir(const IsolateArgs& a) {
    if (a.chdir.empty()) return "/box";
    return rootfs::normalize_container_path(a.chdir[0] == '/' ? a.chdir : "/box/" + a.chdir,
                                            "--chdir");
}

IsolateRun plan_isolate_run(const IsolateArgs& a, const BoxPaths& box, const IsolateHost& host) {
    if (const std::string why = unsupported_isolate_request(a, host.uid, host.gid); !why.empty())
        throw PlanError(why);
    IsolateRun run;
    launcher::Options& o = run.options;
    o.command = launcher::Command::run;
    o.verbosity = a.verbose;
    o.rootfs = box.root;
    // isolate's box root is a fresh tmpfs with the rules' directories mounted in it: so is ours
    // (box.root, made empty by --init, only where it is attached).
    o.root_mode = rootfs::RootMode::tmpfs;
    o.argv = a.argv;
    o.share_net = a.share_net;
    o.workdir = isolate_workdir(a);
    o.bare_env = true;
    o.preflight = preflight::Mode::off;  // isolate's stderr is the judge's: no preflight lines
    o.quiet = true;                      // and no "gpubox: killed: ..." beside isolate's line
    // isolate's box has no /sys (whose files tell the host's hardware and settings) and no
    // /run: only a rule of the judge's brings sysfs (--dir=sys=sysfs:fs) or a tmpfs there.
    o.sysfs = std::any_of(a.dirs.begin(), a.dirs.end(), [&](const DirRule& r) {
        return r.outside && (r.flags & kDirFs) && *r.outside == "sysfs" && r.inside == "sys" &&
               (a.default_dirs || !(r.flags & kDirDefault));
    });
    o.run_tmpfs = false;
    o.env = plan_isolate_env(a, host.environ);
    const std::vector<Bound> rules = active_rules(a, box, host);
    o.mounts = plan_mounts(rules);
    o.limits = plan_limits(a, host);
    // A judge's site may demand exact limits without changing the judge's command line.
    o.require_cgroup = std::any_of(host.environ.begin(), host.environ.end(), [](const auto& kv) {
        return kv.first == "GPUBOX_REQUIRE_CGROUP" && kv.second == "1";
    });
    run.report_limits = o.limits;
    if (a.time > 0) run.report_limits.cpu_seconds = a.time;
    run.redirect = {plan_redirect(a.stdin_file, rules, false),
                    plan_redirect(a.stdout_file, rules, true),
                    plan_redirect(a.stderr_file, rules, true)};
    return run;
}

}  // namespace gpubox::ioi
