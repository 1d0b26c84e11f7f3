#include "launcher/commands/image.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "common/log.hpp"
#include "common/text.hpp"
#include "gpu/driver_files.hpp"
#include "image/pull.hpp"
#include "image/reference.hpp"
#include "image/run_config.hpp"
#include "image/store_dir.hpp"
#include "rootfs/paths.hpp"

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

}  // namespace

int pull_command(const Options& o) {
    const image::PullRequest r{o.pull.source,   o.pull.name,     o.pull.insecure,
                               o.pull.cert_dir, o.pull.creds,    o.pull.authfile,
                               o.pull.platform, o.pull.max_size, o.pull.flat};
    const image::Progress progress = o.quiet       ? image::Progress::none
                                     : ::isatty(2) ? image::Progress::terminal
                                                   : image::Progress::lines;
    const image::PullResult res =
        image::pull(image::store_root(caller_env()), r, caller_env(), progress);
    log::info(cat("stored ", res.digest));
    if (!o.quiet) std::cerr << "gpubox: " << image::render_summary(res) << "\n";
    std::cout << res.name << "\n";
    return 0;
}

int images_command(const Options& o) {
    const image::Stores stores = image::open_stores(caller_env());
    const std::vector<image::Stored> all = stores.list();
    if (o.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const image::Stored& s : all)
            out.push_back({{"name", s.name},
                           {"digest", s.digest},
                           {"source", s.source},
                           {"size_bytes", s.size_bytes},
                           {"pulled_unix", s.pulled_unix},
                           {"rootfs", s.rootfs.string()},
                           {"layers", layer_paths(s)},
                           {"store", s.site ? "site" : "user"}});
        std::cout << out.dump(2) << "\n";
        return 0;
    }
    std::size_t w = 4;
    for (const image::Stored& s : all) w = std::max(w, s.name.size());
    std::cout << std::left;
    std::cout << cat("NAME", std::string(w - 4 + 2, ' '),
                     "DIGEST               SIZE       PULLED\n");
    for (const image::Stored& s : all) {
        const std::string size = human_size(s.size_bytes);
        std::cout << s.name << std::string(w - s.name.size() + 2, ' ') << short_digest(s.digest)
                  << "  " << size << std::string(size.size() < 11 ? 11 - size.size() : 1, ' ')
                  << when(s.pulled_unix) << (s.site ? "  site" : "") << "\n";
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
                std::cout << name << "\n";
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
    std::cout << "pruned " << p.images << (p.images == 1 ? " image, " : " images, ") << p.layers
              << (p.layers == 1 ? " layer, " : " layers, ") << p.temps
              << (p.temps == 1 ? " leftover" : " leftovers") << "\n";
    if (p.in_use)
        log::info(cat("prune: kept ", p.in_use, " unnamed image(s) a running sandbox holds"));
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
    return out;
}

}  // namespace gpubox::launcher
