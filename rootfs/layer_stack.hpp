#pragma once
// Pure: which layers the sandbox root's overlay stacks (rootfs/layer.cpp mounts them).
#include <span>
#include <string>
#include <vector>

#include "rootfs/apply.hpp"

namespace gpubox::rootfs {

// The overlay's layers as overlayfs takes them ("/proc/self/fd/N" paths), lower ones top first;
// upper and work empty for a read-only root. `image`: the image's directories, top first: one
// today (ROOTFS, or a pulled image's unpacked tree); an image kept as layers lists them all.
struct LayerStack {
    std::vector<std::string> lower;
    std::string upper, work;
};
LayerStack plan_layer_stack(RootMode mode, const RootLayer& layer, std::span<const int> image);

}  // namespace gpubox::rootfs
