#pragma once
// Running the programs a pull needs (skopeo, gpubox-unpack): exactly the environment given,
// stdin /dev/null, no inherited fd but 0-2, signals unblocked. Their stdout and stderr are
// captured (each up to 1 MiB), or their stdout goes to gpubox's stderr (progress on a terminal).
#include <string>
#include <vector>

namespace gpubox::image {

struct ToolResult {
    int status = 0;  // waitpid status
    std::string out, err;
    bool ok() const;
    std::string failure() const;  // "exited with status 2", "killed by signal 9"
};

// `path` absolute; `argv[0]` is the name it runs as.
ToolResult run_tool(const std::string& path, const std::vector<std::string>& argv,
                    const std::vector<std::string>& env, bool stdout_to_stderr);

// gpubox-unpack beside gpubox (/proc/self/exe), else in ../libexec/gpubox/; it must be owned by
// root or gpubox's owner and writable by nobody else. Throws SetupError naming where it looked.
std::string find_unpack_helper();
// skopeo in /usr/bin or /bin; throws PlanError with the package to install.
std::string find_skopeo();

}  // namespace gpubox::image
