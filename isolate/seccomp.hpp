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

// The limits' own refusals, everything else allowed (isolate::LimitPlan says when each applies):
//  - `refuse_memory`, under a memory limit without a cgroup: memfd_create(), vmsplice() and
//    clone3() with ENOSYS (libc falls back to clone, whose flags seccomp can read), and a thread
//    with an fd table of its own with EPERM (clone with CLONE_THREAD and not CLONE_FILES,
//    unshare with CLONE_FILES). A memfd, or a huge page a vmspliced slot pins (2 MiB; 20 pipes
//    held 642 MiB once the memory was unmapped), would hold memory no process shows, and such a
//    thread's fds, which /proc/PID/fd does not list, would escape the fd charge
//    (isolate/usage.hpp);
//  - `refuse_setsid`, under SCHED_IDLE in the root cpu cgroup: setsid() with EPERM, as a new
//    session would be an autogroup of its own, weighing as much as the monitor.
// Hand-written (no run pays for libseccomp), each combination built once. Empty if neither.
const BpfProgram& limits_filter(bool refuse_memory, bool refuse_setsid);

// `policy` with the limits' refusals as rules of its own (the same calls, arguments and errnos
// as limits_filter's on the native architecture; others are the policy's to kill): for
// libseccomp, which sorts them into its tree of calls (isolate::default_filter's variants).
SeccompPolicy with_limit_refusals(SeccompPolicy policy, bool refuse_memory, bool refuse_setsid);

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
