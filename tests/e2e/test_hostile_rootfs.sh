#!/usr/bin/env bash
# Hostile rootfs layouts: symlinks planted where gpubox mounts must never make it mount, create
# or change anything outside the new root.
. "$(dirname "$0")/lib.sh"
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
mkdir -p "$WORK/victim" "$WORK/victim2" "$WORK/data"
echo untouched >"$WORK/victim/file"
echo data >"$WORK/data/f"
victim_hash() { tree_hash "$WORK/victim"; tree_hash "$WORK/victim2"; stat -c '%Y %Z' "$WORK/victim" "$WORK/victim2"; }
v_before=$(victim_hash)

rm -rf "$R/dev" "$R/proc" "$R/tmp" "$R/run" "$R/sys"
ln -s "$WORK/victim" "$R/dev"             # dev -> /home/victim
ln -s / "$R/proc"                         # proc -> /
ln -s /etc "$R/tmp"                       # tmp -> /etc
ln -s "$WORK/victim2/missing" "$R/run"    # dangling
ln -s ../../../../../sys "$R/sys"         # relative escape
mkdir -p "$R/usr/lib" && ln -s ../../../../etc "$R/usr/lib/evil"   # usr/lib -> ../../../../etc
ln -s "$WORK/victim" "$R/opt"             # a bind target through an escaping symlink
r_before=$(tree_hash "$R")

box run --ro-bind "$WORK/data:/opt/x" --ro-bind "$WORK/data:/usr/lib/evil/y" "$R" \
    sh -c 'ls /dev/null /proc/self/status >/dev/null && echo x >/tmp/w && cat /opt/x/f /usr/lib/evil/y/f && ls -d /run'
expect_eq "the sandbox runs despite the hostile links" "$rc" 0
expect_match "binds land inside the new root" "$out" $'^data\ndata\n/run$'
expect_eq "no file created, changed or mounted in the victim dirs" "$(victim_hash)" "$v_before"
expect_eq "ROOTFS is unchanged" "$(tree_hash "$R")" "$r_before"
expect_eq "the host's /etc got no file from the sandbox" "$(ls /etc/w 2>&1)" "ls: cannot access '/etc/w': No such file or directory"
box run "$R" sh -c 'readlink /usr/lib/evil; ls /usr/lib/evil/passwd'
expect_eq "an escaping relative link resolves inside the root" "$out" $'../../../../etc\n/usr/lib/evil/passwd'

# The same with --writable: no mount point can be made, but nothing may escape either.
box run --writable --ro-bind "$WORK/data:/opt/x" "$R" true
expect_eq "--writable with a hostile layout fails cleanly" "$rc" 125
expect_eq "--writable: victim dirs still untouched" "$(victim_hash)" "$v_before"
expect_eq "--writable: ROOTFS still unchanged" "$(tree_hash "$R")" "$r_before"

# A rootfs whose / is a symlink chain to the host root must not expose the host.
ln -s / "$WORK/rootlink"
box run "$R" probe read "$WORK/victim/file"
expect_match "host paths are not reachable through the rootfs" "$out" '=ENOENT$'
finish
