#include "launcher/monitor/environment.hpp"

#include <algorithm>

#include "common/text.hpp"

namespace gpubox::launcher {

std::vector<std::string> build_environment(
    const std::vector<std::pair<std::string, std::string>>& assignments, bool root,
    const char* caller_term) {
    std::vector<std::pair<std::string, std::string>> env = {
        {"PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
        {"HOME", root ? "/root" : "/tmp"},
        {"LANG", "C.UTF-8"},
    };
    if (caller_term && *caller_term) env.emplace_back("TERM", caller_term);
    env.insert(env.end(), assignments.begin(), assignments.end());  // a later one wins, in place
    return render_environment(env);
}

std::vector<std::string> render_environment(
    const std::vector<std::pair<std::string, std::string>>& assignments) {
    std::vector<std::pair<std::string, std::string>> env;
    for (const auto& [k, v] : assignments) {
        auto it = std::find_if(env.begin(), env.end(), [&](auto& e) { return e.first == k; });
        if (it != env.end()) it->second = v;
        else env.emplace_back(k, v);
    }
    std::vector<std::string> out;
    for (const auto& [k, v] : env) out.push_back(k + "=" + v);
    return out;
}

std::vector<std::string> plan_exec_candidates(const std::string& cmd,
                                              const std::vector<std::string>& env) {
    if (cmd.find('/') != std::string::npos) return {cmd};
    std::string path;
    for (const std::string& e : env)
        if (starts_with(e, "PATH=")) path = e.substr(5);
    std::vector<std::string> out;
    std::size_t i = 0;
    while (i <= path.size()) {
        std::size_t j = path.find(':', i);
        if (j == std::string::npos) j = path.size();
        std::string dir = path.substr(i, j - i);
        if (dir.empty()) dir = ".";  // POSIX: an empty PATH entry is the working directory
        out.push_back(dir + "/" + cmd);
        i = j + 1;
    }
    return out;
}

}  // namespace gpubox::launcher
