#pragma once
// --overlay DIR: the sandbox's writes to its root kept in the caller's DIR, as an overlayfs
// upper directory (DIR/upper) with its work directory (DIR/work) beside it, found again by the
// next run. The monitor's side: DIR opened and checked as every state directory is
// (common/trusted_path.hpp), locked for this run, its layers made and checked; the sandbox's
// init opens them again in its own mount namespace and insists they are these.
#include <sys/types.h>

#include <string>

#include "common/unique_fd.hpp"

namespace gpubox::launcher {

// Pure: why overlayfs cannot take an upper layer on a filesystem of type `f_type` (statfs(2)'s
// magic), "" where it can or where gpubox does not know ("NFS", "Lustre", "another overlay", ...).
std::string upper_fs_problem(long f_type);

struct KeptOverlay {
    std::string dir;       // absolute
    UniqueFd lock;         // DIR itself, flock(LOCK_EX) for the run: one upper, one mount
    UniqueFd upper, work;  // O_PATH
};

// Opens (making it 0700 where missing) and locks DIR for a run of `rootfs`. PlanError, one
// line with a hint: another user's DIR or one on the way, another run holding it, a filesystem
// overlayfs refuses as an upper layer, a DIR inside ROOTFS (which the sandbox would write), a
// DIR made over another image or ROOTFS than `origin` (DIR/origin records it; "": ROOTFS's
// real path) unless `force` (--force-overlay, which records the new one).
KeptOverlay open_kept_overlay(const std::string& dir, const std::string& rootfs,
                              const std::string& origin = "", bool force = false);

// What DIR/origin says DIR was made over ("" where it says nothing), and the check above
// (export's too): PlanError where it was made over another than `origin`.
std::string read_origin(int dir);
void check_origin(const std::string& dir, const std::string& recorded, const std::string& origin,
                  const char* force_hint);

// After the run: overlayfs makes DIR/work/work mode 0000 (anew at each mount) and may leave its
// whiteout template in it, which would make `rm -rf DIR` fail; opened up for the owner (0700).
// Best effort: the next run's mount makes it again anyway.
void open_up_kept_overlay(const KeptOverlay& k);

}  // namespace gpubox::launcher
