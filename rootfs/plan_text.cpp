#include <sys/sysmacros.h>

#include <iomanip>
#include <sstream>

#include "common/text.hpp"
#include "rootfs/plan.hpp"

namespace gpubox::rootfs {
namespace {

std::string size_text(std::uint64_t b) {
    if (b == 0) return "default";
    const std::string s = unit_size(b);
    return s.back() == 'B' ? s.substr(0, s.size() - 1) : s;
}

std::string mode_text(mode_t m) {
    std::ostringstream s;
    s << std::oct << std::setw(4) << std::setfill('0') << m;
    return s.str();
}

std::string render(const Bind& b) {
    return cat(b.read_only ? "ro-bind " : "bind ", b.source, " -> ", b.target,
               b.need == Need::optional ? " (optional)" : "");
}
std::string render(const BindDev& b) {
    std::string dev = b.rdev ? cat(" [", major(*b.rdev), ":", minor(*b.rdev), "]") : "";
    return cat("bind-dev ", b.source, " -> ", b.target, dev,
               b.need == Need::optional ? " (optional)" : "");
}
std::string render(const Proc& p) { return cat("proc ", p.target, " (nosuid,nodev,noexec)"); }
std::string render(const Sysfs& s) {
    return s.fresh ? cat("sysfs ", s.target, " (ro,nosuid,nodev,noexec)")
                   : cat("rbind-ro /sys -> ", s.target, " (host sysfs: no new net namespace)");
}
std::string render(const Tmpfs& t) {
    return cat("tmpfs ", t.target, " (",
               t.size        ? cat("its own, size=", t.size)
               : t.read_only ? "ro once filled"
                             : "in gpubox's tmpfs",
               ",mode=", mode_text(t.mode), ",nosuid,nodev", t.noexec ? ",noexec" : "", ")");
}
std::string render(const Devpts& d) {
    return cat("devpts ", d.target, " (newinstance,ptmxmode=0666,mode=0620)");
}
std::string render(const Symlink& s) { return cat("symlink ", s.path, " -> ", s.link_text); }
std::string render(const MaskPath& m) { return cat("mask ", m.target); }
std::string render(const RemountRo& r) { return cat("remount-ro ", r.target); }
std::string render(const WriteFile& w) {
    return cat("file ", w.target, " (", w.content.size(), " bytes, mode=", mode_text(w.mode), ")");
}
std::string render(const MakeDir& d) {
    return cat("mkdir ", d.target, " (mode=", mode_text(d.mode), ")");
}

}  // namespace

std::string to_string(const MountOp& op) {
    return std::visit([](const auto& o) { return render(o); }, op);
}

std::string to_string(const RootSpec& root) {
    switch (root.mode) {
        case RootMode::overlay:
            if (!root.overlay_dir.empty())
                return cat("root overlay lower=", root.rootfs, " upper=", root.overlay_dir,
                           "/upper (--overlay: ROOTFS read-only, writes kept in DIR)");
            return cat("root overlay lower=", root.rootfs,
                       " upper=gpubox's tmpfs (ROOTFS read-only, writes discarded)");
        case RootMode::read_only:
            return cat("root read-only overlay lower=", root.rootfs, " (no writes outside tmpfs)");
        case RootMode::writable:
            return cat("root rbind ", root.rootfs, " (writable: writes reach ROOTFS on disk)");
        case RootMode::tmpfs:
            return "root a directory of gpubox's tmpfs (nothing of ROOTFS; writes discarded)";
    }
    return {};
}

std::string tmpfs_text(const RootSpec& root) {
    return cat("gpubox's tmpfs: size=", size_text(root.tmpfs_size), " (one budget: ",
               root.mode == RootMode::overlay ? "the root's layer, "
               : root.mode == RootMode::tmpfs ? "the root, "
                                              : "",
               "/tmp, /run, /dev/shm, --tmpfs)");
}

}  // namespace gpubox::rootfs
