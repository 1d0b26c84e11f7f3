#pragma once
// A pulled image's config (Env, WorkingDir, Entrypoint, Cmd) applied to a run as docker applies
// it. Pure: the command line's values in, the run's out.
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "image/store.hpp"

namespace gpubox::image {

// What the command line said, as far as an image's config can change it.
struct RunAsked {
    std::vector<std::pair<std::string, std::string>> env;  // --env-file and --env, in order
    bool workdir_given = false;                            // --workdir
    std::vector<std::string> argv;                         // CMD, empty for none
};

// The run that results.
struct RunConfig {
    std::string rootfs;                                    // the image's rootfs directory
    std::vector<std::pair<std::string, std::string>> env;  // the image's Env first, then --env
    std::optional<std::string> workdir;                    // WorkingDir, unless --workdir
    std::vector<std::string> argv;                         // Entrypoint + (CMD, else Cmd)
    std::string driver_capabilities;  // the image's NVIDIA_DRIVER_CAPABILITIES, "" for none
};

// The image's Env entries without a name or an '=' are skipped (as docker does); its
// NVIDIA_VISIBLE_DEVICES selects nothing. UsageError for a WorkingDir that is no clean absolute
// path and for a run with no command at all.
RunConfig translate_config(const Stored& img, const RunAsked& asked);

}  // namespace gpubox::image
