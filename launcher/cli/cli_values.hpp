#pragma once
// The command line's value parsers (cli_values.cpp), for the flag tables (cli_flags.cpp).
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/cli/options.hpp"

namespace gpubox::launcher {

// Value parsers, each pure and table-tested.
std::uint64_t parse_size(const std::string& text, const std::string& what);   // 64M, 1G, 4096B
double parse_seconds(const std::string& text, const std::string& what);       // 2, 0.5
std::uint64_t parse_count(const std::string& text, const std::string& what);  // a positive integer
// --meta's value from a command line that may not parse, so a verdict is written even then.
std::string find_meta_path(const std::vector<std::string>& args);
std::pair<std::string, std::string> parse_bind_spec(const std::string& spec,
                                                    const std::string& what);
std::pair<std::string, std::string> parse_env_assignment(const std::string& text,
                                                         const std::string& what);
std::vector<std::pair<std::string, std::string>> parse_env_file(const std::string& content,
                                                                const std::string& path);
// A repeated --gpu: the union of both, de-duplicated ("all" absorbs the rest; "none" with any
// other value is an error).
gpu::GpuSpec merge_gpu_specs(const gpu::GpuSpec& before, const gpu::GpuSpec& added);
std::string_view to_string(MetaFormat format);
// --meta-format: "json" or "isolate"; UsageError otherwise.
MetaFormat parse_meta_format(const std::string& text);

}  // namespace gpubox::launcher
