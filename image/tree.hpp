#pragma once
// Removing parts of a tree by fd, never following a symlink in it: whiteouts, opaque
// directories, failed pulls, rmi. Directories without write permission (an image's read-only
// ones) are made writable for their owner first.
#include <set>
#include <string>

namespace gpubox::image {

// Removes DIRFD/NAME, a directory recursively; nothing when it does not exist.
void remove_at(int dirfd, const std::string& name);

// Under an opaque marker: removes each entry below directory `dirfd` (whose path in the image is
// `rel`, "" for the root) that this layer did not add, recursing into directories it did.
void remove_lower_entries(int dirfd, const std::string& rel, const std::set<std::string>& added);

}  // namespace gpubox::image
