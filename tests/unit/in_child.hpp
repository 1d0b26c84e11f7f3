#pragma once
// A test's body run in a forked child (a namespace of its own, a process to throw away): its exit
// status, the value it returns or passes to _exit. The test fails where the child did not exit.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

namespace gpubox::test {

template <class Body>
int exit_status_in_child(Body body) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) ::_exit(body());
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(WIFEXITED(status));
    return WEXITSTATUS(status);
}

}  // namespace gpubox::test
