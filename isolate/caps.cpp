#include "isolate/caps.hpp"

#include <cap-ng.h>
#include <sys/prctl.h>

#include <cerrno>

#include "common/sys.hpp"

namespace gpubox::isolate {

void drop_all_privileges() {
    capng_clear(CAPNG_SELECT_ALL);
    if (capng_apply(CAPNG_SELECT_ALL) != 0)
        sys::fail(Syscall::capng_apply, EPERM, "capng_apply(CAPNG_SELECT_ALL)");
    sys::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, "PR_CAP_AMBIENT_CLEAR_ALL");
    sys::prctl(PR_SET_NO_NEW_PRIVS, 1, "PR_SET_NO_NEW_PRIVS");
}

}  // namespace gpubox::isolate
