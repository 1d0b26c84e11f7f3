#pragma once
// isolate mode's walks of a box's tree after the program is gone: the sweep of what is not a
// regular file or a directory after --run, and the removal of a box. Both go by fd, never
// follow a symlink, and open a directory the program made unreadable or unsearchable (u+rwx)
// to walk it. They hold one directory fd at a time, however deep the tree (a program can make
// it deeper than any fd limit): a directory is left through its ".." and the parent checked to
// be the one it came from (device and inode).

#include <string>

namespace gpubox::ioi {

// After a run (isolate's chowntree() without --special-files): removes every symlink, FIFO,
// socket and device node below directory `name` of `dir`, at any depth; each directory gets
// back the mode the program left it with.
void sweep_special_files(int dir, const std::string& name);

// Removes directory `name` of `dir` and everything in it; nothing when it does not exist.
void remove_box_tree(int dir, const std::string& name);

}  // namespace gpubox::ioi
