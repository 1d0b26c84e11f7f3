#pragma once
// Pure: what a user coming from docker, podman or a wrapper most likely meant, for a one-line
// answer instead of a generic error (or a silent surprise).
#include <string>
#include <utility>
#include <vector>

namespace gpubox::launcher {

// docker's/podman's `flag` (unknown to gpubox run; `next` is the argument after it): the rest
// of the error line ("not needed: ...", "did you mean --env K=V?"), "" for no known habit.
std::string docker_habit(const std::string& flag, const std::string& next);

// `-v SRC:DST`: gpubox's -v is "more output", so SRC:DST would become ROOTFS. The error line
// for such a `next`, else "".
std::string verbose_as_volume(const std::string& next);

// A gpubox run option as CMD (`run ./rootfs --gpu 0 CMD`): the error line, with the command line
// it meant, else "". Only for a ROOTFS spelled as a path: after an IMAGE's name, the words go
// to its Entrypoint, as docker's do. `rest`: everything after ROOTFS; `flags`: run's, and whether each takes a
// value.
std::string option_after_rootfs(const std::string& rootfs, const std::vector<std::string>& rest,
                                const std::vector<std::pair<std::string, bool>>& flags);

// CUDA_VISIBLE_DEVICES (nullptr: unset) as a wrapper such as Slurm sets it, in a run given no
// GPU and no device (`gpu_asked`: --gpu, even none, or --device): the warning, else "".
std::string gpu_env_warning(const char* cuda_visible_devices, bool gpu_asked);

}  // namespace gpubox::launcher
