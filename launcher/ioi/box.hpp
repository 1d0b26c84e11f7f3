#pragma once
// isolate mode's executor: where a user's boxes live, the box lock (isolate.c's lock_box()),
// --init, --cleanup and --run around run_sandbox(). Invoked as `isolate` (a symlink to gpubox)
// or as `gpubox isolate`.
#include <string>
#include <vector>

namespace gpubox::ioi {

// Pure: $GPUBOX_ISOLATE_ROOT, else $XDG_RUNTIME_DIR/gpubox/isolate, else
// /tmp/gpubox-isolate-<uid>. Each user has a root of their own, so box ids never collide.
std::string isolate_boxes_root(const char* override_root, const char* xdg_runtime_dir,
                               unsigned uid);

// The whole of isolate mode: argv without argv[0] (and without "isolate"). Returns isolate's
// exit code: 0 ok, 1 the program failed or hit a limit, 2 an internal error or a usage error.
int isolate_main(const std::vector<std::string>& args);

}  // namespace gpubox::ioi
