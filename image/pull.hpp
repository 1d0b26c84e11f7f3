#pragma once
// `gpubox pull`: skopeo fetches (registry protocol, auth, TLS, platform choice, archive
// transports) into an OCI layout in the store's temp space; gpubox-unpack verifies and unpacks
// it; the result is renamed into the store under the store's lock. A failure leaves nothing.
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "image/progress.hpp"

namespace gpubox::image {

// --max-size's default: NGC's PyTorch images unpack to about 20 GiB, the largest CUDA images
// in common use to some 30 (docs/images.md).
inline constexpr std::uint64_t kDefaultMaxSize = std::uint64_t{32} << 30;

struct PullRequest {
    std::string source, name;  // name: "" for the default
    bool insecure = false;     // plain HTTP, or HTTPS without verification
    std::string cert_dir, creds, authfile, platform;
    std::uint64_t max_size = kDefaultMaxSize;  // --max-size: what gpubox-unpack may write
    bool flat = false;      // --flat: one tree, no layers shared (image/store.hpp)
    bool squashfs = false;  // --squashfs: one squashfs file (image/squashfs.hpp)
};

struct PullResult {
    std::string name, digest;
    bool reused = false;     // the digest was stored already: nothing was unpacked
    bool kept_tree = false;  // reused, asked for --squashfs, but stored as a tree: it stays one
    std::uint64_t layers = 0, bytes_read = 0, size = 0;
    std::uint64_t devices = 0, setid = 0, caps = 0, unsafe = 0;
    std::vector<std::string> layer_digests;  // a layered image's (hex), bottom first
};

// `env` is the caller's environment, of which only the variables skopeo needs to find the
// user's credentials, certificates and proxies are passed on. Throws PlanError
// "pull SOURCE: <reason>" (exit 125) on any failure, UsageError on a bad request.
// `progress`: a registry pull's per-layer download progress (image/progress.hpp) and, on a
// terminal, the unpacking's.
PullResult pull(const std::filesystem::path& store, const PullRequest& r,
                const std::map<std::string, std::string>& env, Progress progress);

// The skopeo command line for a request (without the binary): pure, unit-tested.
std::vector<std::string> plan_skopeo_args(const PullRequest& r, const std::string& source,
                                          const std::string& layout, const std::string& authfile,
                                          bool progress);

// `skopeo inspect --raw` of a docker:// SOURCE, with the copy's TLS, CA and credentials: the
// manifest alone, to tell a stored image without copying it again. Pure, unit-tested.
std::vector<std::string> plan_inspect_args(const PullRequest& r, const std::string& source,
                                           const std::string& authfile);

// The summary line `gpubox pull` prints on stderr.
std::string render_summary(const PullResult& r);

}  // namespace gpubox::image
