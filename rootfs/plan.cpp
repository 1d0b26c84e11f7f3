#include "rootfs/plan.hpp"

#include <sys/sysmacros.h>

#include <iterator>
#include <span>

#include "common/error.hpp"
#include "common/text.hpp"
#include "rootfs/paths.hpp"

namespace gpubox::rootfs {
namespace {

// /proc entries that leak host state or accept writes that matter; masked as in the OCI default
// profile. Files get /dev/null bound over them, directories an empty read-only tmpfs.
const char* const kProcMasks[] = {"/proc/kcore",       "/proc/keys",          "/proc/timer_list",
                                  "/proc/sched_debug", "/proc/sysrq-trigger", "/proc/latency_stats",
                                  "/proc/acpi",        "/proc/scsi",          "/proc/asound",
                                  "/proc/firmware"};
const char* const kProcReadOnly[] = {"/proc/sys", "/proc/bus", "/proc/fs", "/proc/irq"};
const char* const kDevNodes[] = {"null", "zero", "full", "random", "urandom", "tty"};

const dev_t kDevRdev[] = {makedev(1, 3), makedev(1, 5), makedev(1, 7),
                          makedev(1, 8), makedev(1, 9), makedev(5, 0)};

void add_base_ops(const PlanInputs& in, std::vector<MountOp>& ops) {
    if (!in.new_pid_ns)
        throw PlanError("a fresh /proc needs a new pid namespace",
                        "gpubox always creates one; this is a bug");
    ops.push_back(Proc{});
    for (const char* p : kProcMasks) ops.push_back(MaskPath{.target = p});
    for (const char* p : kProcReadOnly) ops.push_back(RemountRo{.target = p});
    if (in.sysfs) ops.push_back(Sysfs{.target = "/sys", .fresh = in.new_net_ns});
    // Sealed once filled: it holds gpubox's nodes and links, and takes no file of the workload's.
    ops.push_back(Tmpfs{.target = "/dev", .noexec = true, .read_only = true});
    for (std::size_t i = 0; i < std::size(kDevNodes); ++i)
        ops.push_back(BindDev{.source = cat("/dev/", kDevNodes[i]),
                              .target = cat("/dev/", kDevNodes[i]),
                              .rdev = kDevRdev[i],
                              .place = Place::gpubox});
    ops.push_back(Devpts{.target = "/dev/pts"});
    ops.push_back(Symlink{.link_text = "pts/ptmx", .path = "/dev/ptmx"});
    ops.push_back(Symlink{.link_text = "/proc/self/fd", .path = "/dev/fd"});
    ops.push_back(Symlink{.link_text = "/proc/self/fd/0", .path = "/dev/stdin"});
    ops.push_back(Symlink{.link_text = "/proc/self/fd/1", .path = "/dev/stdout"});
    ops.push_back(Symlink{.link_text = "/proc/self/fd/2", .path = "/dev/stderr"});
    ops.push_back(Tmpfs{.target = "/dev/shm",
                        .mode = 01777,
                        .noexec = true,
                        .place = Place::gpubox,
                        .size = in.shm_size});
    ops.push_back(Tmpfs{.target = "/tmp", .mode = 01777});
    if (in.run_tmpfs) ops.push_back(Tmpfs{.target = "/run"});
}

// Which filesystem a target falls in, given the ops before it (`before`, then `then`): the
// innermost earlier mount wins.
Place place_for(const std::string& target, std::span<const MountOp> before,
                std::span<const MountOp> then = {}) {
    Place place = Place::image;
    std::size_t best = 0;
    for (std::span<const MountOp> ops : {before, then})
        for (const MountOp& op : ops) {
            Place p;
            if (std::holds_alternative<Tmpfs>(op)) p = Place::gpubox;
            else if (std::holds_alternative<Proc>(op) || std::holds_alternative<Sysfs>(op) ||
                     std::holds_alternative<Devpts>(op))
                p = Place::kernel;
            else continue;
            const std::string& t = target_of(op);
            if (t != target && is_within(target, t) && t.size() >= best) best = t.size(), place = p;
        }
    return place;
}

void set_place(MountOp& op, Place p) {
    std::visit(
        [&](auto& o) {
            if constexpr (requires { o.place; }) o.place = p;
        },
        op);
}

void add_user_mounts(const PlanInputs& in, std::vector<MountOp>& ops) {
    for (const UserMount& m : in.user_mounts) {
        if (m.target == "/")
            throw PlanError(cat("cannot mount over / (", quote(m.source), ")"),
                            "pass the directory as ROOTFS instead");
        MountOp op;
        if (m.type == UserMount::Type::tmpfs) op = Tmpfs{.target = m.target};
        else
            op = Bind{.source = m.source,
                      .target = m.target,
                      .read_only = m.type == UserMount::Type::ro_bind,
                      .place = Place::image};
        Place p = place_for(m.target, ops);
        if (p == Place::kernel)
            throw PlanError(cat("cannot mount on ", quote(m.target),
                                ": it lies in a kernel filesystem gpubox mounts (/proc, /sys)"));
        set_place(op, p);
        ops.push_back(std::move(op));
    }
}

}  // namespace

MountPlan build_mount_plan(const PlanInputs& in) {
    MountPlan plan;
    plan.root = in.root;
    if (in.root.rootfs.empty()) throw PlanError("no ROOTFS given");
    add_base_ops(in, plan.ops);
    plan.user_from = plan.ops.size();
    std::vector<MountOp> placed = place_device_ops(plan, in.device_ops);
    plan = with_device_ops(std::move(plan), std::move(placed));
    add_user_mounts(in, plan.ops);
    return plan;
}

std::vector<MountOp> place_device_ops(const MountPlan& plan, std::vector<MountOp> ops) {
    const std::span<const MountOp> base(plan.ops.data(), plan.user_from);
    for (std::size_t i = 0; i < ops.size(); ++i) {
        const std::string& t = target_of(ops[i]);
        const Place place = place_for(t, base, std::span<const MountOp>(ops.data(), i));
        set_place(ops[i], place);
        if (plan.root.mode == RootMode::writable && place == Place::image && creates_entry(ops[i]))
            throw PlanError(cat("cannot create ", quote(t),
                                " with --writable: gpubox never writes into ROOTFS"),
                            "drop --writable; the overlay root takes injected files in tmpfs");
    }
    return ops;
}

MountPlan with_device_ops(MountPlan plan, std::vector<MountOp> placed) {
    plan.ops.insert(plan.ops.begin() + static_cast<std::ptrdiff_t>(plan.user_from),
                    std::make_move_iterator(placed.begin()), std::make_move_iterator(placed.end()));
    plan.user_from += placed.size();
    return plan;
}

std::string step_name(const MountPlan& plan, std::size_t i) {
    return cat("mount step ", i + 1, "/", plan.ops.size(), " (", to_string(plan.ops[i]), ")");
}

const std::string& target_of(const MountOp& op) {
    return std::visit(
        [](const auto& o) -> const std::string& {
            if constexpr (requires { o.target; }) return o.target;
            else return o.path;
        },
        op);
}

}  // namespace gpubox::rootfs
