#include "launcher/commands/image.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <nlohmann/json.hpp>

#include "common/print.hpp"
#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/trusted_path.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "gpu/driver_files.hpp"
#include "image/pull.hpp"
#include "image/reference.hpp"
#include "image/run_config.hpp"
#include "image/squashfs.hpp"
#include "image/store.hpp"
#include "image/store_dir.hpp"
#include "launcher/monitor/kept_overlay.hpp"
#include "launcher/monitor/step.hpp"
#include "rootfs/paths.hpp"
#include "rootfs/view.hpp"

extern char** environ;

namespace gpubox::launcher {
namespace {

std::map<std::string, std::string> caller_env() {
    std::map<std::string, std::string> env;
    for (char** e = environ; e && *e; ++e) {
        const std::string kv = *e;
        const auto eq = kv.find('=');
        if (eq != std::string::npos) env.emplace(kv.substr(0, eq), kv.substr(eq + 1));
    }
    return env;
}

std::string short_digest(const std::string& d) { return d.substr(0, 19); }

std::string when(std::int64_t t) {
    const std::time_t tt = static_cast<std::time_t>(t);
    std::tm tm{};
    char buf[32];
    ::localtime_r(&tt, &tm);
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm);
    return buf;
}

// A layered image's layer trees (bottom first), which runs stack over its empty rootfs.
std::vector<std::string> layer_paths(const image::Stored& s) {
    std::vector<std::string> out;
    for (const std::filesystem::path& l : s.layers) out.push_back(l.string());
    return out;
}

// A single-file image's file: where it is read (a read-only view of its directory, which no
// read changes, not even an access time) and what tells its unpacked tree.
struct SquashFile {
    UniqueFd dir;
    std::string base, shown, key;
};

SquashFile squash_file(const std::filesystem::path& read, const std::string& shown,
                       const std::string& key) {
    std::filesystem::path parent = read.parent_path();
    if (parent.empty()) parent = ".";
    return {rootfs::open_read_only_view(parent.string(), "the squashfs file's directory"),
            read.filename().string(), shown, key};
}

// Why a squashfs image cannot be mounted for this run ("" where it can): FUSE not open to the
// caller, no squashfuse, or a run that reads ROOTFS before its sandbox (and so the mount)
// exists, or whose sandbox a step's keeper starts.
std::string why_not_mounted(const Options& o) {
    const step::Info step = step::inspect([](const char* n) { return std::getenv(n); });
    if (o.step == 1 || (o.step < 0 && step.wants_step()))
        return "a step's shared sandbox does not mount one yet";
    if (o.print_plan || o.preflight == preflight::Mode::enforce || !o.devices.empty())
        return "--print-plan, --preflight enforce and --device read ROOTFS before the sandbox, "
               "and so the mount, exists";
    if (std::string why = image::fuse_problem(); !why.empty())
        return cat(why, " (fix: as root, chmod 0666 /dev/fuse, or a udev rule KERNEL==\"fuse\", ",
                   "MODE=\"0666\")");
    try {
        image::find_system_tool("squashfuse_ll", "squashfuse");
        return "";
    } catch (const PlanError& e) {
        return cat(e.what(), " (fix: ", e.hint, ")");
    }
}

// The tree a squashfs image runs from where it cannot be mounted: unpacked once into the
// caller's own store, said in one line with the reason and the fix (by the first run from it;
// later ones only with -v). `hold`: a FILE.sqsh run's hold on the tree, which prune would
// otherwise remove under it (a stored image's run holds the image, and with it its tree).
std::string squash_tree(const SquashFile& f, const std::string& why, UniqueFd* hold = nullptr) {
    const std::optional<image::StoreDir> store =
        image::open_store(image::store_root(caller_env()), true);
    // Said by the first run from the tree (STORE/squashfs/<key>/said marks it); later runs are
    // quiet about it, but for -v.
    const std::filesystem::path said = store.value().path / "squashfs" / f.key / "said";
    struct stat st {};
    const bool told = ::lstat(said.c_str(), &st) == 0;
    const std::string line =
        cat(f.shown, ": runs from a tree unpacked once into your store, not mounted: ", why);
    told ? log::info(line) : log::warn(line);
    std::filesystem::path tree;
    if (!hold) tree = image::unpacked_tree(store.value().path, f.dir.get(), f.base, f.key);
    else *hold = image::hold_unpacked(store.value().path, f.dir.get(), f.base, f.key, tree);
    if (const int fd =
            told ? -1 : ::open(said.c_str(), O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        fd >= 0)
        ::close(fd);
    return tree.string();
}

// A FILE.sqsh's mount point: an empty directory of the caller's store (STORE/squashfs/mnt),
// made once, over which each run mounts the file in its own mount namespace.
std::filesystem::path mount_point() {
    const std::optional<image::StoreDir> store =
        image::open_store(image::store_root(caller_env()), true);
    const std::filesystem::path root = store.value().path;
    for (const std::filesystem::path& d : {root / "squashfs", root / "squashfs/mnt"})
        if (const int e = sys::try_mkdir_at(AT_FDCWD, d.string(), 0755); e < 0 && e != -EEXIST)
            sys::fail(cat("mkdir(", quote(d.string()), ")"), -e);
    return root / "squashfs/mnt";
}

}  // namespace

int pull_command(const Options& o) {
    const image::PullRequest r{o.pull.source, o.pull.name,     o.pull.insecure, o.pull.cert_dir,
                               o.pull.creds,  o.pull.authfile, o.pull.platform, o.pull.max_size,
                               o.pull.flat,   o.pull.squashfs};
    const image::Progress progress = o.quiet       ? image::Progress::none
                                     : ::isatty(2) ? image::Progress::terminal
                                                   : image::Progress::lines;
    const image::PullResult res =
        image::pull(image::store_root(caller_env()), r, caller_env(), progress);
    log::info(cat("stored ", res.digest));
    if (!o.quiet) print_err(cat("gpubox: ", image::render_summary(res), "\n"));
    print(res.name + "\n");
    return 0;
}

int images_command(const Options& o) {
    const image::Stores stores = image::open_stores(caller_env());
    const std::vector<image::Stored> all = stores.list();
    const std::vector<std::uint64_t> shared = image::shared_sizes(all);
    if (o.json) {
        nlohmann::json out = nlohmann::json::array();
        for (std::size_t i = 0; i < all.size(); ++i) {
            const image::Stored& s = all[i];
            out.push_back({{"name", s.name},
                           {"digest", s.digest},
                           {"source", s.source},
                           {"size_bytes", s.size_bytes},
                           {"shared_size_bytes", shared[i]},
                           {"unique_size_bytes", s.size_bytes - shared[i]},
                           {"pulled_unix", s.pulled_unix},
                           {"rootfs", s.rootfs.string()},
                           {"layers", layer_paths(s)},
                           {"squashfs", s.squashfs.string()},
                           {"store", s.site ? "site" : "user"}});
        }
        print(out.dump(2) + "\n");
        return 0;
    }
    // SHARED: the bytes of its layers another listed image uses too; UNIQUE: the rest.
    std::vector<std::vector<std::string>> rows = {
        {"NAME", "DIGEST", "SIZE", "SHARED", "UNIQUE", "PULLED"}};
    for (std::size_t i = 0; i < all.size(); ++i) {
        const image::Stored& s = all[i];
        rows.push_back({s.name, short_digest(s.digest), human_size(s.size_bytes),
                        human_size(shared[i]), human_size(s.size_bytes - shared[i]),
                        when(s.pulled_unix) + (s.site ? "  site" : "")});
    }
    std::vector<std::size_t> w(rows[0].size(), 0);
    for (const auto& r : rows)
        for (std::size_t c = 0; c < r.size(); ++c) w[c] = std::max(w[c], r[c].size());
    for (const auto& r : rows) {
        std::string line;
        for (std::size_t c = 0; c + 1 < r.size(); ++c)
            line += r[c] + std::string(w[c] - r[c].size() + 2, ' ');
        print(cat(line, r.back(), "\n"));
    }
    return 0;
}

int rmi_command(const Options& o) {
    const std::optional<image::StoreDir> store =
        image::open_store(image::store_root(caller_env()), false);
    const image::Stores sites = image::open_stores(caller_env());
    int rc = 0;
    for (const std::string& name : o.image_names) {
        try {
            if (store && image::valid_name(name) && image::remove_name(store->path, name)) {
                print(name + "\n");
                continue;
            }
        } catch (const image::ImageInUse& e) {
            log::error(cat("rmi: ", e.what()));
            rc = 125;
            continue;
        }
        if (const image::SiteStore* site = sites.site_of(name))
            log::error(cat("rmi: ", name, " is in the site store ",
                           quote(site->where.real.string()),
                           " (read-only: GPUBOX_IMAGES_RO; its admin removes it)"));
        else log::error(cat("rmi: no image ", quote(name), " (gpubox images lists them)"));
        rc = 125;
    }
    return rc;
}

int prune_command(const Options&) {
    const std::optional<image::StoreDir> store =
        image::open_store(image::store_root(caller_env()), false);
    const image::Pruned p = store ? image::prune(store->path) : image::Pruned{};
    print(cat("pruned ", p.images, p.images == 1 ? " image, " : " images, ", p.layers,
              p.layers == 1 ? " layer, " : " layers, ", p.unpacked,
              p.unpacked == 1 ? " unpacked squashfs tree, " : " unpacked squashfs trees, ", p.temps,
              p.temps == 1 ? " leftover" : " leftovers", "\n"));
    // What a running sandbox holds stays, and the user is told (the next prune takes it).
    if (p.in_use) print(cat("kept ", p.in_use, " unnamed image(s) a running sandbox holds\n"));
    if (p.unpacked_in_use)
        print(cat("kept ", p.unpacked_in_use,
                  " unpacked squashfs tree(s) a running sandbox holds\n"));
    return 0;
}

namespace {

// What export reads: the image's tree or layers (a squashfs image's unpacked tree), held.
struct ExportSource {
    std::string tree, origin, config = "{}";
    std::vector<std::string> layers;
    UniqueFd hold;
};

ExportSource export_source(const std::string& what) {
    ExportSource src;
    if (image::is_squashfs_file(what)) {
        const std::optional<image::StoreDir> store =
            image::open_store(image::store_root(caller_env()), true);
        const SquashFile f = squash_file(what, what, image::file_key(what));
        src.tree = image::unpacked_tree(store.value().path, f.dir.get(), f.base, f.key).string();
        src.origin = cat("squashfs file ", quote(std::filesystem::canonical(what).string()));
        return src;
    }
    const image::Stores stores = image::open_stores(caller_env());
    const std::optional<image::Stored> img = stores.find(what);
    if (!img)
        throw UsageError(cat("export: no image ", quote(what),
                             " (gpubox images lists them; a FILE.sqsh is one too)"));
    src.hold = image::hold_image(*img);
    src.origin = cat("image ", img->digest);
    src.config = sys::read_file((img->rootfs.parent_path() / "config.json").string());
    if (!img->squashfs.empty()) {
        src.tree = unpacked_squashfs(*img);
    } else {
        src.tree = img->rootfs.string();
        src.layers = layer_paths(*img);
    }
    return src;
}

// export --overlay DIR: DIR/upper stacked over the image (overlayfs applies its whiteouts and
// opaque directories), DIR locked so that no run writes it meanwhile. Returns the lock.
UniqueFd add_overlay(const std::string& dir, ExportSource& src) {
    const UniqueFd at = trusted_path::open_state_dir(
        dir, trusted_path::Missing::error, "export --overlay",
        "--overlay names the DIR a run kept its writes in (gpubox run --overlay DIR)");
    const std::string real = sys::read_fd_link(at.get());
    UniqueFd lock = sys::open_at(at.get(), ".", O_RDONLY | O_DIRECTORY);
    if (!sys::flock_exclusive(lock.get(), false, real))
        throw PlanError(cat("export --overlay ", quote(real), ": in use by a gpubox run"),
                        "export it when that run has ended");
    check_origin(real, read_origin(at.get()), src.origin, "");
    if (src.layers.empty()) src.layers.push_back(src.tree);
    src.layers.push_back(real + "/upper");
    return lock;
}

// A new FILE.sqsh: written beside it under a temp name, renamed into place when checked.
void export_file(int view, const std::string& what, const std::string& target) {
    struct stat st {};
    if (::lstat(target.c_str(), &st) == 0)
        throw PlanError(cat("export: ", quote(target), " exists"),
                        "export writes a new file: remove it, or name another");
    const std::string abs = std::filesystem::absolute(target).string();
    const std::string tmp = cat(abs, ".gpubox-", ::getpid());
    image::make_squashfs(view, what, tmp);
    if (::rename(tmp.c_str(), abs.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        sys::fail(cat("rename(", quote(tmp), " -> ", quote(abs), ")"), err);
    }
}

void write_new(const std::string& path, const std::string& text) {
    const UniqueFd fd =
        sys::open_at(AT_FDCWD, path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
    sys::write_all(fd.get(), text, path);
}

// A new image NAME in the caller's store, kept as one squashfs file.
void export_image(int view, const std::string& what, const std::string& name,
                  const std::string& config) {
    image::validate_name(name);
    const std::optional<image::StoreDir> store =
        image::open_store(image::store_root(caller_env()), true);
    const std::filesystem::path root = store.value().path;
    const std::filesystem::path tmp = image::make_temp_dir(root, cat("pull-", ::getpid()));
    try {
        const std::filesystem::path dir = tmp / "image";
        sys::mkdir_at(AT_FDCWD, dir.string(), 0755);
        sys::mkdir_at(AT_FDCWD, (dir / "rootfs").string(), 0755);
        image::make_squashfs(view, what, (dir / "rootfs.sqsh").string());
        struct stat st {};
        if (::stat((dir / "rootfs.sqsh").c_str(), &st) != 0)
            sys::fail(cat("stat(", quote((dir / "rootfs.sqsh").string()), ")"), errno);
        write_new((dir / "config.json").string(), config);
        const nlohmann::json info = {{"size_bytes", static_cast<std::uint64_t>(st.st_size)},
                                     {"layers", 1},
                                     {"squashfs", true}};
        write_new((dir / "info.json").string(), info.dump(2) + "\n");
        const std::string digest = image::file_digest((dir / "rootfs.sqsh").string());
        image::StoreLock lock(root);
        image::commit_image(root, dir, digest);
        image::write_name(root, name, digest, cat("export:", what),
                          static_cast<std::int64_t>(std::time(nullptr)));
    } catch (...) {
        image::remove_tree(tmp);
        throw;
    }
    image::remove_tree(tmp);
}

}  // namespace

std::string unpacked_squashfs(const image::Stored& img) {
    const std::optional<image::StoreDir> store =
        image::open_store(image::store_root(caller_env()), true);
    const SquashFile f = squash_file(img.squashfs_read, img.name, img.digest.substr(7));
    return image::unpacked_tree(store.value().path, f.dir.get(), f.base, f.key).string();
}

int export_command(const Options& o) {
    ExportSource src = export_source(o.exp.image);
    UniqueFd overlay_lock;
    if (!o.exp.overlay.empty()) overlay_lock = add_overlay(o.exp.overlay, src);
    const UniqueFd view = rootfs::open_read_only_view(src.tree, "IMAGE", src.layers);
    const std::string& t = o.exp.target;
    const bool file = t.size() > 5 && (t.ends_with(".sqsh") || t.ends_with(".squashfs"));
    if (file) export_file(view.get(), o.exp.image, t);
    else export_image(view.get(), o.exp.image, t, src.config);
    print(t + "\n");
    return 0;
}

Options apply_image_config(const Options& in, const image::Stored& img) {
    image::RunConfig c = image::translate_config(img, {in.env, in.workdir_given, in.argv});
    Options o = in;
    o.rootfs = std::move(c.rootfs);
    o.image_layers = layer_paths(img);
    o.env = std::move(c.env);
    if (c.workdir) o.workdir = std::move(*c.workdir);
    o.argv = std::move(c.argv);
    if (!in.gpu_caps_given && !c.driver_capabilities.empty()) {
        try {
            o.gpu_caps = gpu::parse_capabilities(c.driver_capabilities);
        } catch (const UsageError& e) {
            log::warn(cat("image ", img.name, ": NVIDIA_DRIVER_CAPABILITIES ignored: ", e.what()));
        }
    }
    return o;
}

Options resolve_run_image(const Options& o, UniqueFd* hold) {
    const auto missing_cmd = [&] {
        if (o.argv.empty())
            throw UsageError(
                "run: missing CMD (usage: gpubox run [OPTIONS] ROOTFS [--] CMD [ARGS...])");
        return o;
    };
    // An image archive where a directory or an image was expected: say how to store it.
    struct stat st {};
    const auto archive = [&] {
        if (::stat(o.rootfs.c_str(), &st) == 0 && S_ISREG(st.st_mode))
            throw PlanError(
                cat("run: ", quote(o.rootfs), " is a file, not a directory or an image"),
                cat("to run an image archive, store it first: gpubox pull tar:", o.rootfs,
                    " (a root filesystem's tar; docker-archive: and oci-archive: for docker "
                    "save's and OCI archives)"));
    };
    // FILE.sqsh: a single-file image of no config, run as its tree is (CMD needed).
    if (image::is_squashfs_file(o.rootfs)) {
        missing_cmd();
        if (o.root_mode == rootfs::RootMode::writable)
            throw UsageError(cat("run: --writable would write into ", quote(o.rootfs),
                                 " (gpubox never changes a squashfs file; drop --writable)"));
        Options out = o;
        const std::string file = std::filesystem::canonical(o.rootfs).string();
        out.origin = cat("squashfs file ", quote(file));
        if (const std::string why = why_not_mounted(o); !why.empty()) {
            out.rootfs =
                squash_tree(squash_file(o.rootfs, o.rootfs, image::file_key(o.rootfs)), why, hold);
        } else {
            const SquashFile f = squash_file(file, o.rootfs, "");
            image::check_squashfs(f.dir.get(), f.base);
            out.squashfs = file;
            out.rootfs = mount_point().string();
        }
        return out;
    }
    // A path ("/x", "./x"), or an existing directory: ROOTFS as before, and no store lookup.
    if (o.rootfs[0] == '/' || o.rootfs[0] == '.' || !image::valid_name(o.rootfs) ||
        (::stat(o.rootfs.c_str(), &st) == 0 && S_ISDIR(st.st_mode)))
        return archive(), missing_cmd();
    const image::Stores stores = image::open_stores(caller_env());
    const std::optional<image::Stored> img = stores.find(o.rootfs);
    if (!img) {
        archive();
        if (::lstat(o.rootfs.c_str(), &st) == 0)
            return missing_cmd();  // run's own "not a usable directory"
        throw UsageError(cat("run: ", quote(o.rootfs),
                             " is neither a directory nor a pulled image "
                             "(gpubox images lists them; gpubox pull fetches one)"));
    }
    if (o.root_mode == rootfs::RootMode::writable)
        throw UsageError(
            cat("run: --writable would write into the stored image ", o.rootfs,
                " (gpubox never changes a stored image; drop --writable, or run a copy of ",
                img->rootfs.string(), ")"));
    Options out = apply_image_config(o, *img);
    if (hold) *hold = image::hold_image(*img);
    if (img->squashfs.empty()) {
    } else if (const std::string why = why_not_mounted(o); !why.empty()) {
        out.rootfs =
            squash_tree(squash_file(img->squashfs_read, img->name, img->digest.substr(7)), why);
    } else {
        out.squashfs = img->squashfs.string();  // mounted over the image's empty rootfs
    }
    out.origin = cat("image ", img->digest);
    return out;
}

}  // namespace gpubox::launcher
