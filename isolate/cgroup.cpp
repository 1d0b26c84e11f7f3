#include "isolate/cgroup.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "common/text.hpp"

namespace gpubox::isolate {
namespace {

std::string read_text(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

bool write_text(const std::string& path, const std::string& value) {
    int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) return false;
    bool ok = ::write(fd, value.data(), value.size()) == static_cast<ssize_t>(value.size());
    ::close(fd);
    return ok;
}

// The cgroup2 mount point and our own cgroup path in it.
std::optional<std::string> own_cgroup_dir() {
    std::string mnt;
    std::istringstream info(read_text("/proc/self/mountinfo"));
    for (std::string line; std::getline(info, line);) {
        auto dash = line.find(" - cgroup2 ");
        if (dash == std::string::npos) continue;
        std::istringstream f(line.substr(0, dash));
        std::string a, b, c, d;
        f >> a >> b >> c >> d >> mnt;
        break;
    }
    if (mnt.empty()) return std::nullopt;
    std::istringstream cg(read_text("/proc/self/cgroup"));
    for (std::string line; std::getline(cg, line);)
        if (starts_with(line, "0::")) return mnt + (line.substr(3) == "/" ? "" : line.substr(3));
    return std::nullopt;
}

bool has_word(const std::string& list, const std::string& word) {
    std::istringstream in(list);
    for (std::string w; in >> w;)
        if (w == word) return true;
    return false;
}

// Make `ctrl` available to our child cgroups, if our cgroup offers it.
bool enable_controller(const std::string& parent, const std::string& ctrl) {
    if (!has_word(read_text(parent + "/cgroup.controllers"), ctrl)) return false;
    if (has_word(read_text(parent + "/cgroup.subtree_control"), ctrl)) return true;
    return write_text(parent + "/cgroup.subtree_control", "+" + ctrl);
}

}  // namespace

Cgroup setup_cgroup(const Limits& limits, const std::string& mode) {
    Cgroup cg;
    if (mode == "off") {
        cg.reason = "--cgroup off";
        return cg;
    }
    auto parent = own_cgroup_dir();
    if (!parent) {
        cg.reason = "no cgroup v2 hierarchy";
        return cg;
    }
    const bool want_mem = limits.memory_bytes.has_value(), want_pids = limits.pids.has_value();
    const bool mem = want_mem && enable_controller(*parent, "memory");
    const bool pids = want_pids && enable_controller(*parent, "pids");
    cg.path = cat(*parent, "/gpubox-", ::getpid());
    if (::mkdir(cg.path.c_str(), 0755) < 0) {
        cg.reason = cat("no cgroup of our own: mkdir(", quote(cg.path), "): ", std::strerror(errno),
                        " (not delegated to this user)");
        cg.path.clear();
        return cg;
    }
    cg.dir.reset(::open(cg.path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    cg.caps.usable = cg.dir.valid();
    if (mem && write_text(cg.path + "/memory.max", std::to_string(*limits.memory_bytes))) {
        write_text(cg.path + "/memory.swap.max", "0");
        cg.caps.memory = true;
    }
    if (pids && write_text(cg.path + "/pids.max", std::to_string(*limits.pids))) cg.caps.pids = true;
    if ((want_mem && !cg.caps.memory) || (want_pids && !cg.caps.pids))
        cg.reason = cat("controllers not delegated to ", quote(*parent), ":", want_mem && !cg.caps.memory ? " memory" : "",
                        want_pids && !cg.caps.pids ? " pids" : "");
    return cg;
}

std::optional<std::uint64_t> cgroup_cpu_usec(const Cgroup& cg) {
    std::istringstream in(read_text(cg.path + "/cpu.stat"));
    std::string key;
    std::uint64_t v = 0;
    while (in >> key >> v)
        if (key == "usage_usec") return v;
    return std::nullopt;
}

std::optional<std::uint64_t> cgroup_memory_peak(const Cgroup& cg) {
    std::string t = read_text(cg.path + "/memory.peak");
    if (t.empty()) return std::nullopt;
    return std::stoull(t);
}

bool cgroup_oom_killed(const Cgroup& cg) {
    std::istringstream in(read_text(cg.path + "/memory.events"));
    std::string key;
    std::uint64_t v = 0;
    while (in >> key >> v)
        if (key == "oom_kill" && v > 0) return true;
    return false;
}

bool cgroup_kill(const Cgroup& cg) { return cg.caps.usable && write_text(cg.path + "/cgroup.kill", "1"); }

void remove_cgroup(Cgroup& cg) {
    if (cg.path.empty()) return;
    cg.dir.reset();
    for (int i = 0; i < 100 && ::rmdir(cg.path.c_str()) < 0 && errno == EBUSY; ++i) ::usleep(2000);
    cg.path.clear();
}

}  // namespace gpubox::isolate
