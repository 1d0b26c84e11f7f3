// isolate's command line, as its getopt_long table reads it: short option clusters, long options
// by unique prefix, `-p` with an optional value, operands anywhere (GNU permutation) and `--`.
#include "launcher/ioi/cli.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "common/error.hpp"
#include "common/text.hpp"

namespace gpubox::ioi {
namespace {

enum class Arg { none, required, optional };
using Value = std::optional<std::string>;

struct IsoOpt {
    const char* name;  // long name
    char short_name;   // 0: none
    Arg arg;
    void (*apply)(IsolateArgs&, const Value&);
};

// isolate.c: opt_uint(): an unsigned value that fits in an int.
std::uint64_t opt_uint(const std::string& v) {
    char* end = nullptr;
    errno = 0;
    const unsigned long x = std::strtoul(v.c_str(), &end, 10);
    if (errno || end == v.c_str() || *end) throw UsageError(cat("Invalid numeric parameter: ", v));
    if (x > INT_MAX) throw UsageError(cat("Numeric parameter out of range: ", v));
    return x;
}

// isolate reads times with atof(): lenient, as it is.
double opt_time(const std::string& v) { return std::atof(v.c_str()); }

void set_mode(IsolateArgs& a, IsolateMode m) {
    if (a.mode != IsolateMode::none && a.mode != m)
        throw UsageError("Only one command is allowed.");
    a.mode = m;
}

void add_env(IsolateArgs& a, const std::string& v) {
    const auto eq = v.find('=');
    if (eq == 0) throw UsageError(cat("Invalid environment specified: ", v));
    if (eq == std::string::npos) a.env.push_back({v, std::nullopt});
    else a.env.push_back({v.substr(0, eq), v.substr(eq + 1)});
}

void set_quota(IsolateArgs& a, const std::string& v) {
    const auto comma = v.find(',');
    if (comma == std::string::npos) throw UsageError(cat("Invalid quota specified: ", v));
    a.quota = std::make_pair(opt_uint(v.substr(0, comma)), opt_uint(v.substr(comma + 1)));
}

#define ISO_SET(body)                    \
    [](IsolateArgs& a, const Value& v) { \
        (void)v;                         \
        body;                            \
    }
const std::vector<IsoOpt>& iso_options() {
    static const std::vector<IsoOpt> opts = {
        {"as-uid", 0, Arg::required, ISO_SET(a.as_uid = opt_uint(*v))},
        {"as-gid", 0, Arg::required, ISO_SET(a.as_gid = opt_uint(*v))},
        {"box-id", 'b', Arg::required, ISO_SET(a.box_id = static_cast<int>(opt_uint(*v)))},
        {"chdir", 'c', Arg::required, ISO_SET(a.chdir = *v)},
        {"cg", 0, Arg::none, ISO_SET(a.cg = true)},
        {"cg-mem", 0, Arg::required, ISO_SET(a.cg_mem_kb = opt_uint(*v))},
        {"cg-timing", 0, Arg::none, ISO_SET(a.cg_timing = true)},
        {"check-config", 0, Arg::none, ISO_SET(set_mode(a, IsolateMode::check_config))},
        {"cleanup", 0, Arg::none, ISO_SET(set_mode(a, IsolateMode::cleanup))},
        {"core", 0, Arg::required, ISO_SET(a.core_kb = opt_uint(*v))},
        {"dir", 'd', Arg::required,
         [](IsolateArgs& a, const Value& v) {
             const std::string err = add_isolate_dir_rule(a.dirs, *v);
             if (!err.empty()) throw UsageError(cat("Invalid directory rule '", *v, "': ", err));
         }},
        {"no-default-dirs", 'D', Arg::none, ISO_SET(a.default_dirs = false)},
        {"fsize", 'f', Arg::required, ISO_SET(a.fsize_kb = opt_uint(*v))},
        {"env", 'E', Arg::required, ISO_SET(add_env(a, *v))},
        {"extra-time", 'x', Arg::required, ISO_SET(a.extra_time = opt_time(*v))},
        {"full-env", 'e', Arg::none, ISO_SET(a.full_env = true)},
        {"help", 'h', Arg::none, ISO_SET(set_mode(a, IsolateMode::help))},
        {"inherit-fds", 0, Arg::none, ISO_SET(a.inherit_fds = true)},
        {"init", 0, Arg::none, ISO_SET(set_mode(a, IsolateMode::init))},
        {"mem", 'm', Arg::required, ISO_SET(a.mem_kb = opt_uint(*v))},
        {"meta", 'M', Arg::required, ISO_SET(a.meta = *v)},
        {"processes", 'p', Arg::optional,
         ISO_SET(a.processes = v ? std::optional(opt_uint(*v)) : std::nullopt)},
        {"quota", 'q', Arg::required, ISO_SET(set_quota(a, *v))},
        {"run", 0, Arg::none, ISO_SET(set_mode(a, IsolateMode::run))},
        {"share-net", 0, Arg::none, ISO_SET(a.share_net = true)},
        {"silent", 's', Arg::none, ISO_SET(++a.silent)},
        {"stack", 'k', Arg::required, ISO_SET(a.stack_kb = opt_uint(*v))},
        {"open-files", 'n', Arg::required, ISO_SET(a.open_files = opt_uint(*v))},
        {"print-cg-root", 0, Arg::none, ISO_SET(set_mode(a, IsolateMode::print_cg_root))},
        {"special-files", 0, Arg::none, ISO_SET(a.special_files = true)},
        {"stderr", 'r', Arg::required, ISO_SET(a.stderr_file = *v; a.stderr_to_stdout = false)},
        {"stderr-to-stdout", 0, Arg::none,
         ISO_SET(a.stderr_file.clear(); a.stderr_to_stdout = true)},
        {"stdin", 'i', Arg::required, ISO_SET(a.stdin_file = *v)},
        {"stdout", 'o', Arg::required, ISO_SET(a.stdout_file = *v)},
        {"syscalls", 0, Arg::required, ISO_SET(a.syscalls = opt_uint(*v))},
        {"time", 't', Arg::required, ISO_SET(a.time = opt_time(*v))},
        {"tty-hack", 0, Arg::none, ISO_SET(a.tty_hack = true)},
        {"verbose", 'v', Arg::none, ISO_SET(++a.verbose)},
        {"version", 0, Arg::none, ISO_SET(set_mode(a, IsolateMode::version))},
        {"wait", 0, Arg::none, ISO_SET(a.wait = true)},
        {"wall-time", 'w', Arg::required, ISO_SET(a.wall_time = opt_time(*v))},
    };
    return opts;
}
#undef ISO_SET

// getopt_long: an exact name, else a unique prefix.
const IsoOpt& find_long(const std::string& name, const std::string& arg) {
    const IsoOpt* hit = nullptr;
    for (const IsoOpt& o : iso_options()) {
        if (name == o.name) return o;
        if (std::strncmp(o.name, name.c_str(), name.size()) == 0) {
            if (hit) throw UsageError(cat("isolate: option '", arg, "' is ambiguous"));
            hit = &o;
        }
    }
    if (!hit) throw UsageError(cat("isolate: unrecognized option '", arg, "'"));
    return *hit;
}

const IsoOpt& find_short(char c) {
    for (const IsoOpt& o : iso_options())
        if (o.short_name == c) return o;
    throw UsageError(cat("isolate: invalid option -- '", c, "'"));
}

// One long option at args[i]; may take args[i + 1]. Returns the next index.
std::size_t parse_long(IsolateArgs& a, const std::vector<std::string>& args, std::size_t i) {
    const std::string body = args[i].substr(2);
    const auto eq = body.find('=');
    const IsoOpt& o = find_long(body.substr(0, eq), args[i]);
    Value v;
    if (eq != std::string::npos) {
        if (o.arg == Arg::none)
            throw UsageError(cat("isolate: option '--", o.name, "' doesn't allow an argument"));
        v = body.substr(eq + 1);
    } else if (o.arg == Arg::required) {
        if (i + 1 >= args.size())
            throw UsageError(cat("isolate: option '--", o.name, "' requires an argument"));
        v = args[++i];
    }
    o.apply(a, v);
    return i + 1;
}

// A cluster of short options at args[i] ("-sv", "-t1", "-p", "-p20", "-b 3").
std::size_t parse_short(IsolateArgs& a, const std::vector<std::string>& args, std::size_t i) {
    const std::string& s = args[i];
    for (std::size_t k = 1; k < s.size(); ++k) {
        const IsoOpt& o = find_short(s[k]);
        if (o.arg == Arg::none) {
            o.apply(a, std::nullopt);
            continue;
        }
        Value v;
        if (k + 1 < s.size()) v = s.substr(k + 1);
        else if (o.arg == Arg::required && i + 1 < args.size()) v = args[++i];
        else if (o.arg == Arg::required)
            throw UsageError(cat("isolate: option requires an argument -- '", s[k], "'"));
        o.apply(a, v);
        break;
    }
    return i + 1;
}

void check_operands(const IsolateArgs& a) {
    if (a.mode == IsolateMode::none)
        throw UsageError("Please specify an isolate command (e.g. --init, --run).");
    if (a.cg_mem_kb && !a.cg && a.mode != IsolateMode::version && a.mode != IsolateMode::help)
        throw UsageError("Options related to control groups require --cg to be set.");
    if (a.mode == IsolateMode::init && !a.argv.empty())
        throw UsageError("--init mode takes no parameters");
    if (a.mode == IsolateMode::cleanup && !a.argv.empty())
        throw UsageError("--cleanup mode takes no parameters");
    if (a.mode == IsolateMode::run && a.argv.empty())
        throw UsageError("--run mode requires a command to run");
}

}  // namespace

std::vector<DirRule> isolate_default_dir_rules() {
    std::vector<DirRule> rules;
    for (const char* r : {"box=./box:rw", "bin", "dev:dev:norec", "dev/shm=tmpfs:fs:rw", "lib",
                          "lib64:maybe", "proc=proc:fs", "tmp:tmp", "usr"})
        add_isolate_dir_rule(rules, r, kDirDefault);
    return rules;
}

IsolateArgs parse_isolate_command_line(const std::vector<std::string>& args) {
    IsolateArgs a;
    a.dirs = isolate_default_dir_rules();
    std::size_t i = 0;
    while (i < args.size()) {
        const std::string& s = args[i];
        if (s == "--") {
            a.argv.insert(a.argv.end(), args.begin() + static_cast<std::ptrdiff_t>(i + 1),
                          args.end());
            break;
        }
        if (starts_with(s, "--")) i = parse_long(a, args, i);
        else if (s.size() > 1 && s[0] == '-') i = parse_short(a, args, i);
        else a.argv.push_back(s), ++i;  // GNU getopt permutes operands to the end
    }
    check_operands(a);
    return a;
}

namespace {

// rules.c: sanitize_dir_path(): no leading slashes, not empty, no ".." component.
std::optional<std::string> sanitize_dir_path(std::string path) {
    path.erase(0, path.find_first_not_of('/') == std::string::npos ? path.size()
                                                                   : path.find_first_not_of('/'));
    if (path.empty()) return std::nullopt;
    for (std::string_view c : split_at(path, '/'))
        if (c == "..") return std::nullopt;
    return path;
}

// rules.c: add_dir_rule(): a rule for the same inside path is replaced where it stands.
std::string put_rule(std::vector<DirRule>& rules, const std::string& in,
                     std::optional<std::string> out, unsigned flags) {
    const auto inside = sanitize_dir_path(in);
    if (!inside) return "Invalid path";
    const auto same = [&](const DirRule& r) { return r.inside == *inside; };
    if (auto r = std::find_if(rules.begin(), rules.end(), same); r != rules.end()) {
        r->outside = std::move(out);
        r->flags = flags;
    } else {
        rules.push_back({*inside, std::move(out), flags});
    }
    return "";
}

unsigned dir_option(const std::string& opt) {
    static const char* const names[] = {"rw", "noexec", "fs", "maybe", "dev", "tmp", "norec"};
    for (unsigned i = 0; i < 7; ++i)
        if (opt == names[i]) return 1U << i;
    return 0;
}

}  // namespace

std::string add_isolate_dir_rule(std::vector<DirRule>& rules, const std::string& arg,
                                 unsigned extra_flags) {
    std::string spec = arg.substr(0, arg.find(':'));
    unsigned flags = extra_flags;
    for (std::size_t c = arg.find(':'); c != std::string::npos;) {
        const std::size_t next = arg.find(':', c + 1);
        const std::string opt =
            arg.substr(c + 1, next == std::string::npos ? std::string::npos : next - c - 1);
        const unsigned f = dir_option(opt);
        if (!f) return cat("Unknown option '", opt, "'");
        flags |= f, c = next;
    }
    const auto eq = spec.find('=');
    const std::string in = spec.substr(0, eq);
    const std::optional<std::string> out =
        eq == std::string::npos ? std::nullopt : std::optional(spec.substr(eq + 1));
    if ((flags & kDirFs) && (flags & kDirTmp)) return "Flags 'fs' and 'tmp' are mutually exclusive";
    if (flags & kDirFs) {
        if (!out) return "Missing filesystem name";
        if (*out != "proc" && *out != "sysfs" && *out != "tmpfs" && *out != "devpts")
            return "This filesystem is not supported";
        return put_rule(rules, in, out, flags);
    }
    if (flags & kDirTmp) {
        if (out) return "Temporary directory mounts do not have a right-hand side";
        return put_rule(rules, in, "", flags | kDirRw);  // a fresh directory, made by the planner
    }
    if (out && out->empty()) return put_rule(rules, in, std::nullopt, flags);
    if (out && (*out)[0] != '/' && !starts_with(*out, "./"))
        return "Right-hand side must start with '/' or './'";
    return put_rule(rules, in, out ? *out : "/" + in, flags);
}

std::string isolate_usage_text(const std::string& root_note) {
    return "Usage: isolate [<options>] <command>\n"
           "(gpubox's isolate mode: isolate 2.x's command line, run unprivileged by gpubox)\n\n"
           "Options:\n"
           "    --as-uid=<uid>\tonly the caller's own uid (gpubox is not setuid)\n"
           "    --as-gid=<gid>\tonly the caller's own gid\n"
           "-b, --box-id=<id>\tWhen multiple sandboxes are used in parallel, each must get a "
           "unique ID\n"
           "    --cg\t\tEnable use of control groups (a delegated cgroup v2 if there is one, else "
           "sampling)\n"
           "    --cg-mem=<size>\tLimit memory usage of the control group to <size> KB\n"
           "-c, --chdir=<dir>\tChange directory to <dir> before executing the program\n"
           "    --core=<size>\tLimit core files to <size> KB (only 0, the default, is supported)\n"
           "-d, --dir=<dir>\t\tMake a directory <dir> visible inside the sandbox\n"
           "    --dir=<in>=<out>\tMake a directory <out> outside visible as <in> inside\n"
           "    --dir=<in>=\t\tDelete a previously defined directory rule (even a default one)\n"
           "    --dir=...:<opt>\tOptions: rw, maybe, tmp, fs (proc, sysfs, devpts at their places; "
           "tmpfs),\n"
           "\t\t\tnorec (accepted; binds are always recursive), dev and noexec (refused)\n"
           "-D, --no-default-dirs\tDo not add default directory rules\n"
           "-f, --fsize=<size>\tMax size (in KB) of files that can be created\n"
           "-E, --env=<var>\t\tInherit the environment variable <var> from the parent process\n"
           "-E, --env=<var>=<val>\tSet the environment variable <var> to <val>; unset it if <var> "
           "is empty\n"
           "-x, --extra-time=<time>\tSet extra timeout (seconds, fractions allowed)\n"
           "-e, --full-env\t\tInherit full environment of the parent process\n"
           "    --inherit-fds\t(refused: gpubox passes only fds 0-2)\n"
           "-m, --mem=<size>\tLimit address space to <size> KB\n"
           "-M, --meta=<file>\tOutput process information to <file> (name:value)\n"
           "-n, --open-files=<max>\tLimit number of open files to <max> (default: 1024, "
           "0=unlimited)\n"
           "-q, --quota=<blk>,<ino>\t(refused: disk quotas need root)\n"
           "    --share-net\t\tShare network namespace with the parent process\n"
           "-s, --silent\t\tDo not print status messages except for fatal errors\n"
           "-k, --stack=<size>\tLimit stack size to <size> KB (default: 0=unlimited)\n"
           "-r, --stderr=<file>\tRedirect stderr to <file>\n"
           "    --stderr-to-stdout\tRedirect stderr to stdout\n"
           "-i, --stdin=<file>\tRedirect stdin from <file>\n"
           "-o, --stdout=<file>\tRedirect stdout to <file>\n"
           "-p, --processes[=<max>]\tEnable multiple processes (at most <max> of them)\n"
           "-t, --time=<time>\tSet run time limit (seconds, fractions allowed)\n"
           "-v, --verbose\t\tBe verbose\n"
           "    --wait\t\tIf the sandbox is currently busy, wait instead of refusing to run\n"
           "-w, --wall-time=<time>\tSet wall clock time limit (seconds, fractions allowed)\n\n"
           "Commands:\n"
           "    --init\t\tInitialize sandbox (prints its directory; put files into its box/)\n"
           "    --run -- <cmd> ...\tRun given command within sandbox\n"
           "    --cleanup\t\tClean up sandbox\n"
           "    --version\t\tDisplay program version\n\n"
           "Boxes: " +
           root_note +
           "\n"
           "Exit status: 0 the program ran fine; 1 it failed or hit a limit; 2 internal error.\n";
}

std::string isolate_version_text() {
    return "The process isolator 2.6 (gpubox " GPUBOX_VERSION
           ", isolate mode: unprivileged, no setuid)\n"
           "isolate (c) 2012--2026 Martin Mares and Bernard Blackham; this is gpubox's "
           "reimplementation\n"
           "of its command line, not isolate itself\n";
}

}  // namespace gpubox::ioi
