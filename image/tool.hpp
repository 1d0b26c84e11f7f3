#pragma once
// Running the programs a pull needs (skopeo, gpubox-unpack): exactly the environment given,
// stdin /dev/null, no inherited fd but 0-2, signals unblocked. Their stdout and stderr are
// captured (each up to 1 MiB), or their stdout goes to gpubox's stderr (progress on a terminal).
#include <functional>
#include <string>
#include <vector>

#include "common/companion.hpp"

namespace gpubox::image {

struct ToolResult {
    int status = 0;  // waitpid status
    std::string out, err;
    bool ok() const;
    std::string failure() const;  // "exited with status 2", "killed by signal 9"
};

// A program to run (common/companion.hpp): a companion opened O_PATH when it was checked, so
// that what was checked is what runs; skopeo runs by path.
using Program = companion::Program;

// `argv[0]` is the name it runs as. `relay_progress`: its stderr lines "progress: TEXT" are
// shown on gpubox's stderr as they come, each over the last, not kept in `err`.
// `tick`: called every 200 ms or so while it runs (a pull's download progress).
ToolResult run_tool(const Program& program, const std::vector<std::string>& argv,
                    const std::vector<std::string>& env, bool stdout_to_stderr,
                    bool relay_progress = false, const std::function<void()>& tick = {});

// gpubox-unpack, found and checked as every companion is (companion::find).
Program find_unpack_helper();
// The same for any of gpubox's helpers ("gpubox-nvml").
Program find_helper(const std::string& name);
// skopeo in /usr/bin or /bin; throws PlanError with the package to install.
std::string find_skopeo();

}  // namespace gpubox::image
