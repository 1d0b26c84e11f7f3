#pragma once
// Small readers over a root fd (a driver root or an image), every path resolved inside it.
#include <optional>
#include <string>
#include <vector>

namespace gpubox::preflight {

// The file's first `limit` bytes (less where it is shorter); nullopt where it cannot be opened.
// O_NONBLOCK: a FIFO reads as empty instead of blocking.
std::optional<std::string> read_in(int root, const std::string& path, std::size_t limit = 1 << 16);
// Entry names, sorted, without dot files.
std::vector<std::string> list_in(int root, const std::string& path);
// The text of the symlink `path` (itself, not its target), or "".
std::string link_in(int root, const std::string& path);

}  // namespace gpubox::preflight
