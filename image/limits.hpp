#pragma once
// What a pull may write: the pure accounting behind gpubox-unpack's limits (helpers/unpack.cpp)
// and `gpubox pull --max-size`.
#include <cstdint>
#include <string>

#include "image/pull.hpp"

namespace gpubox::image {

// What a pull may write (docs/images.md). Sizes are apparent: a member's declared size (a
// sparse file's whole length), plus a tar header's 512 bytes per entry, so that a layer of a
// million empty files counts too. Each member is charged before it is written.
struct UnpackLimits {
    std::uint64_t max_size = kDefaultMaxSize;              // every layer together (--max-size)
    std::uint64_t max_ratio = 100;                         // a layer's size / its blob's size ...
    std::uint64_t ratio_floor = std::uint64_t{256} << 20;  // ... once the layer is past this
};
// The layers' running total against the limits (pure). charge() returns "" or why `bytes`
// more would break one; nothing is charged then.
struct UnpackBudget {
    UnpackLimits limits;
    std::uint64_t total = 0, layer = 0, blob = 0;  // blob: this layer's compressed size
    void start_layer(std::uint64_t blob_size) { layer = 0, blob = blob_size; }
    std::string charge(std::uint64_t bytes);
};
// Pure: why writing `need` more bytes would leave the store's filesystem (`avail` free of
// `size`) with less than 1 % of it (at most 1 GiB) free, or "".
std::string space_problem(std::uint64_t avail, std::uint64_t size, std::uint64_t need);
// Pure: what a pull leaves free on a filesystem of `size` bytes: 1 % of it, at most 1 GiB.
std::uint64_t space_reserve(std::uint64_t size);

}  // namespace gpubox::image
