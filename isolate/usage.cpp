#include "isolate/usage.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace gpubox::isolate {
namespace {

// One read of a small proc file into a stack buffer (init calls this often).
std::string slurp(int dirfd, const char* name) {
    int fd = ::openat(dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    char buf[1024];
    ssize_t n = ::read(fd, buf, sizeof buf - 1);
    ::close(fd);
    return n > 0 ? std::string(buf, static_cast<std::size_t>(n)) : std::string();
}

}  // namespace

std::optional<std::uint64_t> parse_stat_ticks(const std::string& stat) {
    auto close = stat.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::istringstream in(stat.substr(close + 1));
    std::string field;
    std::uint64_t sum = 0;
    // After ')': state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
    // utime(14) stime(15) cutime(16) cstime(17).
    for (int i = 3; i <= 17; ++i) {
        if (!(in >> field)) return std::nullopt;
        if (i >= 14) {
            char* end = nullptr;
            long long v = std::strtoll(field.c_str(), &end, 10);
            if (*end || v < 0) return std::nullopt;
            sum += static_cast<std::uint64_t>(v);
        }
    }
    return sum;
}

std::optional<std::uint64_t> parse_statm_anon_pages(const std::string& statm) {
    std::istringstream in(statm);
    std::uint64_t size = 0, resident = 0, shared = 0;
    if (!(in >> size >> resident >> shared)) return std::nullopt;
    return resident >= shared ? resident - shared : 0;
}

Usage sample_usage(const char* proc_dir) {
    Usage u;
    static const long ticks = ::sysconf(_SC_CLK_TCK);
    static const long page = ::sysconf(_SC_PAGESIZE);
    DIR* d = ::opendir(proc_dir);
    if (!d) return u;
    for (dirent* e; (e = ::readdir(d));) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        int pid_dir = ::openat(::dirfd(d), e->d_name, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (pid_dir < 0) continue;
        if (auto t = parse_stat_ticks(slurp(pid_dir, "stat"))) u.cpu_ns += *t * (1000000000ULL / static_cast<std::uint64_t>(ticks));
        if (auto p = parse_statm_anon_pages(slurp(pid_dir, "statm"))) u.rss_bytes += *p * static_cast<std::uint64_t>(page);
        ++u.processes;
        ::close(pid_dir);
    }
    ::closedir(d);
    return u;
}

}  // namespace gpubox::isolate
