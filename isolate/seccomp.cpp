#include "isolate/seccomp.hpp"

#include <linux/audit.h>
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
#include <vector>

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

namespace {

// One refused call: its number on the native ABI, on x86-64's x32 one (the native number where
// there is none), and on the 32-bit compat ABI, and the errno it gets.
struct Refusal {
    std::uint32_t native, x32, compat;
    int err;
};

#if defined(__x86_64__)
constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64, kCompatArch = AUDIT_ARCH_I386;
constexpr Refusal kMemfd{__NR_memfd_create, 0x40000000 | __NR_memfd_create, 356, ENOSYS};
constexpr Refusal kSetsid{__NR_setsid, 0x40000000 | __NR_setsid, 66, EPERM};
#elif defined(__aarch64__)
constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64, kCompatArch = AUDIT_ARCH_ARM;
constexpr Refusal kMemfd{__NR_memfd_create, __NR_memfd_create, 385, ENOSYS};
constexpr Refusal kSetsid{__NR_setsid, __NR_setsid, 66, EPERM};
#endif

// arch native: nr == each refused -> its errno; else allow. arch compat: likewise. Other
// arches: allow (the other filters decide). Each test is a JEQ that skips its RET when false.
BpfProgram build_refusals(const std::vector<Refusal>& refused) {
    std::vector<sock_filter> p;
    auto ret = [](std::uint32_t v) { return sock_filter BPF_STMT(BPF_RET | BPF_K, v); };
    auto test = [&](std::uint32_t nr, int err) {
        p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1));
        p.push_back(ret(SECCOMP_RET_ERRNO | static_cast<std::uint32_t>(err)));
    };
    const auto block = [&](std::uint32_t arch, bool native) {
        const std::size_t at = p.size();
        p.push_back(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 0, 0));  // jf set below
        p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
        for (const Refusal& r : refused) {
            test(native ? r.native : r.compat, r.err);
            if (native && r.x32 != r.native) test(r.x32, r.err);
        }
        p.push_back(ret(SECCOMP_RET_ALLOW));
        p[at].jf = static_cast<std::uint8_t>(p.size() - at - 1);
        // The arch is loaded again for the next block (the block above reloaded A).
        p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
    };
    p.push_back(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
    block(kArch, true);
    block(kCompatArch, false);
    p.push_back(ret(SECCOMP_RET_ALLOW));
    return BpfProgram{
        std::string(reinterpret_cast<const char*>(p.data()), p.size() * sizeof(sock_filter))};
}

}  // namespace

const BpfProgram& limits_filter(bool refuse_memfd, bool refuse_setsid) {
    static const BpfProgram none, memfd = build_refusals({kMemfd}),
                                  setsid = build_refusals({kSetsid}),
                                  both = build_refusals({kMemfd, kSetsid});
    return refuse_memfd ? (refuse_setsid ? both : memfd) : (refuse_setsid ? setsid : none);
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
