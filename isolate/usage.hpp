#pragma once
// The sandbox's resource use, summed over its processes from a procfs that shows only them
// (the sandbox's own /proc, read by its init). Parsers are pure.
#include <cstdint>
#include <optional>
#include <string>

namespace gpubox::isolate {

struct Usage {
    std::uint64_t cpu_ns = 0;     // user + system, including reaped children
    std::uint64_t rss_bytes = 0;  // resident anonymous memory
    std::uint32_t processes = 0;
};

// /proc/<pid>/stat -> utime+stime+cutime+cstime in clock ticks (the comm field may hold spaces
// and parentheses: parse after the last ')').
std::optional<std::uint64_t> parse_stat_ticks(const std::string& stat);
// /proc/<pid>/statm -> resident minus file-backed pages.
std::optional<std::uint64_t> parse_statm_anon_pages(const std::string& statm);

// Sum over every process in `proc_dir` (the caller's own procfs).
Usage sample_usage(const char* proc_dir = "/proc");

}  // namespace gpubox::isolate
