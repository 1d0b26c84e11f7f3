#pragma once
// The command line's flag tables, one per command: each flag's name, metavariable, help text
// and what it sets in Options. cli.cpp parses with them; --help, the man page and the
// completions are rendered from the same tables (command_docs()).
#include <functional>
#include <string>
#include <vector>

#include "launcher/cli/options.hpp"

namespace gpubox::launcher {

struct Flag {
    const char* name;
    const char* arg;   // nullptr: a switch; else the value's metavariable, as --help shows it
    const char* help;  // nullptr: hidden (an alias)
    std::function<void(Options&, const std::string&)> apply;
};
using Flags = std::vector<Flag>;

const Flags& run_flags();
const Flags& list_flags();
const Flags& doctor_flags();
const Flags& cdi_generate_flags();
const Flags& cdi_list_flags();
const Flags& check_flags();
const Flags& create_flags();
const Flags& pull_flags();
const Flags& images_flags();
const Flags& ps_flags();
const Flags& exec_flags();
const Flags& export_flags();
const Flags& isolate_flags();
const Flags& no_flags();

}  // namespace gpubox::launcher
