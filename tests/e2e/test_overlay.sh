#!/usr/bin/env bash
# --overlay DIR: the sandbox's writes to its root kept in the caller's DIR (an overlayfs upper
# and work directory inside it) and found again by the next run, for a directory ROOTFS and for
# a pulled image, which are never written (content and atimes checked). DIR is opened as every
# state directory is (made 0700 if missing; another user's, or one another user could replace,
# refused); one run at a time may use it; a DIR on tmpfs works; one on a filesystem overlayfs
# refuses as an upper layer (another overlay) is refused in one line with a hint.
if [ "$(id -u)" = 0 ] && [ -z "${GPUBOX_E2E_UNPRIVILEGED:-}" ]; then
    # As root, before lib.sh drops privileges: another user's DIR, a DIR below a directory
    # another user may write, a tmpfs and an overlay the unprivileged part may write in.
    rr=$(mktemp -d /tmp/gpubox-e2e-overlay.XXXXXX) && chmod 0755 "$rr" &&
        mkdir -m 0700 "$rr/others" && chown 65533:65533 "$rr/others" &&
        mkdir -m 0777 "$rr/open" && mkdir -m 0700 "$rr/open/ov" && chown 65534:65534 "$rr/open/ov" &&
        mkdir "$rr/tmpfs" && mount -t tmpfs -o size=16m,mode=0755,uid=65534,gid=65534 gpubox-e2e "$rr/tmpfs" &&
        mkdir "$rr/l" "$rr/u" "$rr/w" "$rr/ovl" &&
        mount -t overlay gpubox-e2e -o "lowerdir=$rr/l,upperdir=$rr/u,workdir=$rr/w" "$rr/ovl" &&
        chown 65534:65534 "$rr/ovl" ||
        { echo "Bail out! cannot prepare the overlay test's directories"; exit 1; }
    trap 'umount "$rr/ovl" "$rr/tmpfs" 2>/dev/null; rm -rf "$rr"' EXIT
    export E2E_OV_ROOT=$rr
fi
E2E_FAKE_HOSTS=1
. "$(dirname "$0")/lib.sh"
[ -n "${E2E_OV_ROOT:-}" ] && [ -n "${E2E_HOST:-}" ] || skip "another user's directories, a tmpfs and an overlay are made as root (run the suite as root)"
RR=$E2E_OV_ROOT
T2001=978307200
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
mkdir -p "$R/opt/app" && echo "image's own" >"$R/opt/app/old.txt" && echo "v1" >"$R/opt/app/version"

# age DIR / moved DIR: as test_rootfs_atime.sh, every entry's atime set to 2001, then the
# entries whose atime moved.
age() { find "$1" >"$WORK/list" && xargs touch -h -a -d "@$T2001" <"$WORK/list"; }
moved() { xargs stat -c '%X %n' <"$WORK/list" | grep -v "^$T2001 " | sed "s|$1|ROOTFS|" | head -3; }

# A pip-like install: new files in a new directory, a file of the image changed, one deleted.
install_cmd='mkdir -p /usr/lib/python3/site-packages/numpy &&
  echo "__version__ = 1.26" >/usr/lib/python3/site-packages/numpy/__init__.py &&
  echo v2 >/opt/app/version && rm /opt/app/old.txt && echo installed'
check_cmd='cat /usr/lib/python3/site-packages/numpy/__init__.py /opt/app/version;
  if [ -e /opt/app/old.txt ]; then echo old.txt is back; else echo old.txt stays deleted; fi'
want=$'__version__ = 1.26\nv2\nold.txt stays deleted'

# --- a directory ROOTFS ---
O=$WORK/ov
before=$(tree_hash "$R")
age "$R"
box run --overlay "$O" "$R" sh -c "$install_cmd"
expect_eq "run --overlay DIR: the install succeeds (exit 0)" "$rc:$out" "0:installed"
expect_eq "  DIR did not exist: made 0700" "$(stat -c %a "$O" 2>&1)" "700"
box run --overlay "$O" "$R" sh -c "$check_cmd"
expect_eq "  a second run finds the new files, the change and the deletion (a whiteout)" "$out" "$want"
expect_eq "  ROOTFS's atimes are unchanged (nothing read through a writable mount)" "$(moved "$R")" ""
expect_eq "  ROOTFS's content is unchanged" "$(tree_hash "$R")" "$before"
box run "$R" sh -c "$check_cmd"
expect_eq "  without --overlay: the image as it was" "$out" $'v1\nold.txt is back'
box run --overlay "$O" "$R" sh -c 'echo more >>/opt/app/version; cat /opt/app/version'
expect_eq "  writes go on accumulating in DIR" "$out" $'v2\nmore'

# --- refusals: one line, exit 125, nothing run ---
box run --overlay "$O" --writable "$R" true
expect_eq "--overlay with --writable: exit 125" "$rc" 125
expect_match "  one line saying they contradict" "$err" '^gpubox: run: --overlay and --writable contradict each other'
box run --overlay "$O" --read-only "$R" true
expect_eq "--overlay with --read-only: exit 125" "$rc" 125
box run --overlay "$RR/others/ov" "$R" true
expect_eq "--overlay below another user's directory: exit 125" "$rc" 125
expect_match "  says whose it is" "$err" "^gpubox: --overlay \"$RR/others/ov\".*(belongs to uid 65533|Permission denied)"
box run --overlay "$RR/open/ov" "$R" true
expect_eq "--overlay below a directory another user may write (mode 0777, not sticky): exit 125" "$rc" 125
expect_match "  says why" "$err" "^gpubox: --overlay \"$RR/open/ov\".*writable by others"
box run --overlay "$R/ov" "$R" true
expect_eq "--overlay DIR inside ROOTFS: exit 125" "$rc" 125
expect_match "  says why" "$err" "^gpubox: --overlay \"$R/ov\" lies inside ROOTFS"
check "  and made nothing in ROOTFS" test ! -e "$R/ov"
mkdir -m 0700 "$WORK/mine" && chmod 0777 "$WORK/mine"
box run --overlay "$WORK/mine" "$R" true
expect_eq "--overlay DIR that another user may write: exit 125" "$rc" 125
expect_match "  with the fix" "$err" '^gpubox: hint: chmod go-w'

# --- two runs on one DIR: overlayfs forbids sharing an upper directory ---
mkfifo "$WORK/go"
"$GPUBOX" run --overlay "$O" "$R" sh -c 'touch /started; read x </dev/stdin' <"$WORK/go" >/dev/null 2>&1 &
first=$!
exec 7>"$WORK/go"
if wait_until 60 test -e "$O/upper/started"; then
    box run --overlay "$O" "$R" true
    expect_eq "a second run on a DIR in use: exit 125" "$rc" 125
    expect_match "  one line saying another run holds it" "$err" "^gpubox: --overlay \"$O\": in use by another gpubox run"
    expect_eq "  one line (and a hint)" "$(printf '%s\n' "$err" | grep -vc '^gpubox: hint:')" 1
else
    not_ok "the first run on DIR started" "$(cat "$O/upper" 2>&1)"
fi
(echo >&7) 2>/dev/null  # (a subshell: where the first run failed, SIGPIPE ends it, not us)
exec 7>&-
wait "$first"
expect_eq "  the first run ended normally" "$?" 0
box run --overlay "$O" "$R" true
expect_eq "  and DIR is free again" "$rc" 0
box run --overlay "$O" --driver-root "$E2E_HOST" --gpu 0 "$R" nvidia-smi -L
expect_match "--overlay with --gpu 0 (the simulated host): the GPU is there" "$rc:$out" '^0:GPU 0: '
expect_eq "  DIR holds only the workload's writes: none of gpubox's mount points or GPU files" \
    "$(cd "$O/upper" && find . | LC_ALL=C sort | tr '\n' ' ')" \
    ". ./opt ./opt/app ./opt/app/old.txt ./opt/app/version ./started ./usr ./usr/lib ./usr/lib/python3 ./usr/lib/python3/site-packages ./usr/lib/python3/site-packages/numpy ./usr/lib/python3/site-packages/numpy/__init__.py "
check "  the deletion is a whiteout (a character device 0:0)" \
    test "$(stat -c '%F %t:%T' "$O/upper/opt/app/old.txt")" = "character special file 0:0"

# --- DIR on tmpfs; DIR on another overlay (refused as an upper layer) ---
box run --overlay "$RR/tmpfs/ov" "$R" sh -c "$install_cmd"
box run --overlay "$RR/tmpfs/ov" "$R" sh -c "$check_cmd"
expect_eq "--overlay on a tmpfs: kept across runs (whiteout included)" "$rc:$out" "0:$want"
box run --overlay "$RR/ovl/ov" "$R" true
expect_eq "--overlay on another overlayfs: exit 125" "$rc" 125
expect_match "  one line naming the filesystem" "$err" "^gpubox: --overlay \"$RR/ovl/ov\": .*overlay"
expect_match "  and a hint to choose a local one" "$err" '^gpubox: hint: .*(ext4|local)'

# --- a pulled image ---
export HOME=$WORK/home GPUBOX_IMAGES=$WORK/store
mkdir -p "$HOME"
tar -C "$R" -cf "$WORK/py.tar" .
box pull --name py "tar:$WORK/py.tar"
expect_eq "pull tar: the image to overlay" "$rc:$out" "0:py"
S=$(find "$GPUBOX_IMAGES" -path '*/opt/app/version' | sed 's|/opt/app/version$||')
store_before=$(tree_hash "$GPUBOX_IMAGES")
age "$S"
box run --overlay "$WORK/ov-img" py sh -c "$install_cmd"
expect_eq "run --overlay DIR IMAGE: the install succeeds" "$rc:$out" "0:installed"
box run --overlay "$WORK/ov-img" py sh -c "$check_cmd"
expect_eq "  a second run finds it" "$out" "$want"
expect_eq "  the image's atimes are unchanged" "$(moved "$S")" ""
expect_eq "  the store is unchanged" "$(tree_hash "$GPUBOX_IMAGES")" "$store_before"
box run py cat /opt/app/version
expect_eq "  the image without --overlay: as pulled" "$out" "v1"
box run --overlay "$WORK/ov-img" --writable py true
expect_eq "  --overlay --writable IMAGE: exit 125" "$rc" 125
box run --overlay "$WORK/ov-img" py rm /opt/app/version  # a whiteout: overlayfs keeps its
err=$(rm -rf "$WORK/ov-img" 2>&1)                           # template in work/work (mode 0000)
expect_eq "rm -rf DIR starts afresh, after a run that deleted a file" "$?:$err" "0:"
finish
