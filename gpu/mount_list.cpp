#include "gpu/mount_list.hpp"

#include <sys/sysmacros.h>

#include <algorithm>

#include "common/error.hpp"
#include "common/text.hpp"
#include "gpu/driver_files.hpp"
#include "gpu/gpu_spec.hpp"
#include "gpu/proc_driver.hpp"
#include "rootfs/paths.hpp"

namespace gpubox::gpu {
namespace {

using namespace rootfs;

// A node must exist on the host as the character device discovery expects.
BindDev device(const Node& n, const char* hint) {
    if (!n.exists) throw PlanError(cat("host device node ", quote(n.path), " is missing"), hint);
    if (!n.is_char)
        throw PlanError(
            cat("host device node ", quote(n.path), " is not the expected character device"),
            "the node does not match the driver's major:minor; recreate it (nvidia-modprobe)");
    return BindDev{.source = n.host, .target = n.path, .rdev = n.rdev, .place = Place::gpubox};
}

void check_driver(const GpuInventory& inv) {
    if (!inv.nvidia_version)
        throw PlanError(
            "no NVIDIA kernel module version (/sys/module/nvidia/version, "
            "/proc/driver/nvidia/version)",
            "is the nvidia kernel module loaded? see 'gpubox doctor'");
    if (!inv.ldcache_problem.empty())
        throw PlanError(cat("cannot find the NVIDIA driver libraries: ", inv.ldcache_problem),
                        "run ldconfig on the host");
    if (inv.libs.empty() && !inv.stale_versions.empty())
        throw PlanError(
            cat("NVIDIA driver/library version mismatch: kernel module ", *inv.nvidia_version,
                ", user-space libraries ", join(inv.stale_versions, ", ")),
            "reboot after a driver upgrade, or install the user-space driver matching the module");
    if (inv.libs.empty())
        throw PlanError(cat("no NVIDIA driver libraries for version ", *inv.nvidia_version,
                            " in the host's ld.so.cache"),
                        "install the NVIDIA user-space driver and run ldconfig");
}

// The device nodes: the control node, each selected GPU's, and those its capabilities need.
void add_nvidia_devices(const GpuInventory& inv, const std::vector<Gpu>& sel, unsigned caps,
                        GpuPlan& p) {
    const char* uvm_hint =
        "run 'nvidia-modprobe -u -c=0' (or any CUDA program) once on the host to create it";
    p.ops.push_back(device(inv.shared_nodes.at("nvidiactl"),
                           "is the NVIDIA driver loaded? run nvidia-modprobe"));
    for (const Gpu& g : sel) {
        if (!g.problem.empty()) throw PlanError(describe_problem(g), kGpuProblemHint);
        p.ops.push_back(device(g.nodes.at(0), "run nvidia-modprobe -c=<minor> on the host"));
        if (g.whole)
            p.summary.push_back(cat("index ", g.index, " -> ", to_string(g.pci), " -> /dev/nvidia",
                                    g.minor, " -> ", g.uuid, " (", g.model, ")"));
        for (const MigDevice& m : g.mig) {
            if (!m.problem.empty())
                throw PlanError(cat(gpu_label(g), " MIG device ", mig_id(g, m), ": ", m.problem),
                                "see 'gpubox doctor'");
            const char* hint = "nvidia-modprobe -f <its access file> makes it";
            p.ops.push_back(device(m.gi_node, hint));
            p.ops.push_back(device(m.ci_node, hint));
            p.summary.push_back(cat("MIG ", mig_id(g, m), " -> ", to_string(g.pci),
                                    " -> /dev/nvidia", g.minor, " ", m.gi_node.path, " ",
                                    m.ci_node.path, " -> ", mig_name(g, m)));
        }
        // The whole GPU is still what nvidia-smi and NVML monitor, so this is no error.
        if (g.whole && g.mig.empty() && g.mig_instances > 0)
            p.warnings.push_back(
                cat(gpu_label(g), " is in MIG mode (", g.mig_instances,
                    " GPU instances): CUDA runs only on MIG devices, so it will find none; give "
                    "them by --gpu GPU:GI:CI (see 'gpubox list'); nvidia-smi still works"));
    }
    if (needs_uvm(caps)) {
        p.ops.push_back(device(inv.shared_nodes.at("nvidia-uvm"), uvm_hint));
        p.ops.push_back(device(inv.shared_nodes.at("nvidia-uvm-tools"), uvm_hint));
    }
    if (needs_modeset(caps))
        p.ops.push_back(device(inv.shared_nodes.at("nvidia-modeset"), "run nvidia-modprobe -m"));
}

// The MIG devices' `access` files, where CUDA looks for the minors of their capability nodes:
// /proc/driver/nvidia/capabilities holds those of the sandbox's MIG devices and nothing else.
void add_mig_access(const std::vector<Gpu>& sel, GpuPlan& p) {
    std::vector<std::string> dirs;
    const auto dir = [&](const std::string& path) {
        for (std::string d = rootfs::parent_of(path); d != "/proc/driver/nvidia";
             d = rootfs::parent_of(d))
            if (std::find(dirs.begin(), dirs.end(), d) == dirs.end()) dirs.push_back(d);
    };
    std::vector<rootfs::MountOp> binds;
    std::vector<std::string> targets;  // two CIs of one GI share its access file
    for (const Gpu& g : sel)
        for (const MigDevice& m : g.mig)
            for (const auto& [path, host] : {std::pair{m.gi_access, m.gi_access_host},
                                             std::pair{m.ci_access, m.ci_access_host}}) {
                if (std::find(targets.begin(), targets.end(), path) != targets.end()) continue;
                dir(path), targets.push_back(path);
                binds.push_back(Bind{.source = host,
                                     .target = path,
                                     .place = Place::image,
                                     .kind = SourceKind::file});
            }
    std::sort(dirs.begin(), dirs.end());  // parents first
    for (const std::string& d : dirs) p.ops.push_back(MakeDir{.target = d, .mode = 0555});
    p.ops.insert(p.ops.end(), binds.begin(), binds.end());
}

// /proc/driver/nvidia: copies of the driver's files, and only the selected GPUs' entries. The
// tmpfs covers /proc/driver, so nvidia-caps and other drivers' entries are hidden too. It is
// read-only, as the driver's own files are.
void add_nvidia_proc(const GpuInventory& inv, const std::vector<Gpu>& sel, GpuPlan& p) {
    p.ops.push_back(Tmpfs{.target = "/proc/driver",
                          .mode = 0555,
                          .noexec = true,
                          .read_only = true,
                          .place = Place::kernel});
    p.ops.push_back(MakeDir{.target = "/proc/driver/nvidia", .mode = 0555});
    p.ops.push_back(MakeDir{.target = "/proc/driver/nvidia/gpus", .mode = 0555});
    const auto file = [&](const char* name, std::string content) {
        p.ops.push_back(WriteFile{.target = cat("/proc/driver/nvidia/", name),
                                  .content = std::move(content),
                                  .mode = 0444});
    };
    if (!inv.proc_version.empty()) file("version", inv.proc_version);
    file("params", rewrite_params(inv.proc_params));
    if (!inv.proc_registry.empty()) file("registry", inv.proc_registry);
    for (const Gpu& g : sel)
        p.ops.push_back(Bind{.source = g.proc_host,
                             .target = "/proc/driver/nvidia/gpus/" + g.proc_dir,
                             .place = Place::image,
                             .kind = SourceKind::dir});
    add_mig_access(sel, p);
}

// Libraries at the image's default library path, with their soname links, plus an
// ld.so.cache that sends every driver soname there: the host's libraries win over any
// the image ships, for any layout, without running ldconfig.
// ld.so.cache lists files, and the utilities are files: a host where one is not fails at
// move_mount() with a clear error instead of mounting it.
void add_nvidia_libraries(const GpuInventory& inv, const ImageInfo& image, GpuPlan& p) {
    std::vector<LdCacheEntry> cache;
    std::vector<std::string> ours;
    for (const DriverLib& lib : inv.libs) {
        const std::string file = image.libdir + "/" + lib.file;
        p.ops.push_back(Bind{.source = lib.host_path,
                             .target = file,
                             .place = Place::image,
                             .kind = SourceKind::file});
        std::vector<std::pair<std::string, std::string>> links;  // name -> link text
        for (const std::string& so : lib.sonames) links.emplace_back(so, lib.file);
        // The development name where programs use it (dlopen("libcuda.so"), -lcuda, -lnvidia-ml),
        // as NVIDIA's container toolkit makes it; other libraries get the links the host has.
        const auto so = lib.file.find(".so.");
        const std::string dev = so == std::string::npos ? "" : lib.file.substr(0, so + 3);
        if ((dev == "libcuda.so" || dev == "libnvidia-ml.so") &&
            std::find(lib.sonames.begin(), lib.sonames.end(), dev) == lib.sonames.end())
            links.emplace_back(dev, lib.sonames.empty() ? lib.file : lib.sonames.front());
        for (const auto& [name, text] : links) {
            p.ops.push_back(Symlink{
                .link_text = text, .path = image.libdir + "/" + name, .place = Place::image});
            cache.push_back({kLdFlagsNative, name, file, 0});
            ours.push_back(name);
        }
    }
    // Forward compatibility: the image's newer driver libraries win, under the same sonames.
    for (LdCacheEntry& e : cache)
        for (const auto& [stem, path] : image.compat_first)
            if (starts_with(e.key, stem + ".so")) e.value = path;
    for (const LdCacheEntry& e : image.ldcache)
        if (!(e.hwcap & kLdHwcapExtension) &&
            std::find(ours.begin(), ours.end(), e.key) == ours.end())
            cache.push_back(e);
    p.ops.push_back(WriteFile{.target = "/etc/ld.so.cache",
                              .content = render_ldcache(cache),
                              .mode = 0644,
                              .place = Place::image});
}

void add_nvidia(const GpuInventory& inv, const std::vector<Gpu>& sel, unsigned caps,
                const ImageInfo& image, GpuPlan& p) {
    check_driver(inv);
    add_nvidia_devices(inv, sel, caps, p);
    add_nvidia_proc(inv, sel, p);
    add_nvidia_libraries(inv, image, p);
    // OpenCL's ICD loader finds platforms through /etc/OpenCL/vendors; NVIDIA's own OpenCL
    // images write this file themselves, and without it libnvidia-opencl is never loaded.
    for (const DriverLib& lib : inv.libs) {
        if (!starts_with(lib.file, "libnvidia-opencl.so.")) continue;
        const auto so =
            std::find_if(lib.sonames.begin(), lib.sonames.end(),
                         [](const std::string& n) { return n.find(".so.") != std::string::npos; });
        p.ops.push_back(WriteFile{.target = "/etc/OpenCL/vendors/nvidia.icd",
                                  .content = (so == lib.sonames.end() ? lib.file : *so) + "\n",
                                  .mode = 0644,
                                  .place = Place::image});
    }
    for (const auto& [name, host] : inv.binaries)
        p.ops.push_back(Bind{.source = host,
                             .target = "/usr/bin/" + name,
                             .place = Place::image,
                             .kind = SourceKind::file});
    for (const auto& x : inv.optional_paths)
        p.ops.push_back(Bind{.source = x.host,
                             .target = x.path,
                             .read_only = x.read_only,
                             .need = Need::optional,
                             .place = Place::image,
                             .kind = x.is_dir ? SourceKind::dir : SourceKind::file});
}

void add_drm(const GpuInventory& inv, const Gpu& g, GpuPlan& p) {
    if (g.vendor == Vendor::amd)
        p.ops.push_back(device(inv.shared_nodes.at("kfd"), "is the amdgpu driver loaded?"));
    for (const Node& n : g.nodes) {
        p.ops.push_back(device(n, "is the GPU's DRM driver loaded?"));
        const std::string kind = n.path.find("renderD") != std::string::npos ? "render" : "card";
        p.ops.push_back(Symlink{.link_text = "../" + n.path.substr(n.path.rfind('/') + 1),
                                .path = cat("/dev/dri/by-path/pci-", g.pci_name, "-", kind),
                                .place = Place::gpubox});
    }
    std::string nodes;
    for (const Node& n : g.nodes) nodes += " " + n.path;
    p.summary.push_back(cat(to_string(g.vendor), " ", to_string(g.pci), " ->", nodes));
}

}  // namespace

GpuPlan plan_gpu_mounts(const GpuInventory& inv, const std::vector<Gpu>& selected, unsigned caps,
                        const ImageInfo& image) {
    GpuPlan p;
    std::vector<Gpu> nvidia;
    for (const Gpu& g : selected)
        if (g.vendor == Vendor::nvidia) nvidia.push_back(g);
    if (!nvidia.empty()) add_nvidia(inv, nvidia, caps, image, p);
    for (const Gpu& g : selected)
        if (g.vendor != Vendor::nvidia) add_drm(inv, g, p);
    return p;
}

}  // namespace gpubox::gpu
