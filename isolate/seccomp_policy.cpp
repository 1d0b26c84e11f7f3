#include "isolate/seccomp_policy.hpp"

#include <sched.h>
#include <sys/ioctl.h>

#include <iomanip>
#include <sstream>

#include "common/text.hpp"

namespace gpubox::isolate {
namespace {

using A = SeccompRule::Action;

constexpr std::uint64_t k32 = 0xffffffffULL;  // ioctl request numbers: compare the low 32 bits
constexpr int kAfVsock = 40;
// personality(2) flags that weaken the address space; bit 31 excludes the 0xffffffff query.
constexpr std::uint64_t kQueryBit = 0x80000000ULL;

void deny(SeccompPolicy& p, std::initializer_list<const char*> names, A action, const char* why) {
    for (const char* n : names) p.rules.push_back({n, action, {}, why});
}

}  // namespace

SeccompPolicy default_seccomp_policy() {
    SeccompPolicy p;
    // Namespaces: a sandbox must not make new ones (a nested user namespace gives a fresh set of
    // capabilities and reaches kernel code unprivileged users otherwise cannot).
    const int ns_flags[] = {CLONE_NEWUSER, CLONE_NEWNS,  CLONE_NEWPID,    CLONE_NEWNET,
                            CLONE_NEWUTS,  CLONE_NEWIPC, CLONE_NEWCGROUP, 0x00000080 /*NEWTIME*/};
    for (int f : ns_flags) {
        auto v = static_cast<std::uint64_t>(f);
        p.rules.push_back({"unshare", A::eperm, {{0, v, v}}, "no new namespaces"});
        p.rules.push_back({"clone", A::eperm, {{0, v, v}}, "no new namespaces"});
    }
    deny(p, {"clone3"}, A::enosys,
         "flags sit behind a pointer seccomp cannot read; libc falls back to clone");
    deny(p, {"setns"}, A::eperm, "no joining other namespaces");
    deny(p, {"mount", "umount2", "pivot_root", "chroot"}, A::eperm, "the mount tree is fixed");
    deny(p,
         {"fsopen", "fsconfig", "fsmount", "fspick", "open_tree", "open_tree_attr", "move_mount",
          "mount_setattr"},
         A::enosys, "new mount API (CVE-2021-41133)");
    deny(p, {"add_key", "keyctl", "request_key"}, A::eperm, "keyrings are not namespaced");
    deny(p,
         {"bpf", "perf_event_open", "userfaultfd", "io_uring_setup", "io_uring_enter",
          "io_uring_register"},
         A::eperm, "large kernel attack surface");
    deny(p,
         {"kexec_load",    "kexec_file_load", "init_module",       "finit_module", "delete_module",
          "reboot",        "swapon",          "swapoff",           "acct",         "quotactl",
          "syslog",        "uselib",          "lookup_dcookie",    "vhangup",      "iopl",
          "ioperm",        "modify_ldt",      "open_by_handle_at", "settimeofday", "clock_settime",
          "clock_adjtime", "adjtimex"},
         A::eperm, "host administration");
    // process_vm_readv/writev stay allowed: MPI's and UCX's cross-memory attach between the
    // ranks of a step. The kernel's ptrace-mode check (same uid, same user namespace, no more
    // capabilities than the caller) confines them to the sandbox's own processes.
    deny(p, {"ptrace", "kcmp"}, A::eperm, "no tracing or comparing other processes");
    p.rules.push_back({"ioctl",
                       A::eperm,
                       {{1, k32, TIOCSTI}},
                       "TIOCSTI pushes input into a terminal (CVE-2017-5226)"});
    p.rules.push_back({"ioctl", A::eperm, {{1, k32, TIOCLINUX}}, "TIOCLINUX (CVE-2023-28100)"});
    p.rules.push_back(
        {"socket", A::eperm, {{0, k32, kAfVsock}}, "AF_VSOCK reaches the hypervisor"});
    for (std::uint64_t bit :
         {0x0040000ULL /*ADDR_NO_RANDOMIZE*/, 0x0100000ULL /*MMAP_PAGE_ZERO*/,
          0x0200000ULL /*ADDR_COMPAT_LAYOUT*/, 0x0400000ULL /*READ_IMPLIES_EXEC*/})
        p.rules.push_back(
            {"personality", A::eperm, {{0, bit | kQueryBit, bit}}, "weakens ASLR or W^X"});
    return p;
}

std::string to_string(const SeccompPolicy& policy) {
    std::ostringstream out;
    out << "default allow; non-native architectures: kill\n";
    for (const SeccompRule& r : policy.rules) {
        out << (r.action == A::enosys ? "ENOSYS " : "EPERM  ") << r.syscall;
        for (const ArgMatch& a : r.args) {
            out << " arg" << a.index << std::hex;
            if (a.mask == k32 || a.mask == ~0ULL) out << "==0x" << a.value;
            else out << "&0x" << a.mask << "==0x" << a.value;
            out << std::dec;
        }
        out << "  # " << r.why << "\n";
    }
    return out.str();
}

}  // namespace gpubox::isolate
