#include "isolate/seccomp.hpp"

#include <linux/audit.h>
#include <sched.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <memory>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/text.hpp"

namespace gpubox::isolate {
namespace {

using Ctx = std::unique_ptr<void, decltype(&seccomp_release)>;

// Calls newer than the libseccomp a build may use (Debian 12 ships 2.5.4, which resolves them to
// nothing): numbers from the kernel's common syscall table, the same on every architecture.
int resolve(const std::string& name) {
    const int nr = seccomp_syscall_resolve_name(name.c_str());
    if (nr != __NR_SCMP_ERROR) return nr;
    if (name == "open_tree_attr") return 467;  // Linux 6.15
    return nr;
}

void check(int rc, const std::string& op) {
    if (rc < 0) sys::fail(op, -rc);
}

Ctx build(const SeccompPolicy& policy) {
    Ctx ctx(seccomp_init(SCMP_ACT_ALLOW), &seccomp_release);
    if (!ctx) throw SetupError("seccomp_init failed");
    check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS),
          "seccomp_attr_set(SCMP_FLTATR_ACT_BADARCH)");
    for (const SeccompRule& r : policy.rules) {
        int nr = resolve(r.syscall);
        if (nr == __NR_SCMP_ERROR) continue;  // not on this architecture
        std::vector<scmp_arg_cmp> cmps;
        for (const ArgMatch& a : r.args) {
            scmp_arg_cmp c{};
            c.arg = a.index;
            c.op = SCMP_CMP_MASKED_EQ;
            c.datum_a = a.mask;
            c.datum_b = a.value;
            cmps.push_back(c);
        }
        const uint32_t action =
            SCMP_ACT_ERRNO(r.action == SeccompRule::Action::enosys ? ENOSYS : EPERM);
        check(seccomp_rule_add_array(ctx.get(), action, nr, static_cast<unsigned>(cmps.size()),
                                     cmps.data()),
              cat("seccomp_rule_add(", r.syscall, ")"));
    }
    return ctx;
}

// libseccomp's export, written to a memfd: read back from the start.
std::string read_back(int fd, const std::string& what) {
    ::lseek(fd, 0, SEEK_SET);
    return sys::read_all(fd, what);
}

}  // namespace

BpfProgram compile(const SeccompPolicy& policy) {
    Ctx ctx = build(policy);
    UniqueFd mem = sys::memfd("gpubox-seccomp");
    check(seccomp_export_bpf(ctx.get(), mem.get()), "seccomp_export_bpf");
    return BpfProgram{read_back(mem.get(), "seccomp_export_bpf memfd")};
}

std::string export_pfc(const SeccompPolicy& policy) {
    Ctx ctx = build(policy);
    UniqueFd mem = sys::memfd("gpubox-seccomp-pfc");
    check(seccomp_export_pfc(ctx.get(), mem.get()), "seccomp_export_pfc");
    return read_back(mem.get(), "seccomp_export_pfc memfd");
}

const BpfProgram& refuse_memfd_filter() {
    // Hand-written, so that no run pays for libseccomp: on the native ABI (and on x86-64 its x32
    // and i386 ones too) memfd_create, vmsplice and clone3 return ENOSYS (libc falls back to
    // clone, whose flags seccomp can read), and a thread with an fd table of its own is refused
    // (EPERM): clone with CLONE_THREAD and not CLONE_FILES, unshare with CLONE_FILES. Everything
    // else is left to the other filters.
    //  - vmsplice: a pipe's slot holds a page of the caller's memory by reference, and a page of
    //    a huge page pins all of it (2 MiB, measured: 20 pipes held 642 MiB once the memory was
    //    unmapped), in nobody's resident set;
    //  - a thread's own fd table is one /proc/PID/fd does not show: its open fds would escape
    //    the fd charge (isolate/usage.hpp).
    // x32's numbers are the native ones with bit 30 set (masked off here), but for its own
    // vmsplice (532).
#if defined(__x86_64__)
    constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64, kCompatArch = AUDIT_ARCH_I386,
                            kCompat[] = {356, 316, 435, 120, 310}, kX32Splice = 532;
#elif defined(__aarch64__)
    constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64, kCompatArch = AUDIT_ARCH_ARM,
                            kCompat[] = {385, 343, 435, 120, 337}, kX32Splice = __NR_vmsplice;
#endif
    // kCompat: memfd_create, vmsplice, clone3, clone, unshare. Jumps count the instructions
    // skipped; the three returns close the program (ENOSYS 25, EPERM 26, ALLOW 27).
    constexpr std::uint32_t kThread = CLONE_THREAD, kFiles = CLONE_FILES;
    static const sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 0, 9),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),  // 2: native
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, ~0x40000000U),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_memfd_create, 20, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_vmsplice, 19, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kX32Splice, 18, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone3, 17, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_clone, 10, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_unshare, 12, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kCompatArch, 0, 15),         // 11
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),  // 12: compat
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kCompat[0], 11, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kCompat[1], 10, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kCompat[2], 9, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kCompat[3], 2, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kCompat[4], 4, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),  // 19: clone
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, kThread | kFiles),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kThread, 4, 5),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])),  // 22: unshare
        BPF_STMT(BPF_ALU | BPF_AND | BPF_K, kFiles),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0, 2, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),  // 25
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),   // 26
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),           // 27
    };
    static_assert(sizeof prog / sizeof prog[0] == 28);
    static const BpfProgram bytes{std::string(reinterpret_cast<const char*>(prog), sizeof prog)};
    return bytes;
}

BpfProgram load_bpf_file(const std::string& path) {
    BpfProgram p{sys::read_file(path, 1 << 20)};
    if (p.bytes.empty() || p.bytes.size() % 8 != 0 || p.bytes.size() / 8 > 4096)
        throw UsageError(cat("--seccomp-bpf ", quote(path),
                             ": not a raw BPF program (size must be a non-zero multiple of 8, "
                             "at most 4096 instructions)"));
    return p;
}

void install(const BpfProgram& prog) {
    if (prog.empty()) return;
    sys::install_seccomp_filter(prog.bytes.data(), prog.bytes.size());
}

}  // namespace gpubox::isolate
