#include "rootfs/layer_stack.hpp"

#include "common/text.hpp"

namespace gpubox::rootfs {

namespace {
std::string fd_path(int fd) { return cat("/proc/self/fd/", fd); }
}  // namespace

LayerStack plan_layer_stack(RootMode mode, const RootLayer& layer, std::span<const int> image) {
    LayerStack s;
    const bool kept = layer.kept_upper.valid();
    if (mode == RootMode::read_only || kept) s.lower.push_back(fd_path(layer.upper.get()));
    if (layer.late.valid()) s.lower.push_back(fd_path(layer.late.get()));
    for (const int fd : image) s.lower.push_back(fd_path(fd));
    if (mode == RootMode::read_only) return s;
    s.upper = fd_path(kept ? layer.kept_upper.get() : layer.upper.get());
    s.work = fd_path(kept ? layer.kept_work.get() : layer.work.get());
    return s;
}

}  // namespace gpubox::rootfs
