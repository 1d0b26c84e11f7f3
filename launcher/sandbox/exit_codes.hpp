#pragma once

namespace gpubox::launcher {

// As coreutils env/chroot/timeout: the command's own status, 128+N for signal N, and three
// codes of gpubox's own.
constexpr int kExitSetupFailed = 125;
constexpr int kExitCannotExec = 126;
constexpr int kExitNotFound = 127;

}  // namespace gpubox::launcher
