// The image's facts, read inside its root by fd: never written, nothing of it run.
#include <fcntl.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "gpu/ldcache.hpp"
#include "preflight/discover.hpp"
#include "preflight/files.hpp"
#include "rootfs/resolve.hpp"

namespace gpubox::preflight {
namespace {

constexpr std::size_t kMaxObject = std::size_t{4} << 30;  // mapped, read where looked at
constexpr const char* kDefaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

// "libcudart.so.12.4.127" -> "12.4.127" (the name carries the runtime's version).
std::string version_suffix(const std::string& name, const std::string& stem) {
    if (!starts_with(name, stem) || name.size() == stem.size()) return "";
    const std::string v = name.substr(stem.size());
    return v.find_first_not_of("0123456789.") == std::string::npos &&
                   v.find('.') != std::string::npos
               ? v
               : "";
}

std::vector<gpu::LdCacheEntry> image_cache(int root, const std::vector<std::string>& prefixes) {
    const auto cache = rootfs::map_regular_in_root(root, "/etc/ld.so.cache", 64 << 20);
    if (!cache) return {};
    std::string problem;
    if (prefixes.empty()) return gpu::parse_mapped_ldcache(*cache, gpu::parse_ldcache, problem);
    return gpu::parse_mapped_ldcache(
        *cache, [&](std::string_view b) { return gpu::find_ldcache(b, prefixes); }, problem);
}

void find_cudart(int root, ImageFacts& img) {
    std::set<std::string> dirs = {"/usr/local/cuda/lib64",
                                  "/usr/local/cuda/targets/x86_64-linux/lib"};
    for (const gpu::LdCacheEntry& e : image_cache(root, {"libcudart.so."}))
        dirs.insert(e.value.substr(0, e.value.rfind('/')));
    for (const std::string& dir : dirs)
        for (const std::string& name : list_in(root, dir)) {
            const std::string v = version_suffix(name, "libcudart.so.");
            if (v.empty()) continue;
            if (img.cudart.empty() || compare_versions(v, img.cudart).value_or(0) > 0)
                img.cudart = v, img.cudart_file = dir + "/" + name;
        }
}

void find_toolkit(int root, ImageFacts& img) {
    const std::string file = "/usr/local/cuda/version.json";
    const auto text = read_in(root, file, 1 << 16);
    if (!text) return;
    const auto j = nlohmann::json::parse(*text, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("cuda") || !j["cuda"].is_object()) return;
    const auto& v = j["cuda"]["version"];
    if (v.is_string()) img.toolkit = v.get<std::string>(), img.toolkit_file = file;
}

// `mapped`: the file, where the caller mapped it already.
std::optional<ObjectFacts> read_object(int root, const std::string& path, bool fatbin,
                                       std::optional<rootfs::MappedFile> mapped = std::nullopt) {
    const auto file =
        mapped ? std::move(mapped) : rootfs::map_regular_in_root(root, path, kMaxObject);
    if (!file || !is_elf64le(file->bytes())) return std::nullopt;
    ObjectFacts o{path, x86_isa_needed(file->bytes()), std::nullopt};
    if (fatbin)
        if (const auto s = find_section(file->bytes(), ".nv_fatbin")) o.fatbin = parse_fatbin(*s);
    if (file->truncated()) return std::nullopt;
    return o;
}

// argv[0] as the sandbox's exec would find it: a path as given, else the first PATH entry
// holding a regular file of that name, which is then left `found` (mapped: read_object's).
std::string resolve_command(int root, const ImageScan& scan,
                            const std::map<std::string, std::string>& env,
                            std::optional<rootfs::MappedFile>& found) {
    const std::string& cmd = scan.command;
    if (cmd[0] == '/') return cmd;
    if (cmd.find('/') != std::string::npos) return scan.workdir + "/" + cmd;
    const auto it = env.find("PATH");
    const std::string path = it == env.end() ? kDefaultPath : it->second;
    for (std::size_t i = 0; i <= path.size();) {
        std::size_t j = path.find(':', i);
        if (j == std::string::npos) j = path.size();
        const std::string candidate = path.substr(i, j - i) + "/" + cmd;
        if (j > i && path[i] == '/' &&
            (found = rootfs::map_regular_in_root(root, candidate, kMaxObject)))
            return candidate;
        i = j + 1;
    }
    return "";
}

// Every library the image's ld.so.cache lists, once each, until the budget is spent.
void scan_objects(int root, const ImageScan& scan, ImageFacts& img) {
    img.scanned = true;
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::duration<double>(scan.budget_seconds);
    std::set<std::string> seen;
    for (const gpu::LdCacheEntry& e : image_cache(root, {})) {
        if (!seen.insert(e.value).second) continue;
        if (std::chrono::steady_clock::now() > deadline) {
            img.scan_stopped = cat("the ", scan.budget_seconds, " s budget was spent (",
                                   seen.size() - 1, " of the ", "ld.so.cache's libraries read)");
            return;
        }
        ++img.scanned_files;
        if (auto o = read_object(root, e.value, true)) img.objects.push_back(std::move(*o));
    }
}

}  // namespace

std::optional<CompatFacts> discover_compat(int root) {
    CompatFacts c;
    const std::vector<std::string> names = list_in(root, c.dir);
    if (names.empty()) return std::nullopt;
    for (const std::string& n : names) {
        const auto so = n.find(".so.");
        if (so == std::string::npos || !starts_with(n, "lib") ||
            !link_in(root, c.dir + "/" + n).empty())
            continue;
        c.files.push_back(n);
        const std::string v = version_suffix(n, "libcuda.so.");
        if (!v.empty() && v.find('.') != std::string::npos) c.libcuda.push_back(n), c.version = v;
    }
    if (c.libcuda.size() != 1) return c;
    const auto lib = rootfs::map_regular_in_root(root, c.dir + "/" + c.libcuda.front(), kMaxObject);
    if (lib) c.note = parse_compat_note(lib->bytes(), c.note_problem);
    return c;
}

ImageFacts discover_image_facts(int root, const std::string& rootfs,
                                const std::map<std::string, std::string>& env,
                                const ImageScan& scan) {
    ImageFacts img;
    img.rootfs = rootfs, img.env = env;
    if (scan.cuda) {
        find_cudart(root, img);
        // version.json only says what the library would: read it where there is none (a static
        // runtime, a toolkit-only image), or for `gpubox check`, which reports both.
        if (img.cudart.empty() || scan.objects) find_toolkit(root, img);
        img.compat = discover_compat(root);
    }
    if (!scan.command.empty()) {
        std::optional<rootfs::MappedFile> found;
        const std::string path = resolve_command(root, scan, env, found);
        if (path.empty())
            img.command_problem = cat(quote(scan.command), " is not in the image's PATH");
        else img.command = read_object(root, path, scan.objects, std::move(found));
    }
    if (scan.objects) scan_objects(root, scan, img);
    return img;
}

}  // namespace gpubox::preflight
