#include "launcher/cli/cli_habits.hpp"

#include <algorithm>

#include "common/text.hpp"

namespace gpubox::launcher {

std::string docker_habit(const std::string& flag, const std::string& next) {
    if (flag == "-it" || flag == "-ti" || flag == "-i" || flag == "-t" || flag == "--tty" ||
        flag == "--interactive")
        return "not needed: stdin always reaches the workload, and run from a terminal it gets "
               "a terminal (a pty) of its own";
    if (flag == "--rm")
        return "not needed: every sandbox is gone when it exits (--overlay DIR keeps its writes)";
    if (flag == "-e") return "did you mean --env K=V?";
    if (flag == "--gpus")
        return cat("did you mean --gpu ", next.empty() || next == "all" ? "all" : next, "?");
    if (flag == "--volume" || flag == "--mount")
        return cat("did you mean --bind ", next.find(':') != std::string::npos ? next : "SRC:DST",
                   " (or --ro-bind)?");
    if (flag == "-w") return "did you mean --workdir DIR?";
    if (flag == "--network" || flag == "--net")
        return "did you mean --share-net (the host's network)? Without it the sandbox has a "
               "network of its own with only lo";
    return "";
}

std::string verbose_as_volume(const std::string& next) {
    const auto colon = next.find(':');
    if (colon == std::string::npos || colon + 1 >= next.size() || next[colon + 1] != '/') return "";
    return cat("run: -v is gpubox's \"more output\"; did you mean --bind ", next,
               "? (docker's -v SRC:DST)");
}

std::string option_after_rootfs(const std::string& rootfs, const std::vector<std::string>& rest,
                                const std::vector<std::pair<std::string, bool>>& flags) {
    const auto flag = [&](const std::string& a) {
        const std::string name = a.substr(0, a.find('='));
        return std::find_if(flags.begin(), flags.end(),
                            [&](const auto& f) { return f.first == name; });
    };
    // A bare name may be an IMAGE, whose Entrypoint takes the words after it (docker's rule).
    if (rootfs.find('/') == std::string::npos || rest.empty() || flag(rest[0]) == flags.end())
        return "";
    std::vector<std::string> options;
    std::size_t i = 0;
    for (auto f = flag(rest[0]); i < rest.size() && (f = flag(rest[i])) != flags.end(); ++i) {
        options.push_back(rest[i]);
        if (f->second && rest[i].find('=') == std::string::npos && i + 1 < rest.size())
            options.push_back(rest[++i]);
    }
    const std::vector<std::string> command(rest.begin() + static_cast<std::ptrdiff_t>(i),
                                           rest.end());
    return cat("run: option ", quote(rest[0].substr(0, rest[0].find('='))),
               " after ROOTFS would be the command: options go before ROOTFS (gpubox run ",
               join(options, " "), " ", rootfs, command.empty() ? "" : " ", join(command, " "),
               ")");
}

std::string gpu_env_warning(const char* cuda_visible_devices, bool gpu_asked) {
    if (gpu_asked || !cuda_visible_devices) return "";
    const std::string v = cuda_visible_devices;
    // Slurm's and CUDA's spellings of "no GPU here": nothing is lost.
    if (v.empty() || v == "NoDevFiles" || v == "-1" || v == "none") return "";
    return cat("CUDA_VISIBLE_DEVICES=", v, " is set, but without --gpu the sandbox has no GPU");
}

}  // namespace gpubox::launcher
