#!/usr/bin/env bash
# ROOTFS is never written, not even an access time: every entry's atime is set to 2001 (older
# than mtime, so relatime would update it on the first read), then gpubox runs, checks, plans
# GPUs, binds and runs an image by name, and not one atime may have moved. Files the caller
# owns (O_NOATIME would do for those) and a ROOTFS root made and owns (it would not), a
# symlink followed and a directory listed on the way, the kernel's own reads at execve.
E2E_FAKE_HOSTS=1
if [ "$(id -u)" = 0 ] && [ -z "${GPUBOX_E2E_UNPRIVILEGED:-}" ]; then
    # A ROOTFS of root's, which the unprivileged caller reads but may neither write nor open
    # O_NOATIME; its atimes are set here, as only its owner may.
    rr=$(mktemp -d /tmp/gpubox-e2e-atime.XXXXXX) && chmod 0755 "$rr" &&
        "${GPUBOX:?}" rootfs create "$rr/R" >/dev/null && install -m 0755 "${PROBE:?}" "$rr/R/usr/bin/probe" &&
        find "$rr/R" >"$rr/R.list" && xargs touch -h -a -d @978307200 <"$rr/R.list" ||
        { echo "Bail out! cannot make root's ROOTFS"; exit 1; }
    trap 'rm -rf "$rr"' EXIT
    export E2E_ROOTS_ROOTFS=$rr/R
fi
. "$(dirname "$0")/lib.sh"
[ -n "${E2E_HOST:-}" ] && [ -n "${E2E_ROOTS_ROOTFS:-}" ] || skip "the simulated GPU host and root's ROOTFS are made as root (run the suite as root; it drops privileges)"
H=$E2E_HOST
T2001=978307200

R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"
# An ld.so.cache (GPU planning and the preflight map it), CUDA's files (the preflight lists and
# reads them) and a compat directory, so that every reader of the run-time path has a file.
"$FAKE_GPU_HOST" --write-ldcache "$R/etc/ld.so.cache" "libc.so.6=/usr/lib/x86_64-linux-gnu/libc.so.6"
mkdir -p "$R/usr/local/cuda/lib64" "$R/usr/local/cuda/compat"
echo '{"cuda": {"name": "CUDA SDK", "version": "12.4.0"}}' >"$R/usr/local/cuda/version.json"
: >"$R/usr/local/cuda/lib64/libcudart.so.12.4.127"
: >"$R/usr/local/cuda/compat/libcuda.so.550.54.14"

# age DIR: every entry's atime to 2001, links themselves included. moved DIR: the entries whose
# atime is not 2001 any more, with it (stat -c %X). Both go by DIR.list, listed once: listing a
# directory is a read that updates its atime.
list() { printf '%s/list.%s' "$WORK" "$(printf %s "$1" | md5sum | cut -c1-12)"; }
age() {
    [ -e "$(list "$1")" ] || find "$1" >"$(list "$1")"
    xargs touch -h -a -d "@$T2001" <"$(list "$1")"
}
moved() { xargs stat -c '%X %n' <"$(list "$1")" | grep -v "^$T2001 " | sed "s|$1|ROOTFS|"; }
# untouched DESC DIR GPUBOX-ARGS...: age DIR, run gpubox, expect it to succeed and DIR's atimes kept.
untouched() {
    local desc=$1 dir=$2
    shift 2
    age "$dir"
    box "$@"
    if [ "$rc" != 0 ] && [ "$rc" != 1 -o "$1" != check ]; then
        not_ok "$desc" "gpubox $* exited $rc" "$err"
        return
    fi
    local m
    m=$(moved "$dir")
    if [ -z "$m" ]; then ok "$desc"; else not_ok "$desc" "atime changed: $(printf '%s; ' $m)"; fi
}

untouched "run: the preflight reads CMD (through /usr/bin/true -> busybox) without an atime" \
    "$R" run "$R" true
untouched "run --preflight enforce: the same before the sandbox exists" \
    "$R" run --preflight enforce "$R" true
untouched "run a command the workload execs itself, listing and reading files" \
    "$R" run --preflight off "$R" sh -c 'ls / /usr/bin >/dev/null; cat /etc/passwd >/dev/null'
untouched "run --gpu 0: GPU planning reads the image's ld.so.cache and CUDA files" \
    "$R" run --driver-root "$H" --gpu 0 "$R" true
untouched "run --gpu 0 --preflight enforce" \
    "$R" run --preflight enforce --driver-root "$H" --gpu 0 "$R" true
untouched "run --gpu 0 --print-plan" \
    "$R" run --print-plan --driver-root "$H" --gpu 0 "$R" true
untouched "run --read-only" "$R" run --read-only "$R" probe status
untouched "run --device /dev/null: the device planner reads the image's ld.so.cache" \
    "$R" run --device /dev/null "$R" true
untouched "check: every library of the ld.so.cache, CUDA's files, the compat directory" \
    "$R" check --driver-root "$H" --gpu 0 "$R" true

# root's ROOTFS: O_NOATIME is refused on files the caller does not own.
RR=$E2E_ROOTS_ROOTFS
cp "$RR.list" "$(list "$RR")"
expect_eq "root's ROOTFS starts at 2001" "$(moved "$RR")" ""
box run "$RR" sh -c 'ls /usr/bin >/dev/null; cat /etc/passwd >/dev/null'
expect_eq "run of root's ROOTFS: exit 0" "$rc" 0
expect_eq "... no atime changed (preflight, entries, execve, reads)" "$(moved "$RR")" ""
box run --driver-root "$H" --gpu 0 "$RR" probe status
expect_eq "run --gpu 0 of root's ROOTFS: exit 0" "$rc" 0
expect_eq "... no atime changed" "$(moved "$RR")" ""
box check --driver-root "$H" --gpu 0 "$RR" true
expect_eq "check of root's ROOTFS: no atime changed" "$(moved "$RR")" ""

# A ROOTFS with a mount below it is bound instead of overlaid.
if [ -n "${E2E_BOUND_ROOTFS:-}" ]; then
    untouched "run of a bound ROOTFS (a mount below it), --gpu 0" \
        "$E2E_BOUND_ROOTFS" run --driver-root "$H" --gpu 0 "$E2E_BOUND_ROOTFS" sh -c 'ls /usr/bin /mnt >/dev/null'
fi

# An image by name (pulled from a plain tar: no skopeo): its tree in the store, and the
# store's own files about it.
export GPUBOX_IMAGES=$WORK/store
tar -C "$R" -cf "$WORK/r.tar" .
box pull --name atime "tar:$WORK/r.tar"
expect_eq "pull tar: exit 0" "$rc" 0
untouched "run IMAGE: its rootfs and the store's records" "$GPUBOX_IMAGES" run atime true
untouched "run --gpu 0 IMAGE" "$GPUBOX_IMAGES" run --driver-root "$H" --gpu 0 atime true
untouched "check IMAGE" "$GPUBOX_IMAGES" check --driver-root "$H" --gpu 0 atime true
finish
