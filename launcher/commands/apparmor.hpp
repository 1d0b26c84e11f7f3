#pragma once
// gpubox doctor's AppArmor report. Ubuntu >= 23.10 sets kernel.apparmor_restrict_unprivileged_userns
// to 1: then an unprivileged user namespace needs a profile with `userns,` attached to the binary
// (packaging/apparmor/gpubox.in, installed as /etc/apparmor.d/gpubox).
#include <string>
#include <vector>

namespace gpubox::launcher {

struct AppArmorState {
    std::string restrict_userns;  // the sysctl's value; "" where the kernel has none
    std::string label;  // this process's AppArmor label ("unconfined", "gpubox (unconfined)")
    std::string exe;    // this binary's path
};

struct DoctorFinding {
    bool problem = false;
    std::string what, fix;
};

// Pure: what doctor prints about AppArmor.
DoctorFinding judge_apparmor(const AppArmorState& s);

// Reads the sysctl and our own label under /proc.
AppArmorState discover_apparmor();

}  // namespace gpubox::launcher
