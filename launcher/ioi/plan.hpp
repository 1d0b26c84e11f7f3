#pragma once
// Pure: what one `isolate --run` becomes in gpubox's terms. The box's root is a small empty
// directory of the box; isolate's directory rules become gpubox's binds and tmpfs mounts on it,
// and gpubox's own /proc, /dev (with /dev/shm and /dev/pts), /sys, /tmp and /run stand in for
// isolate's proc, dev, devpts and tmp rules.
#include <array>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "isolate/limits.hpp"
#include "launcher/ioi/cli.hpp"
#include "launcher/cli/options.hpp"

namespace gpubox::ioi {

// One box on the host: <boxes>/<id>, its box/ (the program's /box) and its root/ (empty).
struct BoxPaths {
    std::string dir, box, root;
};
BoxPaths box_paths(const std::string& boxes_root, int box_id);

// What the planner may know of the host, passed in.
struct IsolateHost {
    std::function<bool(const std::string&)> exists;            // for `maybe` rules
    std::vector<std::pair<std::string, std::string>> environ;  // the caller's, for -E VAR and -e
    unsigned uid = 0, gid = 0;                                 // the caller's
    std::array<bool, 3> regular_file{};  // the caller's fd 0-2 is a regular file
};

// A redirection (-i, -o, -r) opened on the host: a path below a bound host directory, resolved
// inside that directory (RESOLVE_IN_ROOT), as isolate opens it inside the box.
struct Redirect {
    std::string sandbox_path;  // as the program sees it, for messages
    std::string host_dir;      // "" when there is no redirection
    std::string rel;           // below host_dir
    bool writable = false;     // the rule is rw
};

struct IsolateRun {
    launcher::Options options;      // for run_sandbox(); no --meta: isolate mode writes it
    isolate::Limits report_limits;  // what the meta file reports against (-t, not -t + -x)
    std::array<Redirect, 3> redirect;
};

// Pure. Throws PlanError where gpubox cannot honour a request (noexec, dev, --core > 0, another
// uid) and for a redirection outside every rule.
IsolateRun plan_isolate_run(const IsolateArgs& a, const BoxPaths& box, const IsolateHost& host);

// Pure: isolate's environment rules (rules.c: setup_environment()).
std::vector<std::pair<std::string, std::string>> plan_isolate_env(
    const IsolateArgs& a, const std::vector<std::pair<std::string, std::string>>& environ);

// Pure: the program's working directory: /box, or -c taken from there, as isolate's chdir().
std::string isolate_workdir(const IsolateArgs& a);

// Pure: the errors isolate's command line gets from gpubox whatever the mode (--as-uid of
// another user, --tty-hack, --inherit-fds); "" if none.
std::string unsupported_isolate_request(const IsolateArgs& a, unsigned uid, unsigned gid);

}  // namespace gpubox::ioi
