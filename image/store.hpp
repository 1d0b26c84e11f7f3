#pragma once
// The image store: content-addressed by manifest digest, names are small records pointing at a
// digest, so a re-pull reuses and `rmi` of one name keeps a digest another name still uses.
//
//   STORE/blobs/sha256/<hex>/rootfs        the unpacked root filesystem (never written by a run)
//   STORE/blobs/sha256/<hex>/config.json   the image config (OCI/Docker "config" object)
//   STORE/blobs/sha256/<hex>/info.json     source, size, pulled time
//   STORE/names/<name>                     a record: {"digest": "sha256:<hex>"}
//   STORE/tmp/                             pulls in progress (renamed into place when complete)
//   STORE/lock                             flock() serializes writers
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace gpubox::image {

// The parts of an image's config that gpubox honours, plus what `images` shows.
struct Config {
    std::vector<std::string> env;  // "KEY=VALUE", in the image's order
    std::string working_dir;
    std::vector<std::string> entrypoint, cmd;
    std::string user, os, architecture;
};

struct Stored {
    std::string name, digest, source;  // digest: "sha256:<64 hex>" of the manifest
    std::filesystem::path rootfs;
    Config config;
    std::uint64_t size_bytes = 0;
    std::int64_t pulled_unix = 0;
};

// $GPUBOX_IMAGES, else $XDG_DATA_HOME/gpubox/images, else $HOME/.local/share/gpubox/images.
// Pure: takes the environment as a map (only those three keys and HOME are read).
std::filesystem::path store_root(const std::map<std::string, std::string>& env);

// The image stored under NAME, or nullopt when there is none (or NAME is not a valid name).
std::optional<Stored> find(const std::filesystem::path& store, std::string_view name);
// Every named image, sorted by name.
std::vector<Stored> list(const std::filesystem::path& store);

}  // namespace gpubox::image
