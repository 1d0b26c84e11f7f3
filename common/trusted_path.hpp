#pragma once
// Paths in directories another user might write: where gpubox keeps state for its caller, and
// files the caller names for gpubox to write (docs/security.md lists each use).
//
// A state directory is the caller's own: made by gpubox (mode 0700), or owned by the caller
// and writable by nobody else. Every directory on the way to it is root's or the caller's and
// writable by nobody else unless sticky (as /tmp, where others may add entries but not rename
// or remove ours), and a symlink on the way is followed only when root's or the caller's.
// "Nobody else" allows the group when it is the caller's user-private group (the directory's
// gid is the caller's, and equals the caller's uid, as USERGROUPS_ENAB makes them: Debian's
// umask 002 then leaves directories group-writable, and nobody else is in that group). So
// nobody but root and the caller can rename, replace or fill anything on that path. Each step
// is opened O_PATH|O_NOFOLLOW from the one before and checked by fstat after opening; the
// caller gets the last fd and works relative to it (openat, mkdirat) from then on.
#include <sys/stat.h>
#include <sys/types.h>

#include <string>

#include "common/unique_fd.hpp"

namespace gpubox::trusted_path {

enum class Role {
    on_the_way,  // a directory the path passes through
    own,         // the state directory itself
};

// What a walk does where a directory on the path is missing.
enum class Missing {
    create,     // make it (mkdirat, 0700), then check it as any other
    absent_ok,  // stop: the state directory is not there (an invalid fd)
    error,      // fail as open did (ENOENT)
};

// Pure: why a directory with status `st` cannot be trusted in `role` by the caller of
// effective uid `euid` and gid `egid` ("belongs to uid 1001", "is writable by others (mode
// 0777) and not sticky"); "" when it can.
std::string dir_problem(const struct stat& st, uid_t euid, gid_t egid, Role role);
// Pure: why a symlink on the way (its own lstat) cannot be followed; "" when it can.
std::string link_problem(const struct stat& st, uid_t euid);
// Pure: "" for a regular file, else "not a regular file (a FIFO)" and the like.
std::string regular_file_problem(mode_t mode);

// The state directory `path` (made absolute against the cwd), walked as above from "/": an
// O_PATH|O_DIRECTORY fd, or (Missing::absent_ok only) an invalid one where a directory on the
// path is missing. A refusal is PlanError("<what> \"path\"...", hint), the hint led by
// `chmod go-w "dir", or ` where the state directory itself is writable by another; a failed
// call is a SysError nested in PlanError("<what> \"path\"", hint).
UniqueFd open_state_dir(const std::string& path, Missing missing, const std::string& what,
                        const std::string& hint);

// A directory another user keeps for the caller to read (a site's read-only image store),
// walked as a state directory is but for its owner, whoever that is: every directory on the
// way root's or the owner's and writable by nobody else unless sticky, the directory itself
// the owner's and writable by nobody else (its group only where it is the owner's
// user-private one). So only root and that owner can change what the path names. Nothing is
// made; an invalid fd where it does not exist. Refusals as open_state_dir's.
UniqueFd open_shared_dir(const std::string& path, const std::string& what, const std::string& hint);

// A file the caller names for gpubox to write (--meta), opened for writing without blocking
// and without following a final symlink: a new one made O_CREAT|O_EXCL with `mode`; an
// existing one opened O_PATH|O_NOFOLLOW first and only if it is a regular file reopened
// O_WRONLY|O_TRUNC, so that no FIFO, device or socket is ever opened for writing. A symlink
// fails as open(O_NOFOLLOW) does (ELOOP, a SysError); another type is PlanError.
UniqueFd open_output_file(const std::string& path, mode_t mode);

// `truncated`, an fd whose open emptied its file (O_TRUNC), given up for another open file of
// the same inode (`flags` less O_TRUNC, O_CREAT, O_EXCL): ext4 (auto_da_alloc) writes a file
// emptied by a truncation back to disk when the file that truncated it is closed, to make a
// replace-by-truncate durable. Closed now, while empty, that costs nothing; closed after what is
// written, it would allocate and submit that block every run (0.3-0.6 ms on the development
// VM's virtio disk, bench/README.md). What is written then stays in the page cache like any
// file's, for its reader all the same. `path`: the name errors give.
UniqueFd written_apart(UniqueFd truncated, int flags, const std::string& path);

}  // namespace gpubox::trusted_path
