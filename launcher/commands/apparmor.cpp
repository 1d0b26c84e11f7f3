#include "launcher/commands/apparmor.hpp"

#include <fcntl.h>

#include "common/sys.hpp"
#include "common/text.hpp"

namespace gpubox::launcher {
namespace {

std::string read_trimmed(const char* path) {
    try {
        std::string v = sys::read_file(path, 4096);
        while (!v.empty() && (v.back() == '\n' || v.back() == ' ' || v.back() == '\0'))
            v.pop_back();
        return v;
    } catch (...) {
        return "";
    }
}

}  // namespace

DoctorFinding judge_apparmor(const AppArmorState& s) {
    if (s.restrict_userns.empty() || s.restrict_userns == "0")
        return {false,
                cat("AppArmor does not restrict unprivileged user namespaces "
                    "(kernel.apparmor_restrict_unprivileged_userns ",
                    s.restrict_userns.empty() ? "absent" : "= 0", ")"),
                ""};
    // A profile attached to this binary shows in our own label: "gpubox (unconfined)".
    if (starts_with(s.label, "gpubox ") || s.label == "gpubox")
        return {false,
                cat("AppArmor restricts unprivileged user namespaces; profile ", quote(s.label),
                    " allows them for ", quote(s.exe)),
                ""};
    return {
        true,
        cat("AppArmor restricts unprivileged user namespaces (Ubuntu >= 23.10) and no gpubox "
            "profile is attached to ",
            quote(s.exe), " (label ", quote(s.label.empty() ? "unknown" : s.label), ")"),
        cat("load a profile with 'userns,' for this path: install gpubox's /etc/apparmor.d/gpubox "
            "(the .deb and "
            "cmake --install do, for the installed path; for another path, copy it and change the "
            "path to ",
            s.exe,
            ") and run 'apparmor_parser -r /etc/apparmor.d/gpubox' as root; or, for every program, "
            "sysctl -w kernel.apparmor_restrict_unprivileged_userns=0")};
}

AppArmorState discover_apparmor() {
    AppArmorState s;
    s.restrict_userns = read_trimmed("/proc/sys/kernel/apparmor_restrict_unprivileged_userns");
    s.label = read_trimmed("/proc/self/attr/apparmor/current");
    if (s.label.empty()) s.label = read_trimmed("/proc/self/attr/current");
    try {
        s.exe = sys::read_link_at(AT_FDCWD, "/proc/self/exe");
    } catch (...) {
        s.exe = "gpubox";
    }
    return s;
}

}  // namespace gpubox::launcher
