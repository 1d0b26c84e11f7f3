#pragma once
#include <optional>
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

// memfd_create() refused with ENOSYS, everything else allowed: under a memory limit without a
// cgroup, a memfd could hold memory no process shows (isolate/limits.hpp). Compiled once.
const BpfProgram& refuse_memfd_filter();

// `extra` folded into `main`: one program to compile and attach instead of two, answering every
// call as the kernel answers the two installed (extra first, main last): the more restrictive
// verdict, main's where they tie. Each of main's verdicts that some verdict of extra's beats
// becomes a jump into a copy of extra whose verdicts are so combined with it. Nullopt where it
// cannot be done: a verdict from the accumulator (BPF_RET|BPF_A), past the kernel's 4096
// instructions. `extra` must load before it reads (it starts with main's registers).
std::optional<BpfProgram> fold(const BpfProgram& main, const BpfProgram& extra);

// Child side: seccomp(SECCOMP_SET_MODE_FILTER). no_new_privs must be set first.
void install(const BpfProgram& prog);

}  // namespace gpubox::isolate
