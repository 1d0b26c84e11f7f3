#include "isolate/cgroup_plan.hpp"

#include <cstdio>
#include <utility>
#include <vector>

#include "common/error.hpp"
#include "common/text.hpp"

namespace gpubox::isolate {
namespace {

// mountinfo escapes space, tab, newline and backslash as \ooo.
std::string unescape_octal(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\\' && i + 3 < s.size()) {
            const auto d = [&](std::size_t k) { return s[i + k] >= '0' && s[i + k] <= '7'; };
            if (d(1) && d(2) && d(3)) {
                out += static_cast<char>((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 +
                                         (s[i + 3] - '0'));
                i += 3;
                continue;
            }
        }
        out += s[i];
    }
    return out;
}

}  // namespace

namespace {
constexpr std::pair<CgroupMode, std::string_view> kCgroupModes[] = {
    {CgroupMode::auto_, "auto"},
    {CgroupMode::off, "off"},
    {CgroupMode::systemd, "systemd"},
    {CgroupMode::path, "PATH"},  // not a word: any absolute directory
};
}  // namespace

std::string_view to_string(CgroupMode mode) {
    for (const auto& [m, name] : kCgroupModes)
        if (m == mode) return name;
    return "?";
}

CgroupRequest parse_cgroup_request(const std::string& text) {
    for (const auto& [mode, name] : kCgroupModes)
        if (mode != CgroupMode::path && name == text) return {mode, ""};
    if (starts_with(text, "/") && text.find('\0') == std::string::npos)
        return {CgroupMode::path, text};
    throw UsageError(
        cat("--cgroup: expected auto, off, systemd or an absolute cgroup directory, got ",
            quote(text)));
}

std::vector<CgroupRoute> plan_cgroup_routes(CgroupMode mode) {
    switch (mode) {
        case CgroupMode::auto_: return {CgroupRoute::own, CgroupRoute::systemd_scope};
        case CgroupMode::off: return {};
        case CgroupMode::systemd: return {CgroupRoute::systemd_scope};
        case CgroupMode::path: return {CgroupRoute::given};
    }
    return {};
}

bool cgroup_wanted(const Limits& l, CgroupMode mode, bool required, bool caller_root,
                   bool nproc_per_userns) {
    if (required) return true;
    if (mode == CgroupMode::off || !l.any()) return false;
    return mode != CgroupMode::auto_ || l.cpu_seconds || l.memory_bytes ||
           (l.pids && *l.pids && (caller_root || !nproc_per_userns));
}

int cgroup_score(const CgroupCaps& got, const Limits& wanted) {
    if (!got.usable) return 0;
    return 1 + (wanted.memory_bytes && got.memory ? 2 : 0) + (wanted.pids && got.pids ? 2 : 0);
}

bool cgroup_covers(const CgroupCaps& got, const Limits& wanted) {
    return got.usable && (!wanted.memory_bytes || got.memory) && (!wanted.pids || got.pids);
}

namespace {
constexpr const char* kDelegateDropIn =
    "as root: printf '[Service]\\nDelegate=cpu cpuset io memory pids\\n' > "
    "/etc/systemd/system/user@.service.d/delegate.conf (mkdir -p the directory first), "
    "systemctl daemon-reload, then log in again";
}  // namespace

std::string cgroup_fix(CgroupRoute route, const std::string& why, uid_t uid) {
    const auto says = [&](std::string_view s) { return why.find(s) != std::string::npos; };
    if (says("no cgroup v2 hierarchy") || says("no cgroup v2 entry"))
        return "boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1 on the kernel command "
               "line)";
    if (says("cgroup/unified"))  // hybrid: the controllers are in cgroup v1's hierarchies
        return "boot with cgroup v2 alone (systemd.unified_cgroup_hierarchy=1 on the kernel "
               "command line)";
    if (says("controllers not delegated")) return kDelegateDropIn;
    switch (route) {
        case CgroupRoute::own:
            return "run gpubox inside a cgroup delegated to you (a systemd unit or scope with "
                   "Delegate=yes), "
                   "or as root";
        case CgroupRoute::given:
            return "give a cgroup v2 directory you own whose cgroup.subtree_control you may write, "
                   "and run "
                   "gpubox from within the same delegated subtree";
        case CgroupRoute::systemd_scope:
            if (says("no bus socket") && uid == 0)
                return "start systemd's D-Bus system bus (dbus.service)";
            if (says("no bus socket"))
                return cat("loginctl enable-linger \"$(id -un)\" (or log in), so that user@", uid,
                           ".service runs, and install dbus-user-session for its D-Bus");
            if (says("no helper gpubox-scope"))
                return "install gpubox-scope (built beside gpubox) next to the gpubox binary, or "
                       "in "
                       "../libexec/gpubox/ from it: gpubox asks systemd for a scope through it";
            if (says("libsystemd.so.0"))
                return "install libsystemd0 (gpubox-scope, gpubox's sd-bus client, links against "
                       "it)";
            if (says("helper \""))
                return "make gpubox-scope owned by root or by gpubox's owner, and chmod go-w it";
            if (says("StartTransientUnit"))
                return "see 'systemctl --user status' and 'journalctl --user -e': the user manager "
                       "refused the scope";
            return "see 'systemctl --user status': is the user manager (user@UID.service) running?";
    }
    return "";
}

std::string cgroup_cpu_fix() { return kDelegateDropIn; }

std::optional<std::string> parse_cgroup2_mount(std::string_view mountinfo) {
    for (std::string_view line : split_lines(mountinfo)) {
        const auto dash = line.find(" - ");
        if (dash == std::string_view::npos) continue;
        const std::vector<std::string_view> tail = split_words(line.substr(dash + 3));
        if (tail.empty() || tail[0] != "cgroup2") continue;
        // "ID PARENT MAJ:MIN ROOT MOUNT-POINT ...": the fifth field.
        const std::vector<std::string_view> head = split_words(line.substr(0, dash));
        if (head.size() >= 5) return unescape_octal(head[4]);
    }
    return std::nullopt;
}

std::optional<std::string> parse_proc_cgroup(std::string_view text) {
    for (std::string_view line : split_lines(text))
        if (starts_with(line, "0::/")) return std::string(line.substr(3));
    return std::nullopt;
}

std::string common_cgroup(const std::string& a, const std::string& b) {
    const auto names = [](const std::string& path) {
        std::vector<std::string_view> out;
        for (std::string_view n : split_at(path, '/'))
            if (!n.empty()) out.push_back(n);
        return out;
    };
    const std::vector<std::string_view> x = names(a), y = names(b);
    std::string out;
    for (std::size_t i = 0; i < x.size() && i < y.size() && x[i] == y[i]; ++i) (out += '/') += x[i];
    return out.empty() ? "/" : out;
}

std::string scope_unit_name(pid_t pid, std::uint32_t random) {
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", random);
    return cat("gpubox-", pid, "-", hex, ".scope");
}

bool cgroup_is_unit(std::string_view path, std::string_view unit) {
    const auto slash = path.rfind('/');
    return slash != std::string_view::npos && path.substr(slash + 1) == unit;
}

std::vector<std::string> plan_subtree_control(std::string_view controllers,
                                              const std::vector<std::string>& wanted) {
    std::vector<std::string> out;
    for (const std::string& c : wanted)
        if (has_word(controllers, c)) out.push_back("+" + c);
    return out;
}

std::optional<pid_t> sandbox_cgroup_pid(const std::string& name) {
    const std::string prefix = "gpubox-";
    if (name.size() <= prefix.size() || name.size() > prefix.size() + 9 ||
        name.compare(0, prefix.size(), prefix) != 0)
        return std::nullopt;
    pid_t pid = 0;
    for (std::size_t i = prefix.size(); i < name.size(); ++i) {
        if (name[i] < '0' || name[i] > '9') return std::nullopt;
        pid = pid * 10 + (name[i] - '0');
    }
    return pid > 0 ? std::optional<pid_t>(pid) : std::nullopt;
}

}  // namespace gpubox::isolate
