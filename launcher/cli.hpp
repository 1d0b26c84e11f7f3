#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/options.hpp"

namespace gpubox::launcher {

// Pure: argv (without argv[0]) -> Options. Throws UsageError.
Options parse_command_line(const std::vector<std::string>& args);

// Value parsers, each pure and table-tested.
std::uint64_t parse_size(const std::string& text, const std::string& what);  // 64M, 1G, 4096
double parse_seconds(const std::string& text, const std::string& what);       // 2, 0.5
std::uint64_t parse_count(const std::string& text, const std::string& what);  // a positive integer
// --meta's value from a command line that may not parse, so a verdict is written even then.
std::string find_meta_path(const std::vector<std::string>& args);
std::pair<std::string, std::string> parse_bind_spec(const std::string& spec, const std::string& what);
std::pair<std::string, std::string> parse_env_assignment(const std::string& text, const std::string& what);
std::vector<std::pair<std::string, std::string>> parse_env_file(const std::string& content,
                                                                const std::string& path);

std::string usage_text();
std::string version_text();

}  // namespace gpubox::launcher
