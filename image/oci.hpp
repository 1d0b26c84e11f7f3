#pragma once
// OCI image layout documents (index.json, manifests, image configs), parsed. Pure: text in,
// typed values out; UsageError-free, throws std::runtime_error naming the document and field.
#include <cstdint>
#include <string>
#include <vector>

namespace gpubox::image {

struct Descriptor {
    std::string media_type, digest;  // digest: "sha256:<64 hex>", validated
    std::uint64_t size = 0;
};

struct Manifest {
    Descriptor config;
    std::vector<Descriptor> layers;
};

// The parts of an image's config that gpubox honours, plus what `images` shows.
struct Config {
    std::vector<std::string> env;  // "KEY=VALUE", in the image's order
    std::string working_dir;
    std::vector<std::string> entrypoint, cmd;
    std::string user, os, architecture;
};

// index.json of a layout with exactly the one manifest skopeo wrote.
Descriptor parse_index(const std::string& json);
// An OCI or Docker schema 2 image manifest (not a list: skopeo resolved that already).
Manifest parse_manifest(const std::string& json);
// The image config: Env, WorkingDir, Entrypoint, Cmd, User, os, architecture. Missing fields
// are empty; a wrongly typed one is an error.
Config parse_config(const std::string& json);
// What gpubox writes for a tar: image (no config of its own).
std::string render_config(const Config& c);

// "sha256:<64 lower-case hex>"
bool valid_digest(const std::string& digest);

// A registry's raw manifest for a reference: an index (OCI, or a Docker manifest list)?
bool is_index(const std::string& json);
// The digest of the index's one entry for OS/ARCH (and VARIANT, where not empty), as skopeo
// copy would choose it; "" when none or several match, or the document is no index.
std::string pick_platform(const std::string& index_json, const std::string& os,
                          const std::string& arch, const std::string& variant);
// The OCI architecture name of this machine (uname's machine): "amd64", "arm64"; "" if unknown.
std::string host_architecture();

}  // namespace gpubox::image
