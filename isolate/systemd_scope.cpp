#include "isolate/systemd_scope.hpp"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/companion.hpp"
#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "isolate/cgroup_plan.hpp"

namespace gpubox::isolate {
namespace {

// gpubox-scope waits at most 5 s for its D-Bus call and 5 s for the job; this bounds the rest.
constexpr int kHelperTimeoutMs = 15'000;

// Runs one step; any failure is nested under the step's name.
template <typename F>
auto step(const char* name, F&& f) {
    try {
        return f();
    } catch (...) {
        std::throw_with_nested(SetupError(name));
    }
}

// The caller's systemd: the user manager's bus, or for uid 0 the system bus. An address we
// build ourselves (not sd_bus_open_user()), so that it works without XDG_RUNTIME_DIR, so that a
// missing socket is found before any helper runs, and so that the helper needs no environment.
std::string bus_address(bool system) {
    const char* env = std::getenv(system ? "DBUS_SYSTEM_BUS_ADDRESS" : "DBUS_SESSION_BUS_ADDRESS");
    if (env && *env) return env;
    if (system) return "unix:path=/run/dbus/system_bus_socket";
    const char* runtime = std::getenv("XDG_RUNTIME_DIR");
    return cat("unix:path=",
               runtime && *runtime ? std::string(runtime) : cat("/run/user/", ::getuid()), "/bus");
}

// Why `address` cannot be connected to: its unix socket is absent; else "" (there, not a unix
// path we can check, or an error the connect itself will name).
std::string missing_bus_socket(const std::string& address, bool system) {
    if (!starts_with(address, "unix:path=") || address.find(',') != std::string::npos) return "";
    const std::string socket = address.substr(10);
    struct stat st {};
    if (sys::try_lstat_at(AT_FDCWD, socket, st) != -ENOENT) return "";
    return cat("no bus socket ", quote(socket),
               system ? "" : cat(" (no systemd user manager for uid ", ::getuid(), ")"));
}

const char* connect_step(bool system) {
    return system ? "connect to the system bus" : "connect to the user bus";
}

// Runs the helper with `args`, an empty environment, stdin /dev/null, stdout and stderr one
// pipe and no other fd; returns what it wrote and its wait status.
std::pair<std::string, int> run_helper(const companion::Program& h,
                                       const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"gpubox-scope"};
    argv.insert(argv.end(), args.begin(), args.end());
    UniqueFd null = sys::open_at(AT_FDCWD, "/dev/null", O_RDONLY | O_CLOEXEC);
    UniqueFd r, w;
    sys::pipe(r, w);
    const pid_t pid = companion::spawn(h, argv, {}, {null.get(), w.get(), w.get()}, true);
    w.reset();
    null.reset();
    std::string out;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(kHelperTimeoutMs);
    bool timed_out = false;
    for (;;) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        const int ready =
            left.count() > 0 ? sys::try_poll_in(r.get(), static_cast<int>(left.count())) : 0;
        if (ready == -EINTR) continue;
        if (ready <= 0) {
            timed_out = true;
            sys::try_kill(pid, SIGKILL);
            break;
        }
        char buf[1024];
        const ssize_t got = sys::read_some(r.get(), buf, sizeof buf);
        if (got <= 0) break;
        if (out.size() < 4096) out.append(buf, static_cast<std::size_t>(got));
    }
    const int status = sys::wait_status(pid);
    if (timed_out)
        throw SetupError(
            cat(quote(h.path), " did not answer within ", kHelperTimeoutMs / 1000, " s"));
    return {out, status};
}

// One line of the helper's answer: its lines joined, the trailing newline dropped.
std::string one_line(std::string text) {
    while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.pop_back();
    for (std::size_t i; (i = text.find('\n')) != std::string::npos;) text.replace(i, 1, "; ");
    return text;
}

}  // namespace

SystemdScope enter_systemd_scope(const std::string& cgroup_mount, const std::string& unit) {
    const bool system = ::geteuid() == 0;
    SystemdScope scope;
    scope.unit = unit;
    const std::string kind = system ? "system" : "user";
    const std::string address = bus_address(system);
    step(connect_step(system), [&] {
        const std::string missing = missing_bus_socket(address, system);
        if (!missing.empty()) throw SetupError(missing);
    });
    const companion::Program helper =
        step("find gpubox's sd-bus helper", [&] { return companion::find("gpubox-scope"); });
    const auto [out, status] =
        run_helper(helper, {kind, address, unit, std::to_string(::getpid())});
    const std::string answer = one_line(out);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || !starts_with(answer, "ok ")) {
        // Exit 1 is the helper's own one-line reason (the step, the call, the error); anything
        // else (the dynamic loader's 127, a signal) is named with the helper's path.
        if (WIFEXITED(status) && WEXITSTATUS(status) == 1 && !answer.empty())
            throw SetupError(answer);
        throw SetupError(cat(quote(helper.path),
                             WIFEXITED(status) ? cat(" exited with status ", WEXITSTATUS(status))
                                               : cat(" was killed by signal ", WTERMSIG(status)),
                             answer.empty() ? "" : cat(": ", answer)));
    }
    scope.dir = step("find the scope's cgroup", [&] {
        const std::string self = sys::read_file("/proc/self/cgroup");
        const auto path = parse_proc_cgroup(self);
        if (!path || !cgroup_is_unit(*path, unit))
            throw SetupError(
                cat("/proc/self/cgroup names ", quote(path ? *path : self), ", not the scope"));
        return cgroup_mount + *path;
    });
    step("move gpubox into the scope's leaf cgroup", [&] {
        UniqueFd dir = sys::open_at(AT_FDCWD, scope.dir, O_PATH | O_DIRECTORY);
        sys::mkdir_at(dir.get(), "monitor", 0755);
        sys::write_file(scope.dir + "/monitor/cgroup.procs", "0");
    });
    step("enable the scope's controllers for its children", [&] {
        const std::string offered = sys::read_file(scope.dir + "/cgroup.controllers");
        const auto words = plan_subtree_control(offered, {"cpu", "memory", "pids"});
        if (!words.empty())
            sys::write_file(scope.dir + "/cgroup.subtree_control", join(words, " "));
        for (const std::string& w : words) scope.controllers.push_back(w.substr(1));
    });
    return scope;
}

std::string systemd_bus_missing() {
    const bool system = ::geteuid() == 0;
    const std::string missing = missing_bus_socket(bus_address(system), system);
    return missing.empty() ? "" : cat(connect_step(system), ": ", missing);
}

}  // namespace gpubox::isolate
