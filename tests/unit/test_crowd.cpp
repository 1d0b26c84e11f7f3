// A crowd set apart from its monitor (isolate/crowd.hpp): the CPUs it keeps, the children files
// parsed, and a real tree of processes pinned through the host's /proc, threads included, while
// a process outside the tree keeps its CPUs.
#include <catch2/catch.hpp>

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"
#include "isolate/crowd.hpp"

using namespace gpubox;
using namespace gpubox::isolate;

namespace {

cpu_set_t cpus_of(std::initializer_list<int> list) {
    cpu_set_t s;
    CPU_ZERO(&s);
    for (int c : list) CPU_SET(c, &s);
    return s;
}

cpu_set_t affinity_of(pid_t tid) {
    cpu_set_t s;
    CPU_ZERO(&s);
    REQUIRE(::sched_getaffinity(tid, sizeof s, &s) == 0);
    return s;
}

bool same(const cpu_set_t& a, const cpu_set_t& b) { return CPU_EQUAL(&a, &b); }
int count(const cpu_set_t& s) { return CPU_COUNT(&s); }

[[noreturn]] void wait_forever() {
    for (;;) ::pause();
}

void* thread_main(void*) { wait_forever(); }

// A process that says it is up on `fd`, after `then`, and waits to be killed.
template <typename F>
pid_t spawn(int fd, char tag, F then) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        then();
        if (::write(fd, &tag, 1) != 1) ::_exit(1);
        wait_forever();
    }
    return pid;
}

}  // namespace

TEST_CASE("a crowd keeps every usable CPU but the monitor's, or nothing is set apart") {
    CHECK(same(all_but(cpus_of({0, 1, 2}), 1), cpus_of({0, 2})));
    CHECK(count(all_but(cpus_of({0}), 0)) == 0);      // one CPU
    CHECK(count(all_but(cpus_of({0, 1}), 5)) == 0);   // not among them
    CHECK(count(all_but(cpus_of({0, 1}), -1)) == 0);  // sched_getcpu failed
}

TEST_CASE("a children file lists pids, space after each; junk ends the list") {
    CHECK(parse_children("12 345 ") == std::vector<pid_t>{12, 345});
    CHECK(parse_children("7") == std::vector<pid_t>{7});
    CHECK(parse_children("").empty());
    CHECK(parse_children("1 x 2 ") == std::vector<pid_t>{1});
    CHECK(parse_children("0 ").empty());
}

TEST_CASE("a tree is pinned from its init down, threads included; a process beside it is not") {
    const cpu_set_t mine = sys::affinity();
    if (CPU_COUNT(&mine) < 2) {
        WARN("one usable CPU: nothing to set apart");
        return;
    }
    int first = 0;
    while (!CPU_ISSET(first, &mine)) ++first;
    const cpu_set_t apart = all_but(mine, first);
    int up[2];
    REQUIRE(::pipe(up) == 0);
    // init -> (b -> d), (c with a second thread)
    const pid_t init = spawn(up[1], 'i', [&] {
        ::setpgid(0, 0);
        spawn(up[1], 'b', [&] { spawn(up[1], 'd', [] {}); });
        spawn(up[1], 'c', [] {
            pthread_t t;
            if (::pthread_create(&t, nullptr, thread_main, nullptr) != 0) ::_exit(1);
        });
    });
    const pid_t beside = spawn(up[1], 'e', [] {});
    char got[5];
    for (std::size_t n = 0; n < sizeof got;) {
        const ssize_t r = ::read(up[0], got + n, sizeof got - n);
        REQUIRE(r > 0);
        n += static_cast<std::size_t>(r);
    }
    ::close(up[0]), ::close(up[1]);
    // init, b, c (two threads), d: five tasks
    CHECK(pin_tree(init, apart) == 5);
    std::vector<pid_t> tree{init};
    for (std::size_t i = 0; i < tree.size(); ++i)
        for (const std::string& tid : sys::try_list_dir(AT_FDCWD, cat("/proc/", tree[i], "/task"))
                                          .value_or(std::vector<std::string>{})) {
            const pid_t t = std::stoi(tid);
            CHECK(same(affinity_of(t), apart));
            for (pid_t child : parse_children(sys::try_read_at(
                     AT_FDCWD, cat("/proc/", tree[i], "/task/", tid, "/children"))))
                tree.push_back(child);
        }
    CHECK(tree.size() == 4);
    CHECK(same(affinity_of(beside), mine));
    CHECK(same(affinity_of(0), mine));
    CHECK(pin_tree(beside + 1000000, apart) == 0);  // gone (or never was): nothing
    ::kill(-init, SIGKILL), ::kill(beside, SIGKILL);
    ::waitpid(init, nullptr, 0), ::waitpid(beside, nullptr, 0);
}
