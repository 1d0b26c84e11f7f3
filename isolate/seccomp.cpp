#include "isolate/seccomp.hpp"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <seccomp.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string_view>
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

const BpfProgram& refuse_memfd_filter() {
    // Hand-written, so that no run pays for libseccomp: memfd_create on the native ABI (and on
    // x86-64 its x32 and i386 ones too) returns ENOSYS; everything else is left to the other
    // filters.
#if defined(__x86_64__)
    constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64, kCompatArch = AUDIT_ARCH_I386,
                            kCompatNr = 356, kX32Nr = 0x40000000 | 319;
#elif defined(__aarch64__)
    constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64, kCompatArch = AUDIT_ARCH_ARM,
                            kCompatNr = 385, kX32Nr = __NR_memfd_create;
#endif
    static const sock_filter prog[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 3, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kCompatArch, 0, 6),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),  // compat
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kCompatNr, 3, 4),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),  // native
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_memfd_create, 1, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kX32Nr, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    static const BpfProgram bytes{std::string(reinterpret_cast<const char*>(prog), sizeof prog)};
    return bytes;
}

std::optional<BpfProgram> fold(const BpfProgram& main, const BpfProgram& extra) {
    const auto insns = [](const BpfProgram& p) {
        std::vector<sock_filter> v(p.bytes.size() / sizeof(sock_filter));
        if (!v.empty()) std::memcpy(v.data(), p.bytes.data(), v.size() * sizeof(sock_filter));
        return v;
    };
    const auto is_ret = [](const sock_filter& f) { return BPF_CLASS(f.code) == BPF_RET; };
    // The kernel's order: a lower action wins (SECCOMP_RET_KILL_PROCESS is the lowest).
    const auto action = [](std::uint32_t r) {
        return static_cast<std::int32_t>(r & SECCOMP_RET_ACTION_FULL);
    };
    const std::vector<sock_filter> m = insns(main), e = insns(extra);
    if (m.empty() || e.empty()) return std::nullopt;
    for (const std::vector<sock_filter>* p : {&m, &e})
        for (const sock_filter& f : *p)
            if (is_ret(f) && BPF_RVAL(f.code) != BPF_K) return std::nullopt;
    std::vector<sock_filter> out = m;
    // Main's verdict -> where its copy of extra starts.
    std::map<std::uint32_t, std::size_t> copy_of;
    for (std::size_t i = 0; i < m.size(); ++i) {
        if (!is_ret(m[i])) continue;
        const std::uint32_t v = m[i].k;
        if (std::none_of(e.begin(), e.end(), [&](const sock_filter& f) {
                return is_ret(f) && action(f.k) < action(v);
            }))
            continue;  // extra never beats it
        const auto [at, made] = copy_of.try_emplace(v, out.size());
        if (made)
            for (sock_filter f : e) {
                if (is_ret(f) && !(action(f.k) < action(v))) f.k = v;
                out.push_back(f);
            }
        out[i] = sock_filter{static_cast<__u16>(BPF_JMP | BPF_JA), 0, 0,
                             static_cast<__u32>(at->second - i - 1)};
    }
    if (out.size() > BPF_MAXINSNS) return std::nullopt;
    return BpfProgram{
        std::string(reinterpret_cast<const char*>(out.data()), out.size() * sizeof(sock_filter))};
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
