#include <catch2/catch.hpp>

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <initializer_list>
#include <set>

#include <unistd.h>

#include "isolate/default_filter.hpp"
#include "isolate/seccomp.hpp"
#include "isolate/seccomp_policy.hpp"

using namespace gpubox::isolate;

TEST_CASE("default policy covers the sandbox checklist") {
    std::set<std::string> names;
    for (const SeccompRule& r : default_seccomp_policy().rules) names.insert(r.syscall);
    for (const char* s :
         {"unshare",        "clone",        "clone3",          "setns",       "mount",
          "umount2",        "pivot_root",   "fsopen",          "fsmount",     "open_tree",
          "open_tree_attr", "move_mount",   "mount_setattr",   "keyctl",      "add_key",
          "request_key",    "bpf",          "perf_event_open", "userfaultfd", "kexec_load",
          "init_module",    "finit_module", "ptrace",          "ioctl",       "io_uring_setup",
          "socket",         "personality",  "syslog"})
        CHECK(names.count(s) == 1);
    // CUDA and NUMA-aware code need these; flatpak's list denies them, ours must not.
    for (const char* s : {"mbind", "set_mempolicy", "get_mempolicy", "move_pages", "migrate_pages"})
        CHECK(names.count(s) == 0);
}

TEST_CASE("clone3 and the new mount API answer ENOSYS so libc falls back") {
    std::set<std::string> enosys;
    for (const SeccompRule& r : default_seccomp_policy().rules)
        if (r.action == SeccompRule::Action::enosys) enosys.insert(r.syscall);
    for (const char* s :
         {"clone3", "open_tree", "fsopen", "fsmount", "move_mount", "mount_setattr"})
        CHECK(enosys.count(s) == 1);  // a rule that is gone, or answers otherwise, fails
}

TEST_CASE("TIOCSTI is matched on the low 32 bits of the request") {
    bool found = false;
    for (const SeccompRule& r : default_seccomp_policy().rules)
        if (r.syscall == "ioctl" && r.args.size() == 1 && r.args[0].value == 0x5412) {
            found = true;
            CHECK(r.args[0].index == 1);
            CHECK(r.args[0].mask == 0xffffffffULL);
        }
    CHECK(found);
}

TEST_CASE("the compiled filter is real BPF and libseccomp's PFC shows the rules") {
    BpfProgram prog = compile(default_seccomp_policy());
    CHECK(prog.bytes.size() > 100 * 8);
    CHECK(prog.bytes.size() % 8 == 0);
    std::string pfc = export_pfc(default_seccomp_policy());
    // mount, by its number on this architecture (165 on x86-64, 40 on arm64)
    CHECK(pfc.find(std::string("if ($syscall == ") +
                   std::to_string(seccomp_syscall_resolve_name("mount")) + ")") !=
          std::string::npos);
    CHECK(pfc.find("action ERRNO(38)") != std::string::npos);     // ENOSYS
    CHECK(pfc.find("action KILL_PROCESS") != std::string::npos);  // bad arch
}

TEST_CASE("the filters compiled at build time are exactly today's policy") {
    CHECK(default_filter().bytes == compile(default_seccomp_policy()).bytes);
    for (const bool memory : {false, true})
        for (const bool setsid : {false, true})
            CHECK(default_filter(memory, setsid).bytes ==
                  compile(with_limit_refusals(default_seccomp_policy(), memory, setsid)).bytes);
}

namespace {

// The kernel's seccomp_is_const_allow(), counting its steps: attaching a filter, it runs the
// program so for every call number of each architecture, to cache which are always allowed.
// The steps to the verdict for `nr` on x86-64, or -1 where the verdict is not a constant allow.
int const_allow_steps(const BpfProgram& p, std::uint32_t nr) {
    const auto* insn = reinterpret_cast<const sock_filter*>(p.bytes.data());
    const std::size_t n = p.bytes.size() / sizeof(sock_filter);
    std::uint32_t a = 0;
    int steps = 0;
    for (std::size_t pc = 0; pc < n; ++pc, ++steps) {
        const sock_filter& f = insn[pc];
        switch (f.code) {
            case BPF_LD | BPF_W | BPF_ABS:
                if (f.k == offsetof(seccomp_data, nr)) a = nr;
                else if (f.k == offsetof(seccomp_data, arch)) a = AUDIT_ARCH_X86_64;
                else return -1;  // an argument: not constant
                break;
            case BPF_JMP | BPF_JA: pc += f.k; break;
            case BPF_JMP | BPF_JEQ | BPF_K: pc += a == f.k ? f.jt : f.jf; break;
            case BPF_JMP | BPF_JGE | BPF_K: pc += a >= f.k ? f.jt : f.jf; break;
            case BPF_JMP | BPF_JGT | BPF_K: pc += a > f.k ? f.jt : f.jf; break;
            case BPF_JMP | BPF_JSET | BPF_K: pc += (a & f.k) ? f.jt : f.jf; break;
            case BPF_ALU | BPF_AND | BPF_K: a &= f.k; break;
            case BPF_RET | BPF_K: return f.k == SECCOMP_RET_ALLOW ? steps + 1 : -1;
            default: return -1;
        }
    }
    return -1;
}

}  // namespace

#if defined(__x86_64__)
TEST_CASE("every call the filter allows outright is found in a few steps, not a walk of it all") {
    // A list of the rules made each of the ~460 runs the kernel makes attaching the filter walk
    // every rule (57 steps; ~50-70 us of every run's seccomp()); the tree takes 14 at most.
    const BpfProgram& prog = default_filter();
    int most = 0, allowed = 0;
    for (std::uint32_t nr = 0; nr < 512; ++nr) {
        const int steps = const_allow_steps(prog, nr);
        if (steps > 0) ++allowed, most = std::max(most, steps);
    }
    CHECK(allowed > 350);
    INFO("the longest walk to an outright allow: " << most << " steps");
    CHECK(most <= 24);
}

TEST_CASE("with the limits' refusals, the calls allowed outright are still a few steps away") {
    // Folded on (isolate::fold) they were a list behind every allow of the tree, walked for
    // each call number (28-30 steps at most, ~50 us more of seccomp()); compiled in, the tree's.
    for (const bool memory : {false, true})
        for (const bool setsid : {false, true}) {
            const BpfProgram prog = default_filter(memory, setsid);
            int most = 0, allowed = 0;
            for (std::uint32_t nr = 0; nr < 512; ++nr) {
                const int steps = const_allow_steps(prog, nr);
                if (steps > 0) ++allowed, most = std::max(most, steps);
            }
            INFO("memory " << memory << ", setsid " << setsid << ": " << allowed
                           << " allowed outright, at most " << most << " steps");
            CHECK(allowed > 350);
            CHECK(most <= 24);
            if (memory) CHECK(const_allow_steps(prog, SYS_memfd_create) < 0);
            if (setsid) CHECK(const_allow_steps(prog, SYS_setsid) < 0);
        }
}
#endif

TEST_CASE("policy text lists every rule with its reason") {
    std::string text = to_string(default_seccomp_policy());
    CHECK(text.find("ENOSYS clone3") != std::string::npos);
    CHECK(text.find("EPERM  ioctl arg1==0x5412") != std::string::npos);
}

namespace {

// In a child: no_new_privs, `progs` installed in turn, then syscall `nr`: its errno, 0 for success.
int errno_under(std::initializer_list<const BpfProgram*> progs, long nr, long a0, long a1 = 0) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) ::_exit(100);
        for (const BpfProgram* p : progs) {
            sock_fprog f{static_cast<unsigned short>(p->bytes.size() / sizeof(sock_filter)),
                         reinterpret_cast<sock_filter*>(const_cast<char*>(p->bytes.data()))};
            if (::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &f) != 0) ::_exit(101);
        }
        ::_exit(::syscall(nr, a0, a1) < 0 ? errno : 0);
    }
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

BpfProgram program(std::initializer_list<sock_filter> insns) {
    return BpfProgram{std::string(reinterpret_cast<const char*>(insns.begin()),
                                  insns.size() * sizeof(sock_filter))};
}

}  // namespace

TEST_CASE("the limits' refusals fold into the default filter: one program, the same answers") {
    const BpfProgram& main = default_filter();
    const BpfProgram& limits = limits_filter(true, true);
    const std::optional<BpfProgram> one = fold(main, limits);
    REQUIRE(one);
    // One copy of the refusals, behind main's one verdict they beat (allow).
    CHECK(one->bytes.size() == main.bytes.size() + limits.bytes.size());
    const char* name = "fold";
    CHECK(errno_under({&*one}, SYS_memfd_create, reinterpret_cast<long>(name)) == ENOSYS);
    CHECK(errno_under({&*one}, SYS_setsid, 0) == EPERM);               // the limits'
    CHECK(errno_under({&*one}, SYS_unshare, CLONE_NEWUSER) == EPERM);  // main's
    CHECK(errno_under({&*one}, SYS_unshare, CLONE_FILES) == EPERM);    // the limits', by its flags
    CHECK(errno_under({&*one}, SYS_getpid, 0) == 0);
    const auto arg = [&](long nr) {
        return nr == SYS_unshare        ? CLONE_NEWUSER
               : nr == SYS_memfd_create ? reinterpret_cast<long>(name)
                                        : 0;
    };
    for (long nr : {long{SYS_memfd_create}, long{SYS_unshare}, long{SYS_getpid}, long{SYS_setsid},
                    long{SYS_vmsplice}})
        CHECK(errno_under({&*one}, nr, arg(nr)) == errno_under({&limits, &main}, nr, arg(nr)));
}

TEST_CASE("the default filter with the limits' refusals answers as the two installed") {
    const char* name = "refusals";
    // Each call with an argument that the refusals look at; what the kernel then says where the
    // call is allowed differs from the refusal's errno (EINVAL: a thread needs CLONE_SIGHAND).
    // Not vmsplice: what it says when allowed depends on arguments errno_under leaves unset.
    struct Call {
        long nr, a0, a1;
    } const calls[] = {{SYS_memfd_create, reinterpret_cast<long>(name), 0},
                       {SYS_clone3, 0, 0},
                       {SYS_clone, CLONE_THREAD, 0},
                       {SYS_clone, CLONE_THREAD | CLONE_FILES, 0},
                       {SYS_unshare, CLONE_FILES, 0},
                       {SYS_unshare, CLONE_NEWUSER, 0},
                       {SYS_unshare, 0, 0},
                       {SYS_setsid, 0, 0},
                       {SYS_getpid, 0, 0}};
    const BpfProgram main = default_filter();
    for (const bool memory : {false, true})
        for (const bool setsid : {false, true}) {
            const BpfProgram one = default_filter(memory, setsid);
            const BpfProgram& limits = limits_filter(memory, setsid);
            for (const Call& c : calls) {
                INFO("memory " << memory << ", setsid " << setsid << ": call " << c.nr << " ("
                               << c.a0 << ")");
                const int two = limits.empty() ? errno_under({&main}, c.nr, c.a0, c.a1)
                                               : errno_under({&limits, &main}, c.nr, c.a0, c.a1);
                CHECK(errno_under({&one}, c.nr, c.a0, c.a1) == two);
            }
        }
    CHECK(errno_under({&limits_filter(true, false)}, SYS_unshare, CLONE_FILES) == EPERM);
    const BpfProgram memory = default_filter(true, false);
    CHECK(errno_under({&memory}, SYS_vmsplice, -1) == ENOSYS);
    CHECK(errno_under({&limits_filter(true, false)}, SYS_clone, CLONE_THREAD) == EPERM);
}

TEST_CASE("folded filters tie as the kernel ties two: the last installed's verdict") {
    const BpfProgram& memfd = limits_filter(true, false);
    const BpfProgram main = program({
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_memfd_create, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    });
    const std::optional<BpfProgram> one = fold(main, memfd);
    REQUIRE(one);
    const char* name = "tie";
    CHECK(errno_under({&memfd, &main}, SYS_memfd_create, reinterpret_cast<long>(name)) == EPERM);
    CHECK(errno_under({&*one}, SYS_memfd_create, reinterpret_cast<long>(name)) == EPERM);
    CHECK(errno_under({&*one}, SYS_getpid, 0) == 0);
}

TEST_CASE("a program that returns its accumulator is not folded") {
    const BpfProgram main = program({
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
        BPF_STMT(BPF_RET | BPF_A, 0),
    });
    CHECK_FALSE(fold(main, limits_filter(true, false)));
    CHECK_FALSE(fold(BpfProgram{}, limits_filter(true, false)));
}
