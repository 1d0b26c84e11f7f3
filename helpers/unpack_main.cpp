// gpubox-unpack: turns an OCI image layout (what skopeo wrote) or a plain tar into a root
// filesystem, as the calling user. A separate, dynamically linked program so that libarchive
// and nettle stay out of gpubox's static binary and `gpubox run`'s start-up; gpubox runs it with
// an empty environment and no inherited fds but 0-2.
//
//   gpubox-unpack [--progress] [--max-size BYTES] --layout DIR ROOTFS   verified against the
//                                                                        layout's digests
//   gpubox-unpack [--progress] [--max-size BYTES] --tar FILE ROOTFS     one layer; its digest
//                                                                        is computed
//   ... --layout DIR --layers STAGE --stored LAYERS --max-stacked N ROOTFS   each layer a tree,
//       STAGE/<hex>/tree, for overlayfs to stack (Unpacker's overlay mode), but those LAYERS/<hex>
//       holds already (the store's, not read again); more than N layers: one tree in
//       ROOTFS, as without --layers ("layered": false)
//
// --progress: "progress: TEXT" lines on stderr, which gpubox shows on the terminal.
// --max-size: the most all layers may unpack to (UnpackLimits, helpers/unpack.hpp).
// stdout: one JSON object (digest, config, counts). Failure: one line on stderr, exit 1.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "common/error.hpp"
#include "common/print.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"
#include "image/oci.hpp"
#include "helpers/unpack.hpp"

namespace {

using namespace gpubox;
using namespace gpubox::image;
using Json = nlohmann::json;

struct Args {
    bool progress = false;
    std::string layout, tar, rootfs, stage, stored;
    std::size_t max_stacked = 0;  // --max-stacked: more layers than that are unpacked as one tree
    UnpackLimits limits;
};

std::string blob_path(const std::string& layout, const std::string& digest) {
    return layout + "/blobs/sha256/" + digest.substr(7);
}

// A small JSON blob (manifest, config), checked against its digest before it is parsed.
std::string read_verified(const std::string& layout, const Descriptor& d, const char* what) {
    const std::string text = sys::read_file(blob_path(layout, d.digest), 16 << 20);
    UniqueFd fd = sys::open_at(AT_FDCWD, blob_path(layout, d.digest), O_RDONLY | O_NOFOLLOW);
    const std::string got = sha256_fd(fd.get(), what);
    if (got != d.digest)
        throw std::runtime_error(
            cat(what, ": digest mismatch: expected ", d.digest, ", read ", got));
    return text;
}

std::function<void(std::uint64_t)> progress_for(const Args& args, std::size_t i, std::size_t n) {
    if (!args.progress) return {};
    return [i, n, last = std::uint64_t{0}](std::uint64_t bytes) mutable {
        if (bytes - last < (8u << 20) && bytes != 0) return;
        last = bytes;
        std::fprintf(stderr, "progress: gpubox: pull: unpacking layer %zu/%zu: %llu MiB   \n", i, n,
                     static_cast<unsigned long long>(bytes >> 20));
    };
}

bool exists(const std::string& path) {
    struct stat st {};
    return ::lstat(path.c_str(), &st) == 0;
}

// Each layer a tree of its own in STAGE (but those stored already), counted as one pull.
Json unpack_layers(const Args& args, const Manifest& m, Unpacker& u) {
    Json digests = Json::array(), fresh = Json::array(), sizes = Json::object();
    std::uint64_t written = 0;
    const Unpacker* last = &u;
    std::vector<std::unique_ptr<Unpacker>> trees;
    for (std::size_t i = 0; i < m.layers.size(); ++i) {
        const std::string hex = m.layers[i].digest.substr(7);
        digests.push_back(hex);
        if (exists(args.stored + "/" + hex) || exists(args.stage + "/" + hex)) continue;
        const std::string what =
            cat("layer ", i + 1, "/", m.layers.size(), " (", m.layers[i].digest.substr(0, 19), ")");
        sys::mkdir_at(AT_FDCWD, args.stage + "/" + hex, 0755);
        sys::mkdir_at(AT_FDCWD, args.stage + "/" + hex + "/tree", 0755);
        trees.push_back(
            std::make_unique<Unpacker>(args.stage + "/" + hex + "/tree", args.limits, true));
        trees.back()->carry_from(*last);
        std::vector<UniqueFd> lowers;  // the nearest first
        for (std::size_t j = i; j-- > 0;) {
            const std::string h = m.layers[j].digest.substr(7);
            const std::string dir =
                exists(args.stage + "/" + h) ? args.stage + "/" + h : args.stored + "/" + h;
            lowers.push_back(sys::open_at(AT_FDCWD, dir + "/tree", O_PATH | O_DIRECTORY));
        }
        trees.back()->set_lowers(std::move(lowers));
        last = trees.back().get();
        UniqueFd fd = sys::open_at(AT_FDCWD, blob_path(args.layout, m.layers[i].digest),
                                   O_RDONLY | O_NOFOLLOW);
        trees.back()->layer(fd.get(), what, m.layers[i].digest,
                            progress_for(args, i + 1, m.layers.size()));
        trees.back()->finish();
        const std::uint64_t before = sizes.empty() ? u.counts().bytes_written : written;
        written = trees.back()->counts().bytes_written;
        sizes[hex] = written - before;
        fresh.push_back(hex);
    }
    u.carry_from(*last);
    return {{"layered", true},
            {"layer_digests", digests},
            {"new_layers", fresh},
            {"layer_sizes", sizes}};
}

Json unpack_layout(const Args& args, Unpacker& u) {
    const Descriptor index = parse_index(sys::read_file(args.layout + "/index.json"));
    const Manifest m = parse_manifest(read_verified(args.layout, index, "manifest"));
    const std::string config = read_verified(args.layout, m.config, "image config");
    parse_config(config);  // a malformed config fails the pull, not every later run
    if (!args.stage.empty() && m.layers.size() <= args.max_stacked) {
        Json out = unpack_layers(args, m, u);
        out.update({{"digest", index.digest}, {"config", config}});
        return out;
    }
    for (std::size_t i = 0; i < m.layers.size(); ++i) {
        const std::string what =
            cat("layer ", i + 1, "/", m.layers.size(), " (", m.layers[i].digest.substr(0, 19), ")");
        UniqueFd fd = sys::open_at(AT_FDCWD, blob_path(args.layout, m.layers[i].digest),
                                   O_RDONLY | O_NOFOLLOW);
        u.layer(fd.get(), what, m.layers[i].digest, progress_for(args, i + 1, m.layers.size()));
    }
    return {{"digest", index.digest}, {"config", config}};
}

Json unpack_tar(const Args& args, Unpacker& u) {
    UniqueFd fd = sys::open_at(AT_FDCWD, args.tar, O_RDONLY);
    const std::string digest = u.layer(fd.get(), quote(args.tar), "", progress_for(args, 1, 1));
    Config c;
    c.os = "linux";
    c.architecture = "amd64";
#if defined(__aarch64__)
    c.architecture = "arm64";
#endif
    return {{"digest", digest}, {"config", render_config(c)}};
}

Args parse_args(int argc, char** argv) {
    Args a;
    int i = 1;
    for (; i < argc; ++i) {
        const std::string s = argv[i];
        if (s == "--progress") a.progress = true;
        else if (s == "--layout" && i + 1 < argc) a.layout = argv[++i];
        else if (s == "--tar" && i + 1 < argc) a.tar = argv[++i];
        else if (s == "--max-size" && i + 1 < argc) a.limits.max_size = std::stoull(argv[++i]);
        else if (s == "--layers" && i + 1 < argc) a.stage = argv[++i];
        else if (s == "--stored" && i + 1 < argc) a.stored = argv[++i];
        else if (s == "--max-stacked" && i + 1 < argc) a.max_stacked = std::stoul(argv[++i]);
        else break;
    }
    if (i + 1 != argc || a.layout.empty() == a.tar.empty() || a.stage.empty() != a.stored.empty())
        throw UsageError(
            "usage: gpubox-unpack [--progress] [--max-size BYTES] --layout DIR [--layers STAGE "
            "--stored LAYERS --max-stacked N]|--tar FILE ROOTFS");
    a.rootfs = argv[i];
    return a;
}

}  // namespace

int main(int argc, char** argv) {
    try {
        ::umask(0);  // every mode is set explicitly, as the image says
        const Args args = parse_args(argc, argv);
        Unpacker u(args.rootfs, args.limits);
        Json out = args.layout.empty() ? unpack_tar(args, u) : unpack_layout(args, u);
        u.finish();
        const UnpackCounts& c = u.counts();
        out.update({{"layers", c.layers},
                    {"bytes_read", c.bytes_read},
                    {"size", c.bytes_written},
                    {"devices", c.devices},
                    {"setid", c.setid},
                    {"caps", c.caps},
                    {"unsafe", c.unsafe}});
        print(out.dump() + "\n");
        return 0;
    } catch (...) {
        const std::string line = describe(std::current_exception());
        std::fprintf(stderr, "%s\n", line.c_str());
        return 1;
    }
}
