#!/usr/bin/env bash
# Where gpubox keeps state for its caller, attacked by another user and by the sandboxed program
# (issue 28): the boxes' root of isolate mode (made by gpubox or the caller's own, every
# directory on the way root's or the caller's), what a --run leaves in box/ (regular files and
# directories only, at any depth and whatever modes the program set), and --meta (never
# blocks, never follows a symlink, refused before anything runs).
#
# As root (CI) the script stays root and runs each side as a user of its own: the judge uid
# 65532 and the attacker uid 65531 (not 65533/65534, whose default roots test_isolate_mode
# uses). Otherwise it runs the judge's parts as the caller and skips the attacker's.
E2E_AS_ROOT=1
. "$(dirname "$0")/lib.sh"

if [ "$(id -u)" = 0 ]; then
    J=65532 A=65531 two_users=1
    chmod 0755 "$WORK"
    as() { local u=$1; shift; setpriv --reuid="$u" --regid="$u" --clear-groups --inh-caps=-all --bounding-set=-all "$@"; }
    as_judge() { as "$J" env -u XDG_RUNTIME_DIR -u GPUBOX_ISOLATE_ROOT "$@"; }
    as_attacker() { as "$A" "$@"; }
    DEFAULT_ROOT=/tmp/gpubox-isolate-$J
    rm -rf "$DEFAULT_ROOT"  # a leftover of an earlier run: the test uid's only
    trap 'rm -rf "$DEFAULT_ROOT"; rm -rf "$WORK"' EXIT
else
    J=$(id -u) two_users=0
    as_judge() { env -u XDG_RUNTIME_DIR -u GPUBOX_ISOLATE_ROOT "$@"; }
fi

T=$WORK/t
mkdir -m 0755 "$T" "$T/bin" "$T/pub"
install -m 0755 "$GPUBOX" "$T/bin/gpubox" && ln -s gpubox "$T/bin/isolate"
G=$T/bin/gpubox ISO=$T/bin/isolate
# The judge's own directory: private files, the test data, a ROOTFS.
JD=$T/judge
mkdir -m 0700 "$JD"
[ "$two_users" = 1 ] && chown "$J:$J" "$JD"
as_judge sh -c 'echo SECRET >"$1/private" && echo "2 3" >"$1/input"' sh "$JD"
as_judge "$G" rootfs create "$JD/r" >/dev/null || { echo "Bail out! rootfs create failed"; exit 1; }

# judge ARGS...: run as the judge; sets $rc, $out, $err (the shell here writes the files).
judge() {
    as_judge "$@" >"$T/.out" 2>"$T/.err"
    rc=$?
    out=$(cat "$T/.out")
    err=$(cat "$T/.err")
}
private_intact() { [ "$(cat "$JD/private")" = SECRET ]; }
judge "$G" run "$JD/r" true
if [ "$rc" != 0 ]; then
    if grep -q "user namespace" "$T/.err" && [ "${GPUBOX_TESTS_MUST_WORK:-0}" != 1 ]; then
        echo "1..0 # SKIP user namespaces unavailable: $(head -1 "$T/.err")"; exit 77
    fi
    echo "Bail out! gpubox cannot run a trivial sandbox: $err"; exit 1
fi

# --- 1. the boxes' root ------------------------------------------------------------------
if [ "$two_users" = 1 ]; then
    # The attack: A makes the judge's default root first (as if sticky /tmp were enough), lets
    # the judge --init in it, then swaps the box for one whose in.txt is a symlink to the
    # judge's private file, into which the judge then copies a test input.
    as_attacker mkdir -m 1777 "$DEFAULT_ROOT"
    judge "$ISO" --init
    expect_match "a default root another user made is refused: exit 2, one line naming the fix" "$rc:$err" \
        "^2:box root \"$DEFAULT_ROOT\" belongs to uid $A, not to you \(uid $J\); set GPUBOX_ISOLATE_ROOT or XDG_RUNTIME_DIR to a directory of your own$"
    if [ "$rc" = 0 ]; then
        as_attacker sh -c 'mv "$1/0" "$1/0.stolen" && mkdir -p "$1/0/box" && ln -s "$2" "$1/0/box/in.txt"' sh "$DEFAULT_ROOT" "$JD/private"
        as_judge cp "$JD/input" "$out/box/in.txt"
    fi
    check "... so the judge's copy of a test input cannot overwrite its private file" private_intact
    check "... and the judge made nothing in it" test -z "$(ls -A "$DEFAULT_ROOT")"
    rm -rf "$DEFAULT_ROOT"

    # A symlink at the default root's name, to a directory of the judge's.
    as_judge mkdir "$JD/elsewhere"
    as_attacker ln -s "$JD/elsewhere" "$DEFAULT_ROOT"
    judge "$ISO" --init
    expect_match "a symlink of another user's at the root's name is refused" "$rc:$err" \
        "^2:box root \"$DEFAULT_ROOT\" is a symlink of uid $A; set GPUBOX_ISOLATE_ROOT"
    check "... and nothing was made where it points" test -z "$(ls -A "$JD/elsewhere")"
    rm -f "$DEFAULT_ROOT"

    # The judge's own directory below one the attacker may write: A could rename it away.
    mkdir -m 0777 "$T/pub/open" && chown "$A:$A" "$T/pub/open"
    as_judge mkdir -m 0700 "$T/pub/open/boxes"
    judge env GPUBOX_ISOLATE_ROOT="$T/pub/open/boxes" "$ISO" --init
    expect_match "a root below a directory another user owns is refused" "$rc:$err" \
        "^2:box root \"$T/pub/open/boxes\": \"$T/pub/open\" belongs to uid $A; set GPUBOX_ISOLATE_ROOT"
    # The same through XDG_RUNTIME_DIR (su keeps the other user's).
    judge env XDG_RUNTIME_DIR="$T/pub/open" "$ISO" --init
    expect_match "an XDG_RUNTIME_DIR another user owns is refused" "$rc:$err" \
        "^2:box root \"$T/pub/open/gpubox/isolate\": \"$T/pub/open\" belongs to uid $A; set GPUBOX_ISOLATE_ROOT"
    # The judge's own, but writable by all: anyone may swap a box in it.
    mkdir -m 0777 "$T/pub/mine-open" && chown "$J:$J" "$T/pub/mine-open"
    judge env GPUBOX_ISOLATE_ROOT="$T/pub/mine-open" "$ISO" --init
    expect_match "the judge's own root, writable by others, is refused" "$rc:$err" \
        "^2:box root \"$T/pub/mine-open\" is writable by others \(mode 0777\); chmod go-w \"$T/pub/mine-open\", or set GPUBOX_ISOLATE_ROOT"
    # Group write in the judge's user-private group (gid == uid, as USERGROUPS_ENAB makes them:
    # Debian's umask 002) is the judge's alone; in a group the attacker is in it is not.
    mkdir -m 0770 "$T/pub/mine-grp" && chown "$J:$J" "$T/pub/mine-grp" && chmod 0770 "$T/pub/mine-grp"
    judge env GPUBOX_ISOLATE_ROOT="$T/pub/mine-grp" "$ISO" --init
    expect_eq "the judge's own root, writable by the judge's private group, is used" "$rc:$out" "0:$T/pub/mine-grp/0"
    judge env GPUBOX_ISOLATE_ROOT="$T/pub/mine-grp" "$ISO" --cleanup
    chown "$J:$A" "$T/pub/mine-grp"
    judge env GPUBOX_ISOLATE_ROOT="$T/pub/mine-grp" "$ISO" --init
    expect_match "... writable by the attacker's group, it is refused" "$rc:$err" \
        "^2:box root \"$T/pub/mine-grp\" is writable by its group \(mode 0770\); chmod go-w"
    # A shared sticky directory (root's, 1777) as the root: refused too (each user has a root of
    # their own, so box ids never collide; isolate's is root's and only isolate writes it).
    mkdir -m 1777 "$T/pub/shared"
    judge env GPUBOX_ISOLATE_ROOT="$T/pub/shared" "$ISO" --init
    expect_match "a shared sticky root is refused" "$rc:$err" \
        "^2:box root \"$T/pub/shared\" belongs to uid 0, not to you \(uid $J\); set GPUBOX_ISOLATE_ROOT"

    # rootfs create into an empty directory another user made first: they could change the
    # image afterwards (a busybox of theirs in every later run).
    mkdir -m 0777 "$T/pub/rootfs" && chown "$A:$A" "$T/pub/rootfs"
    judge "$G" rootfs create "$T/pub/rootfs"
    expect_eq "rootfs create into another user's empty directory is refused" "$rc:$err" \
        "125:gpubox: rootfs create: \"$T/pub/rootfs\" belongs to uid $A, not to you (uid $J)
gpubox: hint: name a new directory (gpubox makes it), or one only you can write"
    check "... and writes nothing there" test -z "$(ls -A "$T/pub/rootfs")"

    # And where nothing was there: made 0700 by gpubox, used as before.
    judge "$ISO" --init
    expect_eq "the default root, made by gpubox: --init prints the box" "$rc:$out" "0:$DEFAULT_ROOT/0"
    expect_eq "... the root is the judge's, mode 0700" "$(stat -c %u:%a "$DEFAULT_ROOT")" "$J:700"
    judge "$ISO" --cleanup
    expect_eq "... --cleanup" "$rc:$(ls -A "$DEFAULT_ROOT")" "0:0.lock"
else
    ok "# SKIP the attacker's side of the boxes' root needs the suite to start as root"
fi
as_judge mkdir "$JD/r2"
judge "$G" rootfs create "$JD/r2"
expect_eq "rootfs create into an empty directory of the caller's own, as before" "$rc:$err:$(ls "$JD/r2/etc/passwd")" "0::$JD/r2/etc/passwd"
as_judge mkdir -m 0700 "$JD/xdg"
judge env XDG_RUNTIME_DIR="$JD/xdg" "$ISO" --init
expect_eq "XDG_RUNTIME_DIR of the judge's own: gpubox/isolate made below it" "$rc:$out" "0:$JD/xdg/gpubox/isolate/0"
expect_eq "... mode 0700 each" "$(stat -c %a "$JD/xdg/gpubox" "$JD/xdg/gpubox/isolate" | tr '\n' ' ')" "700 700 "
judge env XDG_RUNTIME_DIR="$JD/xdg" "$ISO" --cleanup

# --- 2. what a --run leaves in box/ --------------------------------------------------------
export GPUBOX_ISOLATE_ROOT=$JD/boxes
judge env GPUBOX_ISOLATE_ROOT="$GPUBOX_ISOLATE_ROOT" "$ISO" --init
BOX=$out/box
# Links and FIFOs everywhere, in directories the program made unreadable, unsearchable, or both.
judge env GPUBOX_ISOLATE_ROOT="$GPUBOX_ISOLATE_ROOT" "$ISO" -p --run -- /bin/sh -c '
    ln -s "$1" top && mkfifo fifo && mkdir d && ln -s "$1" d/res && chmod 311 d &&
    mkdir -p a/b/c && ln -s "$1" a/b/c/res && mkfifo a/b/fifo && ln -s / a/b/root &&
    echo data >a/b/c/file && chmod 0 a/b/c && chmod 0 a/b && chmod 0 a && echo 4 >out.txt' sh "$JD/private"
expect_eq "the program planted its links and FIFOs" "$rc:$(cat "$BOX/out.txt")" "0:4"
judge cat "$BOX/d/res"
expect_eq "a symlink inside a directory the program made 0311 is gone (the judge reads nothing through it)" "$rc:$out" "1:"
expect_eq "... the directory keeps the program's mode" "$(stat -c %a "$BOX/d")" 311
expect_eq "... and so do the unreadable ones" "$(as_judge sh -c 'cd "$1" && stat -c %a a && chmod u+x a &&
    stat -c %a a/b && chmod u+x a/b && stat -c %a a/b/c' sh "$BOX" | tr '\n' ' ')" "0 0 0 "
as_judge chmod -R u+rwx "$BOX"
expect_eq "only regular files and directories are left, at any depth" \
    "$(cd "$BOX" && find . ! -type f ! -type d | LC_ALL=C sort | tr '\n' ' ')" ""
expect_eq "... and the regular files are all there" "$(cd "$BOX" && find . -type f | LC_ALL=C sort | tr '\n' ' ')" \
    "./a/b/c/file ./out.txt "
check "the judge's private file is untouched" private_intact
judge env GPUBOX_ISOLATE_ROOT="$GPUBOX_ISOLATE_ROOT" "$ISO" --cleanup
expect_eq "--cleanup removes the box" "$rc:$(ls -A "$GPUBOX_ISOLATE_ROOT")" "0:0.lock"
# Deeper than the open-file limit (64 here), with an unsearchable directory halfway down: the
# walks hold one directory fd at a time, so the sweep and --cleanup still get to the bottom.
judge env GPUBOX_ISOLATE_ROOT="$GPUBOX_ISOLATE_ROOT" "$ISO" --init
judge bash -c 'ulimit -n 64; exec "$@"' sh env GPUBOX_ISOLATE_ROOT="$GPUBOX_ISOLATE_ROOT" "$ISO" -p -t 30 -w 60 --run -- /bin/sh -c '
    i=0 up=; while [ $i -lt 200 ]; do mkdir d && cd d || exit 1; i=$((i+1)); [ $i -gt 100 ] && up=../$up; done
    ln -s "$1" res && mkfifo fifo && echo 5 >out.txt && chmod 0 "$up"' sh "$JD/private"
expect_match "200 levels under RLIMIT_NOFILE 64: the run is fine" "$rc:$err" '^0:OK '
expect_eq "... the directory the program made unsearchable (level 100) keeps its mode 0" \
    "$(stat -c %a "$BOX/$(printf 'd/%.0s' $(seq 100))")" 0
as_judge chmod -R u+rwx "$BOX"
expect_eq "... and only regular files and directories are left, down to the bottom" \
    "$(cd "$BOX" && find . ! -type d | sed 's,^\./\(d/\)*,.../,' | tr '\n' ' ')" ".../out.txt "
as_judge chmod 0 "$BOX/d"
judge bash -c 'ulimit -n 64; exec "$@"' sh env GPUBOX_ISOLATE_ROOT="$GPUBOX_ISOLATE_ROOT" "$ISO" --cleanup
expect_eq "--cleanup of that tree under the same limit" "$rc:$err:$(ls -A "$GPUBOX_ISOLATE_ROOT")" "0::0.lock"

# --- 3. --meta ----------------------------------------------------------------------------
as_judge mkfifo "$JD/fifo"
judge timeout 60 "$G" run --meta "$JD/fifo" --bind "$JD:/j" "$JD/r" sh -c 'touch /j/ran; exit 3'
expect_eq "gpubox run --meta FIFO (no reader): refused before anything runs, one line" "$rc:$err:$(ls "$JD/ran" 2>&1)" \
    "125:gpubox: --meta \"$JD/fifo\": not a regular file (a FIFO):ls: cannot access '$JD/ran': No such file or directory"
judge env GPUBOX_ISOLATE_ROOT="$GPUBOX_ISOLATE_ROOT" "$ISO" --init
judge env GPUBOX_ISOLATE_ROOT="$GPUBOX_ISOLATE_ROOT" timeout 60 "$ISO" -M "$JD/fifo" --run -- /bin/true
expect_eq "isolate -M FIFO: isolate's message, exit 2" "$rc:$err" \
    "2:Failed to open metafile '$JD/fifo': not a regular file (a FIFO)"
as_judge ln -s "$JD/private" "$JD/meta-link"
judge "$G" run --meta "$JD/meta-link" "$JD/r" true
expect_match "--meta naming a symlink: refused, never followed" "$rc:$err" \
    "^125:gpubox: --meta \"$JD/meta-link\": open\(.*\): Too many levels of symbolic links$"
check "... the file it points to is untouched" private_intact
judge env GPUBOX_ISOLATE_ROOT="$GPUBOX_ISOLATE_ROOT" "$ISO" -M "$JD/meta-link" --run -- /bin/true
expect_eq "isolate -M SYMLINK: refused" "$rc:$err" \
    "2:Failed to open metafile '$JD/meta-link': Too many levels of symbolic links"
check "... the file it points to is untouched" private_intact
judge "$G" run --meta "$JD" "$JD/r" true
expect_eq "--meta naming a directory: refused before the run" "$rc:$err" \
    "125:gpubox: --meta \"$JD\": not a regular file (a directory)"
judge "$G" run --meta "$JD/meta.json" "$JD/r" sh -c 'exit 3'
expect_match "a new --meta file: written as before" "$rc:$(grep '"status"' "$JD/meta.json")" '^3: *"status": "RE",$'
# Writing the verdict fails after the run (RLIMIT_FSIZE 0, SIGXFSZ ignored; gpubox's stderr a
# pipe, which the limit does not cover): the verdict goes to stderr in full and the exit status
# is the run's.
judge bash -c 'trap "" XFSZ; (ulimit -f 0; exec "$@") 2>&1 | cat >&2; exit "${PIPESTATUS[0]}"' \
    sh "$G" run --meta "$JD/meta.json" "$JD/r" sh -c 'exit 3'
expect_match "--meta that cannot be written: the run's status, the error and the whole verdict on stderr" "$rc:$err" \
    $'^3:gpubox: --meta "[^"]*": write\\(.*\\): File too large; the verdict follows\n\\{\n.*"status": "RE",.*\n\\}$'
expect_eq "... and the file is left empty, not half written" "$(stat -c %s "$JD/meta.json")" 0
judge bash -c 'trap "" XFSZ; (ulimit -f 0; exec "$@") 2>&1 | cat >&2; exit "${PIPESTATUS[0]}"' \
    sh env GPUBOX_ISOLATE_ROOT="$GPUBOX_ISOLATE_ROOT" "$ISO" -M "$JD/meta" --run -- /bin/true
expect_match "isolate -M that cannot be written: exit 2, the error and the whole meta file on stderr" "$rc:$err" \
    $'^2:Failed to write metafile \'[^\']*\': File too large; its contents follow\ntime:.*\nexitcode:0$'
if [ "$two_users" = 1 ]; then
    # A's symlink at the name the judge gives --meta in a shared sticky directory.
    mkdir -m 1777 "$T/pub/tmp"
    as_attacker ln -s "$JD/private" "$T/pub/tmp/verdict.json"
    judge "$G" run --meta "$T/pub/tmp/verdict.json" "$JD/r" true
    expect_match "another user's symlink at the --meta name is refused" "$rc:$err" '^125:gpubox: --meta '
    check "... the judge's private file is untouched" private_intact
fi
judge env GPUBOX_ISOLATE_ROOT="$GPUBOX_ISOLATE_ROOT" "$ISO" --cleanup
finish
