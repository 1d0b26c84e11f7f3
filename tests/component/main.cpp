// The component tier: the executor (and the rest of the sandbox's root assembly) run for real in
// a user and mount namespace, as an unprivileged user, against hostile image trees. Each case
// forks; only the child unshares, so this process never changes its own namespaces.
//
// Started as root (CTest in CI), it first becomes uid/gid 65534 for good, as the e2e scripts do,
// so that no case is helped by the host's root. Without unprivileged user namespaces it exits
// 77 (skipped), unless GPUBOX_TESTS_MUST_WORK=1 (CI) makes that a failure.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <grp.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

bool drop_root() {
    if (::geteuid() != 0) return true;
    // Dumpable again after the uid change, else /proc/self/uid_map stays root's to write.
    return ::setgroups(0, nullptr) == 0 && ::setresgid(65534, 65534, 65534) == 0 &&
           ::setresuid(65534, 65534, 65534) == 0 && ::prctl(PR_SET_DUMPABLE, 1) == 0;
}

bool userns_works() {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(::unshare(CLONE_NEWUSER | CLONE_NEWNS) == 0 ? 0 : 1);
    int status = 0;
    return pid > 0 && ::waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
           WEXITSTATUS(status) == 0;
}

}  // namespace

int main(int argc, char** argv) {
    const char* must = std::getenv("GPUBOX_TESTS_MUST_WORK");
    const bool must_work = must && std::string(must) == "1";
    if (!drop_root()) {
        std::fprintf(stderr, "component tests: cannot become uid 65534\n");
        return 1;
    }
    if (!userns_works()) {
        std::fprintf(stderr, "component tests: no unprivileged user namespaces here%s\n",
                     must_work ? " (GPUBOX_TESTS_MUST_WORK=1: a failure)" : ": skipped");
        return must_work ? 1 : 77;
    }
    return Catch::Session().run(argc, argv);
}
