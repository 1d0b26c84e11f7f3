#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rootfs/mount_op.hpp"

namespace gpubox::rootfs {

// Mount ops as bytes, for the ops the monitor plans while the sandbox already sets up (GPU
// injection): the monitor writes them to a socket and the sandbox's init reads them. With each
// op goes its `prepared` flag (missing: false): its entry is already made in the layer's late
// directory (NewRoot::prepared's sense). Every op type round-trips; decoding checks every
// length and tag and throws SetupError on bad input.
std::string encode_ops(std::span<const MountOp> ops, const std::vector<bool>& prepared = {});
std::vector<MountOp> decode_ops(std::string_view bytes, std::vector<bool>* prepared = nullptr);

}  // namespace gpubox::rootfs
