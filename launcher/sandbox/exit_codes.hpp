#pragma once

namespace gpubox::launcher {

// As coreutils env/chroot/timeout: the command's own status, 128+N for signal N, and three
// codes of gpubox's own.
constexpr int kExitSetupFailed = 125;
constexpr int kExitCannotExec = 126;
constexpr int kExitNotFound = 127;
// 128 + N: the command was killed by signal N (as a shell reports it).
constexpr int kExitSignalBase = 128;

}  // namespace gpubox::launcher
