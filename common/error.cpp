#include "common/error.hpp"

#include <cerrno>
#include <cstring>

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
    } catch (...) {
    }
    return &e;
}

std::string sys_hint(const SysError& s) {
    const std::string& op = s.op;
    const int err = s.err();
    if (starts_with(op, "clone") || starts_with(op, "unshare") ||
        op.find("uid_map") != std::string::npos || op.find("setgroups") != std::string::npos) {
        if (err == EPERM || err == EACCES)
            return "unprivileged user namespaces are refused: check sysctl "
                   "kernel.apparmor_restrict_unprivileged_userns (set it to 0 or install "
                   "gpubox's AppArmor profile), kernel.unprivileged_userns_clone=1, and that no "
                   "outer seccomp filter blocks clone(CLONE_NEWUSER)";
        if (err == ENOSPC || err == EINVAL || err == EUSERS)
            return "user namespaces are disabled or exhausted: check sysctl "
                   "user.max_user_namespaces (must be > 0)";
    }
    if (op.find("\"proc\"") != std::string::npos && err == EPERM)
        return "the kernel refused a fresh /proc: an outer container masks parts of the host "
               "/proc (Docker/Podman do); run gpubox on the host or in a container with an "
               "unmasked /proc";
    if (op.find("\"sysfs\"") != std::string::npos && err == EPERM)
        return "a fresh /sys needs a new network namespace; drop --share-net";
    if ((starts_with(op, "fsmount") || starts_with(op, "move_mount")) && err == ENOSPC)
        return "too many mounts: raise sysctl fs.mount-max";
    if (op.find("\"overlay\"") != std::string::npos)
        return "overlayfs refused gpubox's layers (the kernel's log says why: dmesg | grep overlayfs; "
               "it needs Linux >= 5.11 in a user namespace); --writable uses ROOTFS itself, read-write, instead";
    if (starts_with(op, "seccomp") && err == EINVAL)
        return "the kernel lacks seccomp filter support (CONFIG_SECCOMP_FILTER)";
    if (starts_with(op, "open") && op.find("/dev/nvidia-uvm") != std::string::npos &&
        err == ENOENT)
        return "the host has not created /dev/nvidia-uvm yet: run 'nvidia-modprobe -u -c=0' "
               "once as root, or any CUDA program on the host";
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
    } catch (...) {
    }
    return {};
}

}  // namespace gpubox
