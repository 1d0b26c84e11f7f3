#pragma once
// The programs gpubox runs with the caller's rights: its companions (gpubox-scope,
// gpubox-unpack, gpubox-nvml, found beside it) and skopeo. One way to find them and one way to
// start them, so that each runs with exactly the environment and the fds it is given.
//
// A companion someone else could rewrite would run with the caller's rights, so it must be an
// executable regular file owned by root or by gpubox's owner, with no group or world write bit,
// and what was checked is what runs: it is opened O_PATH, checked by fd and run by fd
// (execveat).
#include <sys/stat.h>
#include <sys/types.h>

#include <array>
#include <string>
#include <vector>

#include "common/unique_fd.hpp"

namespace gpubox::companion {

struct Program {
    std::string path;
    UniqueFd fd;  // O_PATH, checked: run by fd; none: run by path (skopeo, from /usr/bin)
};

// Pure: where companion `name` of the gpubox at `exe` may be: beside it, then in
// ../libexec/gpubox/ from there.
std::vector<std::string> candidates(const std::string& exe, const std::string& name);

// Pure: why a file with `st` may not run with the caller's rights, "" where it may.
std::string problem(const struct stat& st, uid_t exe_owner);

// The first of the candidates that exists, opened and checked. SetupError "helper PATH: WHY"
// for one that fails the check, "no helper NAME (looked for A and B)" where there is none.
Program find(const std::string& name);

// Forks and runs `p` with exactly `argv` and `env` (empty: no environment at all), its fds 0-2
// `fds` (borrowed) and no other fd, signals unblocked, SIGPIPE at its default, and with
// `cwd_root` in "/". Returns its pid. A failed exec is one line "execve(PATH): WHY" on its
// fd 2, and exit status 127.
pid_t spawn(const Program& p, const std::vector<std::string>& argv,
            const std::vector<std::string>& env, const std::array<int, 3>& fds,
            bool cwd_root = false);

}  // namespace gpubox::companion
