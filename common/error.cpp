#include "common/error.hpp"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "common/text.hpp"

namespace gpubox {
namespace {

std::string message_of(const std::exception& e) {
    if (auto* s = dynamic_cast<const SysError*>(&e))
        return cat(s->op, ": ", std::strerror(s->err()));
    return e.what();
}

void walk(const std::exception& e, std::string& out) {
    if (!out.empty()) out += ": ";
    out += message_of(e);
    try {
        std::rethrow_if_nested(e);
    } catch (const std::exception& inner) {
        walk(inner, out);
    } catch (...) {
        out += ": unknown error";
    }
}

const std::exception* innermost(const std::exception& e) {
    try {
        std::rethrow_if_nested(e);
    } catch (const std::exception& inner) {
        return innermost(inner);
    } catch (...) {}
    return &e;
}

constexpr const char* kUsernsRefused =
    "unprivileged user namespaces are refused: check sysctl "
    "kernel.apparmor_restrict_unprivileged_userns (set it to 0 or install gpubox's AppArmor "
    "profile), kernel.unprivileged_userns_clone=1, and that no outer seccomp filter blocks "
    "clone(CLONE_NEWUSER)";
constexpr const char* kUsernsExhausted =
    "user namespaces are disabled or exhausted: check sysctl user.max_user_namespaces (must be > "
    "0)";
constexpr const char* kProcMasked =
    "the kernel refused a fresh /proc: an outer container masks parts of the host /proc "
    "(Docker/Podman do); run gpubox on the host or in a container with an unmasked /proc";
constexpr const char* kSysfsNeedsNetns =
    "a fresh /sys needs a new network namespace; drop --share-net";
constexpr const char* kMountMax = "too many mounts: raise sysctl fs.mount-max";
constexpr const char* kOverlay =
    "overlayfs refused gpubox's layers (the kernel's log says why: dmesg | grep overlayfs; it "
    "needs Linux >= 5.11 in a user namespace, and an --overlay DIR on a local filesystem with "
    "user xattrs: ext4, xfs, btrfs, tmpfs); --writable uses ROOTFS itself, read-write, instead";
constexpr const char* kSeccomp = "the kernel lacks seccomp filter support (CONFIG_SECCOMP_FILTER)";
constexpr const char* kNvidiaUvm =
    "the host has not created /dev/nvidia-uvm yet: run 'nvidia-modprobe -u -c=0' once as root, "
    "or any CUDA program on the host";

using S = Syscall;
enum class On { any_path, path_is, path_ends, path_has };  // how a row matches SysError::path
constexpr S kAnyCall = S::unknown;
constexpr int kAnyErr = 0;

struct HintRow {
    Syscall call;             // kAnyCall: whatever the call
    std::array<int, 3> errs;  // kAnyErr (0) in the first: whatever the errno
    On on;
    std::string_view path;
    const char* hint;
};

// (syscall, errno, path) -> hint; the first row that matches wins.
constexpr HintRow kHints[] = {
    {S::clone3, {EPERM, EACCES}, On::any_path, "", kUsernsRefused},
    {S::clone, {EPERM, EACCES}, On::any_path, "", kUsernsRefused},
    {S::unshare, {EPERM, EACCES}, On::any_path, "", kUsernsRefused},
    {kAnyCall, {EPERM, EACCES}, On::path_ends, "uid_map", kUsernsRefused},
    {kAnyCall, {EPERM, EACCES}, On::path_ends, "setgroups", kUsernsRefused},
    {S::clone3, {ENOSPC, EINVAL, EUSERS}, On::any_path, "", kUsernsExhausted},
    {S::clone, {ENOSPC, EINVAL, EUSERS}, On::any_path, "", kUsernsExhausted},
    {S::unshare, {ENOSPC, EINVAL, EUSERS}, On::any_path, "", kUsernsExhausted},
    {kAnyCall, {ENOSPC, EINVAL, EUSERS}, On::path_ends, "uid_map", kUsernsExhausted},
    {kAnyCall, {ENOSPC, EINVAL, EUSERS}, On::path_ends, "setgroups", kUsernsExhausted},
    {kAnyCall, {EPERM}, On::path_is, "proc", kProcMasked},
    {kAnyCall, {EPERM}, On::path_is, "sysfs", kSysfsNeedsNetns},
    {S::fsmount, {ENOSPC}, On::any_path, "", kMountMax},
    {S::move_mount, {ENOSPC}, On::any_path, "", kMountMax},
    {kAnyCall, {kAnyErr}, On::path_is, "overlay", kOverlay},
    {S::seccomp, {EINVAL}, On::any_path, "", kSeccomp},
    {S::open, {ENOENT}, On::path_has, "/dev/nvidia-uvm", kNvidiaUvm},
    {S::openat, {ENOENT}, On::path_has, "/dev/nvidia-uvm", kNvidiaUvm},
    {S::openat2, {ENOENT}, On::path_has, "/dev/nvidia-uvm", kNvidiaUvm},
    {S::open_tree, {ENOENT}, On::path_has, "/dev/nvidia-uvm", kNvidiaUvm},
    {S::open_tree_attr, {ENOENT}, On::path_has, "/dev/nvidia-uvm", kNvidiaUvm},
};

bool path_matches(const HintRow& r, std::string_view path) {
    switch (r.on) {
        case On::any_path: return true;
        case On::path_is: return path == r.path;
        case On::path_ends:
            return path.size() >= r.path.size() &&
                   path.substr(path.size() - r.path.size()) == r.path;
        case On::path_has: return path.find(r.path) != std::string_view::npos;
    }
    return false;
}

bool row_matches(const HintRow& r, const SysError& s) {
    if (r.call != kAnyCall && r.call != s.call) return false;
    const bool any_err = r.errs[0] == kAnyErr;
    if (!any_err && std::find(r.errs.begin(), r.errs.end(), s.err()) == r.errs.end()) return false;
    return path_matches(r, s.path);
}

std::string sys_hint(const SysError& s) {
    for (const HintRow& r : kHints)
        if (row_matches(r, s)) return r.hint;
    return {};
}

}  // namespace

std::string describe(const std::exception_ptr& error) {
    std::string out;
    try {
        std::rethrow_exception(error);
    } catch (const std::exception& e) {
        walk(e, out);
    } catch (...) {
        out = "unknown error";
    }
    return out;
}

Syscall SysError::syscall_of_op_text(const std::string& op_text) {
    return syscall_from_name(op_text.substr(0, op_text.find('(')));
}

// quote()'s text back: the first "..." of `op_text`, its escapes undone (\xNN stays as it is).
std::string SysError::path_of_op_text(const std::string& op_text) {
    const std::size_t open = op_text.find('"');
    if (open == std::string::npos) return {};
    std::string out;
    for (std::size_t i = open + 1; i < op_text.size(); ++i) {
        const char c = op_text[i];
        if (c == '"') return out;
        if (c == '\\' && i + 1 < op_text.size() &&
            (op_text[i + 1] == '"' || op_text[i + 1] == '\\'))
            ++i;
        out += op_text[i];
    }
    return {};  // unterminated: not a quoted path
}

const SysError* innermost_sys_error(const std::exception& e) {
    return dynamic_cast<const SysError*>(innermost(e));
}

std::string hint_for(const std::exception_ptr& error) {
    try {
        std::rethrow_exception(error);
    } catch (const PlanError& p) {
        return p.hint;
    } catch (const std::exception& e) {
        const std::exception* in = innermost(e);
        if (auto* p = dynamic_cast<const PlanError*>(in)) return p->hint;
        if (auto* s = dynamic_cast<const SysError*>(in)) return sys_hint(*s);
    } catch (...) {}
    return {};
}

}  // namespace gpubox
