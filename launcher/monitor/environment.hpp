#pragma once
#include <string>
#include <utility>
#include <vector>

namespace gpubox::launcher {

// Pure: the workload's environment. Clean by default (PATH, HOME, TERM from the caller if set,
// LANG), then --env-file and --env in command-line order; a later assignment wins.
std::vector<std::string> build_environment(
    const std::vector<std::pair<std::string, std::string>>& assignments, bool root,
    const char* caller_term);

// Pure: the paths execve() tries for `cmd`, as execvp would, but with the sandbox's PATH.
// Pure: exactly these assignments as "K=V", later ones replacing earlier ones (isolate mode: the
// environment isolate's rules built, with no PATH, HOME, LANG or TERM of gpubox's).
std::vector<std::string> render_environment(
    const std::vector<std::pair<std::string, std::string>>& assignments);

std::vector<std::string> plan_exec_candidates(const std::string& cmd,
                                              const std::vector<std::string>& env);

}  // namespace gpubox::launcher
