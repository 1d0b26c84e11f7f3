#pragma once
// `gpubox pull`, `gpubox images`, `gpubox rmi`, `gpubox prune`, and `gpubox run IMAGE`: the launcher's side of
// image/ (the store, the pull).
#include "image/store.hpp"
#include "launcher/cli/options.hpp"

namespace gpubox::launcher {

int pull_command(const Options& o);
int images_command(const Options& o);
int rmi_command(const Options& o);
int prune_command(const Options& o);
int export_command(const Options& o);
// A squashfs image's tree, unpacked once into the caller's store (image/squashfs.hpp), for
// what reads it outside a run (check, export).
std::string unpacked_squashfs(const image::Stored& img);

// `run`'s ROOTFS operand: a directory (or a path: "/x", "./x") is used as it is, with no store
// lookup; else a pulled image's name, whose config then applies (apply_image_config), and
// `hold` gets the run's hold on it (image::hold_image), for the run request to keep till it ends.
Options resolve_run_image(const Options& o, UniqueFd* hold = nullptr);

// Pure (image::translate_config, and the capabilities parsed): the image's Env first (--env-file and --env then on top), its WorkingDir unless
// --workdir, Entrypoint + (CMD, else the image's Cmd) as docker does, NVIDIA_DRIVER_CAPABILITIES
// unless --gpu-caps. The image's NVIDIA_VISIBLE_DEVICES never selects a GPU: only --gpu does.
Options apply_image_config(const Options& o, const image::Stored& img);

}  // namespace gpubox::launcher
