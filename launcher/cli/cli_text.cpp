// --help, `gpubox CMD --help` and gpubox(1), all rendered from the parser's own tables
// (command_docs()), so that no option can be documented in one and missing from another.
#include <sstream>

#include "common/error.hpp"
#include "common/text.hpp"
#include "launcher/cli/cli.hpp"

namespace gpubox::launcher {
namespace {

// roff: a backslash and every '-' escaped (so options copy and paste as ASCII), and a line that
// would start with a control character guarded.
std::string roff(const std::string& text) {
    std::string out;
    for (char c : text) {
        if (c == '\\') out += "\\e";
        else if (c == '-') out += "\\-";
        else out += c;
    }
    if (!out.empty() && (out[0] == '.' || out[0] == '\'')) out.insert(0, "\\&");
    return out;
}

constexpr const char* kExitStatus[][2] = {
    {"CMD's own status", "when it exits by itself"},
    {"128+N",
     "when CMD died of signal N, or gpubox killed the sandbox for a limit (137, and a line on "
     "stderr "
     "names the limit; --meta says which too)"},
    {"125",
     "gpubox itself failed: a usage error, a host that cannot run sandboxes, a setup step the "
     "kernel "
     "refused (one line names the step, the syscall, the path and the reason, and a hint line may "
     "follow)"},
    {"126", "CMD was found but cannot be executed"},
    {"127", "CMD was not found in the sandbox's PATH"},
    {"1", "(doctor) a problem was found"},
};

constexpr const char* kEnvironment[][2] = {
    {"TERM",
     "passed into the sandbox, whose environment is otherwise clean: PATH, HOME, LANG and TERM, "
     "plus "
     "--env and --env-file"},
    {"NVIDIA_VISIBLE_DEVICES", "not read: GPUs are given only by --gpu"},
    {"GPUBOX_STEP_DIR",
     "where a job step's tasks meet to share one sandbox (step mode; default "
     "/tmp/gpubox-steps-UID, the caller's own)"},
};

constexpr const char* kFiles[][2] = {
    {"/proc/sys/user/max_user_namespaces", "must be > 0 (gpubox doctor checks it)"},
    {"/proc/sys/kernel/apparmor_restrict_unprivileged_userns",
     "1 on Ubuntu >= 23.10: gpubox then needs its AppArmor profile, or the sysctl set to 0"},
    {"/etc/apparmor.d/gpubox", "the AppArmor profile that allows gpubox user namespaces (userns,)"},
    {"/proc/driver/nvidia/", "the NVIDIA driver's GPU listing, read below --driver-root"},
    {"/etc/ld.so.cache", "the host's library cache, where the driver's libraries are found"},
    {"/sys/fs/cgroup/", "a delegated cgroup v2, used for limits when there is one (--cgroup)"},
};

constexpr const char* kExamples[][2] = {
    {"gpubox rootfs create ./rootfs", "a minimal root (busybox and the host's glibc), offline"},
    {"gpubox run ./rootfs sh -c 'id; hostname; ls /dev'",
     "the caller's uid inside, hostname gpubox"},
    {"gpubox run ./rootfs sh",
     "an interactive shell: with a terminal, a pty of its own and job control"},
    {"gpubox run --gpu 0 ./rootfs nvidia-smi -L", "exactly host GPU 0"},
    {"gpubox run --gpu 0 --gpu 1 / python3 train.py",
     "GPUs 0 and 1, the host's own stack read-only"},
    {"gpubox run --wall-time-limit 5 --time-limit 2 --memory-limit 256M --pids-limit 64 --meta "
     "result.json "
     "./rootfs ./a.out < in.txt",
     "an autograder's run: limits and a JSON verdict"},
    {"gpubox run --ro-bind /data:/data --bind $PWD/out:/out ./rootfs ./job",
     "host directories inside"},
    {"gpubox list --json", "the host's GPUs, for scripts"},
};

// "  --memory-limit SIZE   help": the help in one column, or on the next line after a long name.
void options_block(std::ostringstream& out, const std::vector<FlagDoc>& flags) {
    auto row = [&](const std::string& left, const std::string& help) {
        out << "  " << left
            << (left.size() < 21 ? std::string(22 - left.size(), ' ') : "\n" + std::string(24, ' '))
            << help << "\n";
    };
    for (const FlagDoc& f : flags) row(f.arg.empty() ? f.name : f.name + " " + f.arg, f.help);
}

template <std::size_t N>
void tagged(std::ostringstream& out, const char* const (&rows)[N][2], bool bold) {
    for (const auto& row : rows)
        out << ".TP\n"
            << (bold ? "\\fB" : "") << roff(row[0]) << (bold ? "\\fR" : "") << "\n"
            << roff(row[1]) << "\n";
}

}  // namespace

std::string usage_text() {
    std::ostringstream out;
    out << "gpubox: unprivileged container sandbox with per-GPU isolation\n\nusage:\n";
    const std::vector<CommandDoc> docs = command_docs();  // named: the loops below refer into it
    for (const CommandDoc& c : docs) out << "  gpubox " << c.name << " " << c.synopsis << "\n";
    out << "  gpubox help COMMAND | COMMAND --help\n  gpubox --help | --version\n\nrun options:\n";
    options_block(out, docs.front().flags);
    out << "\nexit status: the command's own; 128+N if it died of signal N (137: a limit); 125 "
           "gpubox failed;\n"
           "126 CMD cannot be executed; 127 CMD not found. See gpubox(1).\n";
    return out.str();
}

std::string command_help(const std::string& name) {
    for (const CommandDoc& c : command_docs()) {
        if (c.name != name) continue;
        std::ostringstream out;
        out << "usage: gpubox " << c.name << " " << c.synopsis << "\n\n"
            << c.summary << "\n\noptions:\n";
        options_block(out, c.flags);
        options_block(out, {{"-h, --help", "", "this help"}});
        return out.str();
    }
    throw UsageError(cat("help: unknown command ", quote(name), " (try gpubox --help)"));
}

std::string man_page() {
    std::ostringstream out;
    out << ".TH GPUBOX 1 \"\" \"gpubox " GPUBOX_VERSION "\" \"User Commands\"\n"
        << ".SH NAME\ngpubox \\- unprivileged container sandbox launcher with per\\-GPU isolation\n"
        << ".SH SYNOPSIS\n";
    for (const CommandDoc& c : command_docs())
        out << ".B gpubox " << roff(c.name) << "\n" << roff(c.synopsis) << "\n.br\n";
    out << ".B gpubox help\n[COMMAND]\n.br\n.B gpubox\n\\-\\-help | \\-\\-version\n"
        << ".SH DESCRIPTION\n"
        << roff(
               "gpubox runs a command in new user, mount, pid, ipc, uts, cgroup and network "
               "namespaces, "
               "without root, a setuid helper or a daemon. It builds a sealed view of ROOTFS "
               "(never written "
               "on disk) with a fresh /proc and /sys, tmpfs /tmp and /run and a minimal /dev, "
               "gives the sandbox "
               "exactly the GPUs asked for with the host driver's libraries and tools at the "
               "driver's exact "
               "version, drops every privilege, installs a seccomp filter and runs the workload. "
               "For "
               "autograders it adds hard wall, CPU, memory, process and output limits and a "
               "verdict.")
        << "\n.PP\n"
        << roff(
               "When stdin is a terminal, the workload gets a pseudo-terminal of its own, which "
               "gpubox relays "
               "to the caller's: an interactive shell has job control and a real tty, and the "
               "caller's "
               "terminal is never handed in (so nothing inside can push input into it or chmod "
               "it).")
        << "\n.SH COMMANDS\n";
    for (const CommandDoc& c : command_docs()) {
        out << ".SS \"gpubox " << roff(c.name) << " " << roff(c.synopsis) << "\"\n"
            << roff(c.summary) << "\n";
        for (const FlagDoc& f : c.flags)
            out << ".TP\n\\fB" << roff(f.name) << "\\fR"
                << (f.arg.empty() ? "" : " \\fI" + roff(f.arg) + "\\fR") << "\n"
                << roff(f.help) << "\n";
        out << ".TP\n\\fB\\-h\\fR, \\fB\\-\\-help\\fR\nthis command's options\n";
    }
    out << ".SH \"EXIT STATUS\"\n";
    tagged(out, kExitStatus, true);
    out << ".SH ENVIRONMENT\n";
    tagged(out, kEnvironment, true);
    out << ".SH FILES\n";
    tagged(out, kFiles, false);
    out << ".SH EXAMPLES\n";
    for (const auto& row : kExamples)
        out << ".PP\n" << roff(row[1]) << ":\n.IP\n.B " << roff(row[0]) << "\n";
    out << ".SH \"SEE ALSO\"\n.BR bwrap (1),\n.BR unshare (1),\n.BR user_namespaces (7),\n.BR "
           "nvidia\\-smi (1)\n";
    return out.str();
}

}  // namespace gpubox::launcher
