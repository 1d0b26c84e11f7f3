#include "image/limits.hpp"

#include <algorithm>

#include "common/text.hpp"

namespace gpubox::image {

std::uint64_t space_reserve(std::uint64_t size) {
    return std::min<std::uint64_t>(size / 100, std::uint64_t{1} << 30);
}

std::string UnpackBudget::charge(std::uint64_t bytes) {
    const std::uint64_t t = total + bytes, l = layer + bytes, r = limits.max_ratio;
    if (t > limits.max_size)
        return cat("the image unpacks to more than --max-size ", human_size(limits.max_size), " (",
                   human_size(t), " so far)");
    if (l > limits.ratio_floor && blob <= UINT64_MAX / r && l > r * blob)
        return cat("the layer expands to more than ", r, " times its compressed size of ",
                   human_size(blob), " (", human_size(l),
                   " so far), which no real layer does: a decompression bomb");
    total = t, layer = l;
    return "";
}

std::string space_problem(std::uint64_t avail, std::uint64_t size, std::uint64_t need) {
    const std::uint64_t reserve = space_reserve(size);
    if (avail >= reserve && avail - reserve >= need) return "";
    return cat("the store's filesystem has ", human_size(avail), " free, and this needs ",
               human_size(need), " more while a pull leaves ", human_size(reserve),
               " (1 %, at most 1 GiB) free");
}

}  // namespace gpubox::image
