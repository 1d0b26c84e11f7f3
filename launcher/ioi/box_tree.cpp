#include "launcher/ioi/box_tree.hpp"

#include <fcntl.h>
#include <sys/stat.h>

#include <cerrno>
#include <vector>

#include "common/error.hpp"
#include "common/sys.hpp"
#include "common/sys_host.hpp"
#include "common/text.hpp"

namespace gpubox::ioi {
namespace {

enum class Walk { sweep, remove };

// A directory of the walk: where it came from, how it was found, what is left to look at.
struct Level {
    std::string name;  // in its parent
    dev_t dev = 0;
    ino_t ino = 0;
    mode_t mode = 0;  // as found (07777 bits)
    std::vector<std::string> entries;
    bool opened_up() const { return (mode & 0700) != 0700; }
};

// Directory `name` of `parent`, opened for the walk (u+rwx first where it lacks any, through
// /proc/self/fd: fchmod refuses an O_PATH fd, and a directory of mode 0 opens no other way),
// and its entries.
UniqueFd enter(int parent, const std::string& name, Level& level) {
    UniqueFd p = sys::open_at(parent, name, O_PATH | O_NOFOLLOW | O_DIRECTORY);
    const struct stat st = sys::fstat(p.get(), name);
    level = {name, st.st_dev, st.st_ino, st.st_mode & 07777, {}};
    if (level.opened_up())
        sys::fchmod_at(AT_FDCWD, cat("/proc/self/fd/", p.get()), level.mode | 0700);
    UniqueFd dir = sys::open_at(p.get(), ".", O_RDONLY | O_DIRECTORY);
    level.entries = sys::list_dir(dir.get(), ".");
    return dir;
}

// From finished directory `dir` back to its parent, which must be the one it was entered from.
UniqueFd leave(int dir, const Level& done, const Level& parent) {
    UniqueFd up = sys::open_at(dir, "..", O_RDONLY | O_DIRECTORY);
    const struct stat st = sys::fstat(up.get(), "..");
    if (st.st_dev != parent.dev || st.st_ino != parent.ino)
        throw SetupError(cat("the parent of ", quote(done.name), " changed during the walk"));
    return up;
}

void unlink_entry(int dir, const std::string& name) {
    if (const int err = sys::try_unlink_at(dir, name); err < 0 && err != -ENOENT)
        sys::fail(Syscall::unlinkat, -err, cat("unlinkat(", quote(name), ")"), name);
}

// Depth first, one directory fd held at a time.
void walk(int top, const std::string& name, Walk how) {
    std::vector<Level> levels(1);
    UniqueFd cur = enter(top, name, levels[0]);
    for (;;) {
        Level& at = levels.back();
        if (!at.entries.empty()) {
            const std::string entry = std::move(at.entries.back());
            at.entries.pop_back();
            struct stat st {};
            if (!sys::lstat_at(cur.get(), entry, st)) continue;
            if (S_ISDIR(st.st_mode)) {
                Level next;
                UniqueFd d = enter(cur.get(), entry, next);
                levels.push_back(std::move(next));
                cur = std::move(d);
            } else if (how == Walk::remove || !S_ISREG(st.st_mode)) {
                unlink_entry(cur.get(), entry);
            }
            continue;
        }
        UniqueFd up =
            levels.size() > 1 ? leave(cur.get(), at, levels[levels.size() - 2]) : UniqueFd();
        if (how == Walk::sweep && at.opened_up()) sys::fchmod(cur.get(), at.mode, at.name);
        const std::string done = at.name;
        levels.pop_back();
        cur = std::move(up);
        const int parent = levels.empty() ? top : cur.get();
        if (how == Walk::remove) sys::remove_dir_at(parent, done);
        if (levels.empty()) return;
    }
}

}  // namespace

void sweep_special_files(int dir, const std::string& name) { walk(dir, name, Walk::sweep); }

void remove_box_tree(int dir, const std::string& name) {
    struct stat st {};
    if (!sys::lstat_at(dir, name, st)) return;
    if (S_ISDIR(st.st_mode)) return walk(dir, name, Walk::remove);
    unlink_entry(dir, name);
}

}  // namespace gpubox::ioi
