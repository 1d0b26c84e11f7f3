#pragma once
// isolate's command line (ioi/isolate 2.x, isolate.1 and isolate.c's getopt table), parsed into
// plain data. Pure: the meanings, units (KiB, seconds) and defaults are isolate's; what gpubox
// makes of them is plan_isolate_run()'s job (launcher/ioi/plan.hpp).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace gpubox::ioi {

enum class IsolateMode { none, init, run, cleanup, version, help, print_cg_root, check_config };

// isolate's directory-rule flags (rules.c: DIR_FLAG_*), same bits.
enum DirFlag : unsigned {
    kDirRw = 1,
    kDirNoexec = 2,
    kDirFs = 4,
    kDirMaybe = 8,
    kDirDev = 16,
    kDirTmp = 32,
    kDirNorec = 64,
    kDirDefault = 1U << 15,
};

struct DirRule {
    std::string inside;  // relative, sanitized: "box", "usr/lib"
    std::optional<std::string>
        outside;  // "/usr", "./box" (box dir), fs name; nullopt: rule removed
    unsigned flags = 0;
};

struct EnvRule {
    std::string var;
    std::optional<std::string> value;  // nullopt: inherit from the caller; "": remove
};

struct IsolateArgs {
    IsolateMode mode = IsolateMode::none;
    int box_id = 0;
    std::string meta;                                // -M; "-" is stdout
    double time = 0, wall_time = 0, extra_time = 0;  // seconds; 0: no limit
    std::uint64_t mem_kb = 0;                        // -m: RLIMIT_AS
    bool cg = false, cg_timing = false;
    std::uint64_t cg_mem_kb = 0;                 // --cg-mem: the whole box's memory
    std::optional<std::uint64_t> processes = 1;  // -p: 1 by default; -p alone: nullopt (any number)
    std::uint64_t fsize_kb = 0, stack_kb = 0, core_kb = 0;
    std::uint64_t open_files = 1024;                               // 0: unlimited
    std::optional<std::pair<std::uint64_t, std::uint64_t>> quota;  // blocks, inodes
    std::string stdin_file, stdout_file, stderr_file, chdir;
    bool stderr_to_stdout = false;
    std::vector<DirRule> dirs;  // isolate's default rules first, then -d, in order
    bool default_dirs = true;
    std::vector<EnvRule> env;  // after LIBC_FATAL_STDERR_=1, which is always first
    bool full_env = false;
    int silent = 0, verbose = 0;
    bool share_net = false, inherit_fds = false, wait = false, special_files = false,
         tty_hack = false;
    std::optional<std::uint64_t> as_uid, as_gid, syscalls;
    std::vector<std::string> argv;  // --run's command
};

// Pure: argv (without argv[0]) -> IsolateArgs. Throws UsageError with isolate's own text
// ("Invalid numeric parameter: x", "Only one command is allowed.").
IsolateArgs parse_isolate_command_line(const std::vector<std::string>& args);

// Pure: isolate's `--dir` argument applied to `rules` as rules.c's set_dir_action_ext() does;
// returns isolate's error text, or "" when the rule was taken.
std::string add_isolate_dir_rule(std::vector<DirRule>& rules, const std::string& arg,
                                 unsigned extra_flags = 0);
// isolate's default rules (rules.c: init_dir_rules()).
std::vector<DirRule> isolate_default_dir_rules();

// `root_note`: where boxes live, for --help.
std::string isolate_usage_text(const std::string& root_note);
std::string isolate_version_text();

}  // namespace gpubox::ioi
