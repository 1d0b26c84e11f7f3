#include "gpu/cdi_plan.hpp"

#include <elf.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

#include "common/error.hpp"
#include "common/text.hpp"
#include "gpu/ldcache.hpp"
#include "rootfs/paths.hpp"

namespace gpubox::cdi {
namespace {

using namespace rootfs;

// Where a device comes from, for messages: "nvidia.com/gpu=0 (/etc/cdi/nvidia.yaml)".
std::string origin(const Request& r) {
    return r.cdi.spec ? cat(r.text, " (", r.cdi.spec->path, ")") : r.text;
}

// The arguments of an nvidia-cdi-hook (or older `nvidia-ctk hook`) call after its verb, or
// nullopt when the hook is no such call.
std::optional<std::pair<std::string, std::vector<std::string>>> nvidia_verb(const Hook& h) {
    const std::string prog = h.path.substr(h.path.rfind('/') + 1);
    std::size_t at = 1;
    if (prog == "nvidia-ctk" && h.args.size() > 2 && h.args[1] == "hook") at = 2;
    else if (prog != "nvidia-cdi-hook") return std::nullopt;
    if (h.args.size() <= at) return std::nullopt;
    return std::pair{h.args[at], std::vector<std::string>(
                                     h.args.begin() + static_cast<long>(at) + 1, h.args.end())};
}

// "--flag VALUE" and "--flag=VALUE", every one.
std::vector<std::string> values_of(const std::vector<std::string>& args, const std::string& flag) {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == flag && i + 1 < args.size()) out.push_back(args[++i]);
        else if (starts_with(args[i], flag + "=")) out.push_back(args[i].substr(flag.size() + 1));
    }
    return out;
}

struct Planner {
    const Host& host;
    const gpu::ImageInfo& image;
    Plan plan;
    std::vector<std::string> targets;  // every target so far: a second edit of one is skipped
    std::vector<std::string> ld_dirs;  // update-ldcache's folders
    struct File {
        std::string path, name, host;  // container path, its name, the host file ("": a link)
    };
    std::vector<File> files;  // libraries (.so) and links the edits put in place

    bool first(const std::string& target) {
        if (std::find(targets.begin(), targets.end(), target) != targets.end()) return false;
        targets.push_back(target);
        return true;
    }

    std::string container_path(const std::string& path, const std::string& what, const Request& r) {
        if (path.empty() || path[0] != '/')
            throw PlanError(cat("--device ", origin(r), ": ", what, " ", quote(path),
                                " is not an absolute path"));
        try {
            return normalize_container_path(path, what);
        } catch (const UsageError& e) {  // "..": never out of the root, whatever it names
            throw PlanError(cat("--device ", origin(r), ": ", e.what()));
        }
    }

    void node(const std::string& path, const std::string& host_path, const DeviceNode* d,
              bool read_only, const Request& r) {
        const std::string target = container_path(path, "device node", r);
        if (!starts_with(target, "/dev/"))
            throw PlanError(
                cat("--device ", origin(r), ": device node ", quote(target), " is not under /dev"));
        if (d && !d->type.empty() && d->type != "c")
            throw PlanError(cat("--device ", origin(r), ": ", quote(target), " is of type ",
                                d->type, ": gpubox gives character devices only"));
        gpu::Node n = host.node(host_path.empty() ? path : host_path);
        n.path = target, n.read_only = read_only;
        if (!n.exists)
            throw PlanError(cat("--device ", origin(r), ": host device node ",
                                quote(host_path.empty() ? path : host_path), " is missing"));
        if (!n.is_char)
            throw PlanError(
                cat("--device ", origin(r), ": ", quote(n.host), " is not a character device"),
                "gpubox gives a sandbox the host's character devices only");
        if (d && d->major && d->minor &&
            n.rdev != makedev(static_cast<unsigned>(*d->major), static_cast<unsigned>(*d->minor)))
            throw PlanError(cat("--device ", origin(r), ": ", quote(n.host), " is ", major(n.rdev),
                                ":", minor(n.rdev), ", not the ", *d->major, ":", *d->minor,
                                " the spec gives"));
        if (!first(target)) return;
        plan.nodes.push_back(n);
        plan.ops.push_back(BindDev{.source = n.host, .target = target, .rdev = n.rdev});
    }

    void mount(const Mount& m, const Request& r) {
        const std::string target = container_path(m.container_path, "mount target", r);
        if (!m.type.empty() && m.type != "bind")
            throw PlanError(cat("--device ", origin(r), ": mount of ", quote(target), ": type ",
                                quote(m.type), " is not supported (bind mounts only)"));
        if (m.host_path.empty() || m.host_path[0] != '/')
            throw PlanError(cat("--device ", origin(r), ": mount source ", quote(m.host_path),
                                " is not an absolute path"));
        if (!first(target)) return;
        const bool ro = std::find(m.options.begin(), m.options.end(), "rw") == m.options.end();
        plan.ops.push_back(Bind{.source = m.host_path, .target = target, .read_only = ro});
        const std::string name = base_name(target);
        if (name.find(".so") != std::string::npos) files.push_back({target, name, m.host_path});
    }

    void hook(const Hook& h, const Request& r) {
        const auto verb = nvidia_verb(h);
        const auto refuse = [&](const std::string& why) {
            throw PlanError(cat("--device ", origin(r), ": ", h.hook_name, " hook ", quote(h.path),
                                why.empty() ? "" : " ", why, ": gpubox runs no hook from a spec"),
                            "it does the work of nvidia-cdi-hook's create-symlinks, "
                            "update-ldcache, enable-cuda-compat, chmod and "
                            "disable-device-node-modification itself");
        };
        if (!verb) refuse("");
        const auto& [name, args] = *verb;
        if (name == "create-symlinks") {
            for (const std::string& link : values_of(args, "--link")) {
                const auto sep = link.find("::");
                if (sep == std::string::npos || sep == 0 || sep + 2 == link.size())
                    refuse(
                        cat("(create-symlinks --link ", quote(link), ": expected TARGET::LINK)"));
                const std::string path = container_path(link.substr(sep + 2), "symlink", r);
                if (!first(path)) continue;
                plan.ops.push_back(
                    Symlink{.link_text = link.substr(0, sep), .path = path, .place = Place::image});
                files.push_back({path, base_name(path), ""});
            }
        } else if (name == "update-ldcache") {
            for (const std::string& d : values_of(args, "--folder"))
                ld_dirs.push_back(container_path(d, "update-ldcache folder", r));
        } else if (name == "enable-cuda-compat") {
            const auto v = values_of(args, "--host-driver-version");
            if (!v.empty()) plan.compat_version = v.front();
        } else if (name != "chmod" && name != "disable-device-node-modification") {
            // chmod: gpubox's own directories are 0755 already. disable-device-node-modification
            // keeps the driver from making device nodes inside: in gpubox's sandbox it cannot
            // (no CAP_MKNOD over the host's devices, nosuid mounts for nvidia-modprobe), and
            // --gpu gives it a params file with ModifyDeviceFiles: 0.
            refuse(cat("(verb ", quote(name), " is not one gpubox knows)"));
        }
    }

    void edits(const Edits& e, const Request& r) {
        for (const std::string& kv : e.env) {
            const auto eq = kv.find('=');
            plan.env.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
        }
        // Checked for reading only where the spec does not ask for writing (most give no
        // permissions; MIG capability nodes are 0444).
        for (const DeviceNode& d : e.device_nodes)
            node(d.path, d.host_path, &d, d.permissions.find('w') == std::string::npos, r);
        for (const Mount& m : e.mounts) mount(m, r);
        for (const Hook& h : e.hooks) hook(h, r);
        if (!e.additional_gids.empty() || e.intel_rdt || e.net_devices)
            throw PlanError(cat("--device ", origin(r),
                                ": additionalGids, intelRdt and netDevices are not supported"));
    }

    // update-ldcache: the image's cache, with every library the edits put in its folders
    // first, under its name and its links' (forward compatibility wins, as for --gpu).
    void ldcache() {
        if (ld_dirs.empty()) return;
        std::vector<gpu::LdCacheEntry> cache;
        std::vector<std::string> ours;
        const auto add = [&](const std::string& name, const std::string& path) {
            std::string value = path;
            for (const auto& [stem, compat] : image.compat_first)
                if (starts_with(name, stem + ".so")) value = compat;
            cache.push_back({gpu::kLdFlagsNative, name, value, 0});
            ours.push_back(name);
        };
        const std::vector<File> known = files;
        for (const File& f : known) {
            const std::string dir = parent_of(f.path);
            if (std::find(ld_dirs.begin(), ld_dirs.end(), dir) == ld_dirs.end()) continue;
            add(f.name, f.path);
            // As ldconfig links a library by its soname, where nothing else is there.
            const std::string so = f.host.empty() || !host.soname ? "" : host.soname(f.host);
            if (so.empty() || so == f.name || so.find('/') != std::string::npos ||
                !first(dir + "/" + so))
                continue;
            plan.ops.push_back(
                Symlink{.link_text = f.name, .path = dir + "/" + so, .place = Place::image});
            add(so, dir + "/" + so);
        }
        for (const gpu::LdCacheEntry& e : image.ldcache)
            if (!(e.hwcap & gpu::kLdHwcapExtension) &&
                std::find(ours.begin(), ours.end(), e.key) == ours.end())
                cache.push_back(e);
        plan.ops.push_back(WriteFile{.target = "/etc/ld.so.cache",
                                     .content = gpu::render_ldcache(cache),
                                     .mode = 0644,
                                     .place = Place::image});
    }
};

}  // namespace

std::string elf_soname(int fd) {
    const auto read_at = [fd](void* buf, std::size_t n, std::uint64_t off) {
        return ::pread(fd, buf, n, static_cast<off_t>(off)) == static_cast<ssize_t>(n);
    };
    Elf64_Ehdr eh{};
    if (!read_at(&eh, sizeof eh, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        eh.e_shnum > 4096)
        return "";
    std::vector<Elf64_Shdr> sh(eh.e_shnum);
    if (!read_at(sh.data(), sh.size() * sizeof(Elf64_Shdr), eh.e_shoff)) return "";
    for (const Elf64_Shdr& s : sh) {
        if (s.sh_type != SHT_DYNAMIC || s.sh_link >= sh.size() || s.sh_size > (1 << 20)) continue;
        std::vector<Elf64_Dyn> dyn(s.sh_size / sizeof(Elf64_Dyn));
        if (!read_at(dyn.data(), dyn.size() * sizeof(Elf64_Dyn), s.sh_offset)) return "";
        const Elf64_Shdr& str = sh[s.sh_link];
        for (const Elf64_Dyn& d : dyn) {
            if (d.d_tag == DT_NULL) break;
            if (d.d_tag != DT_SONAME || d.d_un.d_val >= str.sh_size) continue;
            char name[256] = {};
            const std::size_t n =
                std::min<std::uint64_t>(sizeof name - 1, str.sh_size - d.d_un.d_val);
            if (!read_at(name, n, str.sh_offset + d.d_un.d_val)) return "";
            return std::string(name, ::strnlen(name, n));
        }
    }
    return "";
}

Request parse_device_flag(const std::string& text) {
    Request r;
    r.text = text;
    if (starts_with(text, "/dev/")) {
        const auto colon = text.find(':');
        r.node = text.substr(0, colon);
        r.permissions = colon == std::string::npos ? "rwm" : text.substr(colon + 1);
        if (r.permissions.empty() || r.permissions.size() > 3 ||
            r.permissions.find_first_not_of("rwm") != std::string::npos)
            throw UsageError(cat("--device ", text, ": PERMS is some of r, w and m"));
        return r;
    }
    if (!parse_qualified(text))
        throw UsageError(cat("--device ", quote(text),
                             ": expected /dev/PATH[:PERMS] or a CDI device VENDOR/CLASS=NAME"));
    return r;
}

std::string compat_request(const std::vector<Request>& requests) {
    for (const Request& r : requests) {
        if (!r.cdi.spec) continue;
        for (const Edits* e : {&r.cdi.spec->edits, &r.cdi.device->edits})
            for (const Hook& h : e->hooks)
                if (const auto v = nvidia_verb(h); v && v->first == "enable-cuda-compat")
                    if (const auto ver = values_of(v->second, "--host-driver-version");
                        !ver.empty())
                        return ver.front();
    }
    return "";
}

Plan plan_devices(const std::vector<Request>& requests, const Host& host,
                  const gpu::ImageInfo& image) {
    Planner p{host, image, {}, {}, {}, {}};
    std::vector<const Spec*> specs_done;
    for (const Request& r : requests) {
        if (!r.cdi.spec) {
            const bool write = r.permissions.find('w') != std::string::npos;
            p.node(r.node, "", nullptr, !write, r);
            p.plan.summary.push_back(cat(r.text, " -> ", r.node));
            continue;
        }
        const std::size_t before = p.plan.ops.size();
        if (std::find(specs_done.begin(), specs_done.end(), r.cdi.spec) == specs_done.end()) {
            specs_done.push_back(r.cdi.spec);
            p.edits(r.cdi.spec->edits, r);
        }
        p.edits(r.cdi.device->edits, r);
        p.plan.summary.push_back(
            cat(r.text, " (", r.cdi.spec->path, "): ", p.plan.ops.size() - before, " edits"));
    }
    p.ldcache();
    return std::move(p.plan);
}

}  // namespace gpubox::cdi
