#pragma once
// What `gpubox pull` was asked to fetch, and the name it is stored under. Pure.
#include <string>

namespace gpubox::image {

struct Source {
    enum class Kind { docker, docker_archive, oci_archive, oci_dir, tar };
    Kind kind = Kind::docker;
    std::string text;  // as the user wrote it; "docker://" added where a transport was left out
    // docker://HOST[:PORT]/REPO[:TAG|@DIGEST]
    std::string host, repo, tag, digest;
    // archives, oci: directories and tar files; tag only for oci:DIR:TAG
    std::string path;
};

// Throws UsageError naming what is wrong ("no tag after ':'", "unknown transport"). A SOURCE
// without a transport whose first part names a host (it has a '.' or ':', or is localhost:
// "reg.example:5000/lab/py:1") is docker://, as podman reads it.
Source parse_source(const std::string& text);

// cuda:12 for docker://h:5000/lab/cuda:12, cuda:latest without a tag, cuda@sha256:<12 hex> by
// digest; an archive's or directory's base name without extensions (plus :TAG for oci:DIR:TAG).
std::string default_name(const Source& s);

// Throws UsageError unless NAME can name a stored image: 1-128 printable ASCII characters from
// [A-Za-z0-9._:@+-/], each '/'-separated part ("lab/py") not empty and not starting with '.'
// or '-', no "..".
void validate_name(const std::string& name);
bool valid_name(const std::string& name);

// The source as skopeo spells it (paths made absolute against `cwd`); "" for tar:.
std::string skopeo_source(const Source& s, const std::string& cwd);

}  // namespace gpubox::image
