#include <catch2/catch.hpp>

#include <seccomp.h>

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

TEST_CASE("the filter compiled at build time is exactly today's policy") {
    CHECK(default_filter().bytes == compile(default_seccomp_policy()).bytes);
}

TEST_CASE("policy text lists every rule with its reason") {
    std::string text = to_string(default_seccomp_policy());
    CHECK(text.find("ENOSYS clone3") != std::string::npos);
    CHECK(text.find("EPERM  ioctl arg1==0x5412") != std::string::npos);
}
