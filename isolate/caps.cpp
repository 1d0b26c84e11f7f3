#include "isolate/caps.hpp"

#include <linux/capability.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <cerrno>

#include "common/sys.hpp"

namespace gpubox::isolate {

// Raw calls (libcap-ng read /proc/self/status 3 times): every bounding cap, then every set.
void drop_all_privileges() {
    for (unsigned long cap = 0; ::prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) == 0;) ++cap;
    if (errno != EINVAL) sys::fail(Syscall::prctl, errno, "prctl(PR_CAPBSET_DROP)");
    __user_cap_header_struct head{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[_LINUX_CAPABILITY_U32S_3] = {};
    if (::syscall(SYS_capset, &head, none) != 0) sys::fail(Syscall::capset, errno, "capset(none)");
    sys::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, "PR_CAP_AMBIENT_CLEAR_ALL");
    sys::prctl(PR_SET_NO_NEW_PRIVS, 1, "PR_SET_NO_NEW_PRIVS");
}

}  // namespace gpubox::isolate
