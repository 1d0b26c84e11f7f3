// gpubox-unpack: turns an OCI image layout (what skopeo wrote) or a plain tar into a root
// filesystem, as the calling user. A separate, dynamically linked program so that libarchive
// and nettle stay out of gpubox's static binary and `gpubox run`'s start-up; gpubox runs it with
// an empty environment and no inherited fds but 0-2.
//
//   gpubox-unpack [--progress] [--max-size BYTES] --layout DIR ROOTFS   verified against the
//                                                                        layout's digests
//   gpubox-unpack [--progress] [--max-size BYTES] --tar FILE ROOTFS     one layer; its digest
//                                                                        is computed
//
// --progress: "progress: TEXT" lines on stderr, which gpubox shows on the terminal.
// --max-size: the most all layers may unpack to (UnpackLimits, helpers/unpack.hpp).
// stdout: one JSON object (digest, config, counts). Failure: one line on stderr, exit 1.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "common/error.hpp"
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
    std::string layout, tar, rootfs;
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

Json unpack_layout(const Args& args, Unpacker& u) {
    const Descriptor index = parse_index(sys::read_file(args.layout + "/index.json"));
    const Manifest m = parse_manifest(read_verified(args.layout, index, "manifest"));
    const std::string config = read_verified(args.layout, m.config, "image config");
    parse_config(config);  // a malformed config fails the pull, not every later run
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
        else break;
    }
    if (i + 1 != argc || a.layout.empty() == a.tar.empty())
        throw UsageError(
            "usage: gpubox-unpack [--progress] [--max-size BYTES] --layout DIR|--tar FILE ROOTFS");
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
        std::cout << out.dump() << "\n";
        return 0;
    } catch (...) {
        const std::string line = describe(std::current_exception());
        std::fprintf(stderr, "%s\n", line.c_str());
        return 1;
    }
}
