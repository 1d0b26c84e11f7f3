#include "isolate/seccomp.hpp"

#include <linux/audit.h>
#include <sched.h>
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
#include <iterator>
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
    // The rules' calls sorted into a binary tree, not a list: attaching the filter, the kernel
    // runs it once per call number to learn which are always allowed (its bitmap cache), and a
    // list made each of those ~460 runs walk every rule (57 steps, not 14; ~50-70 us a run).
    check(seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2),
          "seccomp_attr_set(SCMP_FLTATR_CTL_OPTIMIZE, 2)");
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

// One refused call: its number on the native ABI, on x86-64's x32 one (bit 30 set; the native
// number where there is none), and on the 32-bit compat ABI, and the errno it gets. With a `mask`,
// only where its first argument's low word, masked, is `value` (`equal`) or is not (!`equal`).
struct Refusal {
    const char* name;  // for libseccomp (with_limit_refusals)
    const char* why;   // its reason, as --print-plan shows it
    std::uint32_t native, x32, compat;
    int err;
    std::uint32_t mask = 0, value = 0;
    bool equal = true;
};

constexpr std::uint32_t kThreadFiles = CLONE_THREAD | CLONE_FILES;
constexpr const char* kHidden = "the memory limit: memory or fds no process shows";
constexpr const char* kAutogroup = "the CPU limit's SCHED_IDLE: a session is an autogroup";
#if defined(__x86_64__)
constexpr std::uint32_t kArch = AUDIT_ARCH_X86_64, kCompatArch = AUDIT_ARCH_I386, kX32 = 0x40000000;
// x32 has a vmsplice of its own (532); its others are the native ones.
constexpr Refusal kMemory[] = {
    {"memfd_create", kHidden, __NR_memfd_create, kX32 | __NR_memfd_create, 356, ENOSYS},
    {"vmsplice", kHidden, __NR_vmsplice, kX32 | 532, 316, ENOSYS},
    {"clone3", kHidden, __NR_clone3, kX32 | __NR_clone3, 435, ENOSYS},
    {"clone", kHidden, __NR_clone, kX32 | __NR_clone, 120, EPERM, kThreadFiles, CLONE_THREAD},
    {"unshare", kHidden, __NR_unshare, kX32 | __NR_unshare, 310, EPERM, CLONE_FILES, 0, false},
};
constexpr Refusal kSetsid{"setsid", kAutogroup, __NR_setsid, kX32 | __NR_setsid, 66, EPERM};
#elif defined(__aarch64__)
constexpr std::uint32_t kArch = AUDIT_ARCH_AARCH64, kCompatArch = AUDIT_ARCH_ARM;
constexpr Refusal kMemory[] = {
    {"memfd_create", kHidden, __NR_memfd_create, __NR_memfd_create, 385, ENOSYS},
    {"vmsplice", kHidden, __NR_vmsplice, __NR_vmsplice, 343, ENOSYS},
    {"clone3", kHidden, __NR_clone3, __NR_clone3, 435, ENOSYS},
    {"clone", kHidden, __NR_clone, __NR_clone, 120, EPERM, kThreadFiles, CLONE_THREAD},
    {"unshare", kHidden, __NR_unshare, __NR_unshare, 337, EPERM, CLONE_FILES, 0, false},
};
constexpr Refusal kSetsid{"setsid", kAutogroup, __NR_setsid, __NR_setsid, 66, EPERM};
#endif

// arch native: for each refusal, nr == its number -> its errno (or, with a mask, its errno or
// allow, by the argument); after the last, allow. arch compat: likewise. Other arches: allow (the
// other filters decide). A test that fails skips what the refusal would do; A keeps nr for the
// next test.
BpfProgram build_refusals(const std::vector<Refusal>& refused) {
    std::vector<sock_filter> p;
    const auto put = [&](sock_filter f) { p.push_back(f); };
    const auto ret = [&](std::uint32_t v) { put(BPF_STMT(BPF_RET | BPF_K, v)); };
    const auto test = [&](std::uint32_t nr, const Refusal& r) {
        const std::uint32_t err = SECCOMP_RET_ERRNO | static_cast<std::uint32_t>(r.err);
        if (!r.mask) {
            put(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 1));
            return ret(err);
        }
        put(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, nr, 0, 5));
        put(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, args[0])));  // low word
        put(BPF_STMT(BPF_ALU | BPF_AND | BPF_K, r.mask));
        const std::uint8_t to_ret = r.equal ? 0 : 1, to_allow = r.equal ? 1 : 0;
        put(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, r.value, to_ret, to_allow));
        ret(err);
        ret(SECCOMP_RET_ALLOW);
    };
    const auto block = [&](std::uint32_t arch, bool native) {
        const std::size_t at = p.size();
        put(BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arch, 0, 0));  // jf set below
        put(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)));
        for (const Refusal& r : refused) {
            test(native ? r.native : r.compat, r);
            if (native && r.x32 != r.native) test(r.x32, r);
        }
        ret(SECCOMP_RET_ALLOW);
        p[at].jf = static_cast<std::uint8_t>(p.size() - at - 1);
        // The arch is loaded again for the next block (the block above reloaded A).
        put(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
    };
    put(BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)));
    block(kArch, true);
    block(kCompatArch, false);
    ret(SECCOMP_RET_ALLOW);
    return BpfProgram{
        std::string(reinterpret_cast<const char*>(p.data()), p.size() * sizeof(sock_filter))};
}

std::vector<Refusal> refusals(bool memory, bool setsid) {
    std::vector<Refusal> r;
    if (memory) r.assign(std::begin(kMemory), std::end(kMemory));
    if (setsid) r.push_back(kSetsid);
    return r;
}

}  // namespace

SeccompPolicy with_limit_refusals(SeccompPolicy policy, bool refuse_memory, bool refuse_setsid) {
    for (const Refusal& r : refusals(refuse_memory, refuse_setsid)) {
        SeccompRule rule{r.name,
                         r.err == ENOSYS ? SeccompRule::Action::enosys : SeccompRule::Action::eperm,
                         {},
                         r.why};
        // libseccomp compares for equality only: "not 0" where the mask is one bit is "the bit".
        if (r.mask && !r.equal && (r.value != 0 || (r.mask & (r.mask - 1)) != 0))
            throw SetupError(cat("seccomp: the refusal of ", r.name, " has no libseccomp form"));
        if (r.mask) rule.args.push_back({0, r.mask, r.equal ? r.value : r.mask});
        const bool there =
            std::any_of(policy.rules.begin(), policy.rules.end(), [&](const auto& o) {
                return o.syscall == rule.syscall && o.action == rule.action && o.args.empty() &&
                       rule.args.empty();
            });
        if (!there) policy.rules.push_back(std::move(rule));  // clone3: the default's already
    }
    return policy;
}

const BpfProgram& limits_filter(bool refuse_memory, bool refuse_setsid) {
    static const BpfProgram none, memory = build_refusals(refusals(true, false)),
                                  setsid = build_refusals(refusals(false, true)),
                                  both = build_refusals(refusals(true, true));
    return refuse_memory ? (refuse_setsid ? both : memory) : (refuse_setsid ? setsid : none);
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
