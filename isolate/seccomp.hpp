#pragma once
#include <string>

#include "isolate/seccomp_policy.hpp"

namespace gpubox::isolate {

// Raw classic-BPF bytes, as the kernel takes them (8 bytes an instruction).
struct BpfProgram {
    std::string bytes;
    bool empty() const { return bytes.empty(); }
};

// Parent side: compile with libseccomp once per run, so the child only loads bytes.
BpfProgram compile(const SeccompPolicy& policy);
// libseccomp's own PFC rendering of the compiled filter (tests, --print-plan -vv).
std::string export_pfc(const SeccompPolicy& policy);
// A user-supplied profile: a file of raw BPF (bwrap --seccomp format).
BpfProgram load_bpf_file(const std::string& path);

// memfd_create(), vmsplice() and clone3() refused with ENOSYS, a thread with an fd table of its
// own with EPERM, everything else allowed: under a memory limit without a cgroup, a memfd or a
// vmspliced huge page could hold memory no process shows, and such a thread's fds would escape
// the fd charge (isolate/limits.hpp, isolate/usage.hpp). Compiled once.
const BpfProgram& refuse_memfd_filter();

// Child side: seccomp(SECCOMP_SET_MODE_FILTER). no_new_privs must be set first.
void install(const BpfProgram& prog);

}  // namespace gpubox::isolate
