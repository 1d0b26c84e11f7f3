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

// The parser's own tables, as --help, the man page and the completions show them: ONE source.
struct FlagDoc {
    std::string name, arg, help;  // arg: "" for a switch, else its metavariable (SIZE, SRC:DST)
};
struct CommandDoc {
    std::string name, synopsis, summary;
    std::vector<FlagDoc> flags;
};
std::vector<CommandDoc> command_docs();

// Rendered from command_docs() (launcher/cli_text.cpp).
std::string usage_text();                           // gpubox --help
std::string command_help(const std::string& name);  // gpubox run --help
std::string man_page();                             // gpubox --man: gpubox(1) in roff
std::string version_text();

}  // namespace gpubox::launcher
