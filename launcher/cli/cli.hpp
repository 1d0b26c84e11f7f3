#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "launcher/cli/cli_values.hpp"
#include "launcher/cli/options.hpp"

namespace gpubox::launcher {

// Pure: argv (without argv[0]) -> Options. Throws UsageError.
Options parse_command_line(const std::vector<std::string>& args);

// The parser's own tables, as --help, the man page and the completions show them: ONE source.
struct FlagDoc {
    std::string name, arg, help;  // arg: "" for a switch, else its metavariable (SIZE, SRC:DST)
};
struct CommandDoc {
    std::string name, synopsis, summary;
    std::vector<FlagDoc> flags;
};
std::vector<CommandDoc> command_docs();

// Rendered from command_docs() (launcher/cli/cli_text.cpp).
std::string usage_text();                           // gpubox --help
std::string command_help(const std::string& name);  // gpubox run --help
std::string man_page();                             // gpubox --man: gpubox(1) in roff
std::string version_text();

}  // namespace gpubox::launcher
