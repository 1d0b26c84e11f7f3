#pragma once
#include <string>
#include <vector>

namespace gpubox::rootfs {

// Lexical validation of a container path: absolute, no NUL, no "..", no empty result.
// "//a/./b/" -> "/a/b". Throws UsageError naming `what`.
std::string normalize_container_path(const std::string& path, const std::string& what);

// "/a/b/c" -> {"a", "b", "c"}; "/" -> {}.
std::vector<std::string> split_path(const std::string& normalized);

// Is `path` equal to or below `dir` (both normalized)?
bool is_within(const std::string& path, const std::string& dir);

// One entry's name in its directory: not empty, ".", ".." or with a '/'.
bool is_plain_name(const std::string& name);
// "/a/b": absolute, and every component a plain name (no "//", no trailing '/').
bool is_plain_path(const std::string& path);

std::string parent_of(const std::string& normalized);
std::string base_name(const std::string& normalized);

}  // namespace gpubox::rootfs
