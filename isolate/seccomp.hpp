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

// The limits' own refusals, everything else allowed (isolate::LimitPlan says when each applies):
//  - memfd_create() with ENOSYS: under a memory limit without a cgroup, a memfd could hold
//    memory no process shows;
//  - setsid() with EPERM: under SCHED_IDLE in the root cpu cgroup, a new session would be an
//    autogroup of its own, weighing as much as the monitor.
// Hand-written (no run pays for libseccomp), each combination built once. Empty if neither.
const BpfProgram& limits_filter(bool refuse_memfd, bool refuse_setsid);

// Child side: seccomp(SECCOMP_SET_MODE_FILTER). no_new_privs must be set first.
void install(const BpfProgram& prog);

}  // namespace gpubox::isolate
