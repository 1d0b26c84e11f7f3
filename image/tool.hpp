#pragma once
// Running the programs a pull needs (skopeo, gpubox-unpack): exactly the environment given,
// stdin /dev/null, no inherited fd but 0-2, signals unblocked. Their stdout and stderr are
// captured (each up to 1 MiB), or their stdout goes to gpubox's stderr (progress on a terminal).
#include <functional>
#include <string>
#include <vector>

namespace gpubox::image {

struct ToolResult {
    int status = 0;  // waitpid status
    std::string out, err;
    bool ok() const;
    std::string failure() const;  // "exited with status 2", "killed by signal 9"
};

// A program to run: its path, opened O_PATH when it was checked, so that what was checked is
// what runs (execveat on the fd); skopeo runs by path.
struct Program {
    std::string path;
    int fd = -1;  // owned by the caller
};

// `argv[0]` is the name it runs as. `relay_progress`: its stderr lines "progress: TEXT" are
// shown on gpubox's stderr as they come, each over the last, not kept in `err`.
// `tick`: called every 200 ms or so while it runs (a pull's download progress).
ToolResult run_tool(const Program& program, const std::vector<std::string>& argv,
                    const std::vector<std::string>& env, bool stdout_to_stderr,
                    bool relay_progress = false, const std::function<void()>& tick = {});

// gpubox-unpack beside gpubox (/proc/self/exe), else in ../libexec/gpubox/; it must be owned by
// root or gpubox's owner and writable by nobody else. Throws SetupError naming where it looked.
// The returned fd (O_PATH) is the caller's to close.
Program find_unpack_helper();
// The same for any of gpubox's helpers in libexec ("gpubox-nvml").
Program find_helper(const std::string& name);
// skopeo in /usr/bin or /bin; throws PlanError with the package to install.
std::string find_skopeo();

}  // namespace gpubox::image
