#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace gpubox::isolate {

struct ArgMatch {  // (arg[index] & mask) == value; mask ~0 means plain equality
    unsigned index;
    std::uint64_t mask;
    std::uint64_t value;
};

struct SeccompRule {
    std::string syscall;
    enum class Action { eperm, enosys } action = Action::eperm;
    std::vector<ArgMatch> args;  // all must match; empty: every call
    std::string why;
};

// A deny list over a default-allow filter. Non-native architectures (i386, x32 system call
// numbers on x86-64) kill the process.
struct SeccompPolicy {
    std::vector<SeccompRule> rules;
};

// Pure: the default policy (the checklist in shared/reference/sandbox.md, flatpak's and
// isolate's lists, minus the NUMA calls CUDA needs).
SeccompPolicy default_seccomp_policy();

// One line per rule, for --print-plan.
std::string to_string(const SeccompPolicy& policy);

}  // namespace gpubox::isolate
