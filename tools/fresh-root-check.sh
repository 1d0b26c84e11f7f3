#!/usr/bin/env bash
# Usage: tools/fresh-root-check.sh [--commit REV] [--checkout DIR] [--logs DIR] [--mirror URL]
#
# README's two commands, as a new user runs them: in a fresh `mmdebstrap --variant=minbase
# bookworm` root, as root, on a clone of this repository at REV (default: HEAD of the checkout
# this script is in; committed work only) in DIR (default /root/gpubox; /root is mode 0700),
#     bash examples/quickstart.sh
#     bash tests/run-all.sh
# each in a clean environment with stdin from /dev/null. Prints each command's closing lines,
# exit status, wall time and the load average before and after; exits 0 when both pass.
# --logs DIR keeps both commands' whole output there, and ctest's LastTest.log. Needs root,
# mmdebstrap, unshare and Debian's package archive (this machine's apt mirror, or --mirror).
#
# The root is entered with unshare (new mount, pid, uts and ipc namespaces; the host's network)
# and pivot_root, NOT chroot: the kernel refuses user namespaces to a chrooted process
# (CLONE_NEWUSER fails with EPERM when the caller's root is not its mount namespace's root), and
# gpubox is made of user namespaces. The root gets a fresh /proc and /sys, the host's /dev (kvm,
# fuse, net/tun, pts), the host's cgroup hierarchies, a tmpfs /run and the host's resolv.conf;
# nothing of the host is left in it after pivot_root. git is not installed in it: the clone is
# made from outside, so the project's own files must install every tool its scripts call.
#
# The whole run, host side included, lives in a cgroup of its own in each hierarchy (below this
# script's), so that every process of it can be killed and every cgroup it made removed. Cleanup
# (normal end, error, Ctrl-C, SIGTERM, SIGHUP): kill the run's processes, then remove its cgroups
# and the root (its mounts belong to the namespace and die with it).
set -euo pipefail
# (All in main: bash reads a script as it runs it, and the run is long enough to edit this file.)
# shellcheck disable=SC2317  # (cleanup and what it calls run from traps)
main() {
    usage() { sed -n 's/^# Usage: /usage: /p' "$0" >&2; exit 2; }

    src=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && git rev-parse --show-toplevel)
    rev=HEAD checkout=/root/gpubox logs='' mirror=${GPUBOX_FRESH_MIRROR:-}
    while [ $# -gt 0 ]; do
        case $1 in
            --commit) rev=${2:?}; shift 2 ;;
            --checkout) checkout=${2:?}; shift 2 ;;
            --logs) logs=${2:?}; shift 2 ;;
            --mirror) mirror=${2:?}; shift 2 ;;
            -h | --help) usage ;;
            *) echo "fresh-root-check: unknown argument '$1'" >&2; usage ;;
        esac
    done
    case $checkout in /*) ;; *) echo "fresh-root-check: --checkout needs an absolute path" >&2; exit 2 ;; esac
    [ "$(id -u)" = 0 ] || { echo "fresh-root-check: needs root (mmdebstrap, namespaces, mounts)" >&2; exit 2; }
    for t in mmdebstrap unshare git findmnt; do
        command -v "$t" >/dev/null || { echo "fresh-root-check: needs $t" >&2; exit 2; }
    done
    commit=$(git -C "$src" rev-parse --verify "$rev^{commit}")

    # The Debian entries of this machine's apt sources (one-line and deb822), as one-line entries.
    apt_sources() {
        local f
        for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
            [ -f "$f" ] && awk '$1 == "deb" && $0 !~ /\[/ && $3 ~ /^bookworm/' "$f"
        done
        for f in /etc/apt/sources.list.d/*.sources; do
            [ -f "$f" ] && awk 'BEGIN { RS = ""; FS = "\n" }
                { t = u = s = c = ""
                  for (i = 1; i <= NF; i++) {
                      if ($i ~ /^Types:/) t = $i; else if ($i ~ /^URIs:/) u = $i
                      else if ($i ~ /^Suites:/) s = $i; else if ($i ~ /^Components:/) c = $i
                  }
                  if (t !~ /(^|[ \t])deb([ \t]|$)/) next
                  sub(/^URIs:[ \t]*/, "", u); sub(/^Suites:[ \t]*/, "", s); sub(/^Components:[ \t]*/, "", c)
                  split(u, us, /[ \t]+/); n = split(s, ss, /[ \t]+/)
                  for (i = 1; i <= n; i++) if (ss[i] ~ /^bookworm/) print "deb " us[1] " " ss[i] " " c }' "$f"
        done
    }
    if [ -n "$mirror" ]; then
        sources=("deb $mirror bookworm main")
    else
        mapfile -t sources < <(apt_sources | sort -u)
        [ ${#sources[@]} -gt 0 ] || { echo "fresh-root-check: no bookworm entry in /etc/apt/sources.list*; give --mirror URL" >&2; exit 2; }
    fi

    say() { printf '[fresh-root %s] %s\n' "$(date +%T)" "$*"; }
    hostload() { cut -d' ' -f1-3 /proc/loadavg; }

    work=$(mktemp -d "${TMPDIR:-/var/tmp}/gpubox-fresh-root.XXXXXX")
    root=$work/root
    cg_dirs=() unshare_pid='' status=1

    # Each hierarchy's mount point and this process's cgroup in it; not cpuset (a new v1 cpuset
    # group takes no process until its cpus and mems are set, and it limits nothing here).
    cgroup_places() {
        local line id ctl path mnt
        while IFS= read -r line; do
            id=${line%%:*} line=${line#*:} ctl=${line%%:*} path=${line#*:}
            [ "$ctl" = cpuset ] && continue
            if [ "$id" = 0 ]; then
                mnt=$(findmnt -rn -t cgroup2 -o TARGET | head -1)
            else
                mnt=$(awk -v c="$ctl" '{ for (i = 7; i < NF; i++) if ($i == "-") break
                        if ($(i + 1) != "cgroup") next; n = split($(i + 3), o, ",")
                        for (j = 1; j <= n; j++) if (o[j] == c) { print $5; exit } }' /proc/self/mountinfo)
                [ -n "$mnt" ] || { [[ $ctl == *,* ]] && mnt=$(findmnt -rn -t cgroup -o TARGET,OPTIONS |
                    awk -v c="$ctl" '{ n = split(c, w, ","); for (j = 1; j <= n; j++) if ($2 !~ "(^|,)" w[j] "(,|$)") next; print $1; exit }'); }
            fi
            [ -n "$mnt" ] && [ -d "$mnt$path" ] && printf '%s\n' "${mnt}${path%/}"
        done </proc/self/cgroup
    }
    enter_cgroups() {
        local base
        while IFS= read -r base; do
            mkdir "$base/gpubox-fresh-root-$$" 2>/dev/null || continue
            cg_dirs+=("$base/gpubox-fresh-root-$$")
            echo $$ >"$base/gpubox-fresh-root-$$/cgroup.procs" || true
        done < <(cgroup_places)
    }
    # Kill everything the run started (cgroup.kill on v2 where it exists, else each process), wait
    # until it is gone, then remove the run's cgroups, deepest first.
    leave_cgroups() {
        local d pids
        for d in "${cg_dirs[@]}"; do echo $$ >"${d%/*}/cgroup.procs" 2>/dev/null || true; done
        for _ in $(seq 100); do
            pids=$(for d in "${cg_dirs[@]}"; do find "$d" -name cgroup.procs -exec cat {} + 2>/dev/null; done | sort -u)
            [ -z "$pids" ] && break
            for d in "${cg_dirs[@]}"; do [ -e "$d/cgroup.kill" ] && echo 1 >"$d/cgroup.kill" 2>/dev/null; done
            # shellcheck disable=SC2086
            kill -KILL $pids 2>/dev/null
            sleep 0.2
        done
        [ -z "$pids" ] || say "WARNING: processes left in the run's cgroups: $pids"
        for d in "${cg_dirs[@]}"; do
            [ -d "$d" ] && find "$d" -depth -type d -exec rmdir {} + 2>/dev/null
            [ ! -d "$d" ] || say "WARNING: cannot remove cgroup $d"
        done
    }
    cleanup() {
        set +e  # every step, whatever the one before did
        trap - EXIT INT TERM HUP
        # unshare --fork ignores SIGTERM and SIGINT while it waits; killed, it takes the namespace's
        # pid 1 with it (--kill-child), and with that every process of the namespace.
        if [ -n "$unshare_pid" ]; then kill -KILL "$unshare_pid" 2>/dev/null; wait "$unshare_pid" 2>/dev/null; fi
        leave_cgroups
        if [ -n "$logs" ] && [ -d "$root/var/log/gpubox-fresh" ]; then
            mkdir -p "$logs" && cp "$root"/var/log/gpubox-fresh/*.log "$logs/" 2>/dev/null && say "logs: $logs"
        fi
        # The root's mounts lived in the run's mount namespace, gone with its last process; never
        # cross into a mount that is somehow still there.
        if findmnt -rn -o TARGET | grep -q "^$work/"; then
            say "WARNING: mounts still below $work; not removing it"
        else
            rm -rf --one-file-system "$work"
        fi
        say "cleaned up; exit $status"
        exit "$status"
    }
    trap cleanup EXIT
    trap 'say "interrupted"; status=130; exit 130' INT
    trap 'say "terminated"; status=143; exit 143' TERM HUP
    enter_cgroups

    say "host: $(nproc) CPUs, load $(hostload); $(uptime)"
    say "commit $commit of $src; checkout $checkout; apt sources: ${sources[*]}"
    t0=$(date +%s)
    # In a mount namespace of its own, so that the mounts it makes in the root die with it, and
    # in the background, so that a signal is handled at once (bash runs no trap while it waits
    # for a command in the foreground); cleanup kills it with the rest of the run's cgroups.
    unshare --mount --propagation private \
        mmdebstrap --quiet --variant=minbase bookworm "$root" "${sources[@]}" >"$work/mmdebstrap.log" 2>&1 &
    wait $! || { tail -20 "$work/mmdebstrap.log"; say "mmdebstrap failed"; exit 1; }
    say "fresh minbase root made in $(($(date +%s) - t0)) s"
    cp /etc/resolv.conf "$root/etc/resolv.conf"
    chmod 0700 "$root/root"
    mkdir -p "$root$(dirname "$checkout")" "$root/.oldroot" "$root/var/log/gpubox-fresh"
    git clone -q --no-hardlinks "$src" "$root$checkout"
    git -C "$root$checkout" -c advice.detachedHead=false checkout -q "$commit"
    git -C "$root$checkout" remote remove origin

    # In the new namespaces, as their pid 1, with the host's tools until pivot_root.
    # shellcheck disable=SC2016
    setup='set -e
    root=$1
    mount --bind "$root" "$root"
    mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
    mount -t sysfs -o nosuid,nodev,noexec sysfs "$root/sys"
    mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup"
    mount --rbind /dev "$root/dev"
    mount -t tmpfs -o nosuid,nodev,mode=0755 tmpfs "$root/run"
    cd "$root"
    pivot_root . .oldroot
    exec /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
        HOME=/root USER=root LOGNAME=root SHELL=/bin/bash /bin/bash -c "$2" inner "$3"'
    # In the fresh root: README's two commands, exactly as written, each in a clean shell.
    # shellcheck disable=SC2016
    inner='set -u
    umount -l /.oldroot && rmdir /.oldroot
    cd "$1"
    load() { cut -d" " -f1-3 /proc/loadavg; }
    failed=0
    for cmd in "bash examples/quickstart.sh" "bash tests/run-all.sh"; do
        name=${cmd##*/}; name=${name%.sh}
        echo "[fresh-root $(date +%T)] \$ $cmd   (in $PWD; load $(load))"
        l0=$(load) t0=$(date +%s)
        bash -c "$cmd" </dev/null >"/var/log/gpubox-fresh/$name.log" 2>&1
        rc=$? t=$(($(date +%s) - t0))
        echo "[fresh-root $(date +%T)] $cmd: exit $rc, wall ${t} s ($((t / 60))m$((t % 60))s), load before $l0, after $(load)"
        if [ -f build/Testing/Temporary/LastTest.log ]; then  # each test'"'"'s verdict and time, and its whole output
            cp build/Testing/Temporary/LastTest.log /var/log/gpubox-fresh/ctest.log
            grep -E "^ *[0-9]+/[0-9]+ Test +#" "/var/log/gpubox-fresh/$name.log" | sed "s/^/    /"
        fi
        echo "[fresh-root] its last 25 lines:"
        tail -25 "/var/log/gpubox-fresh/$name.log" | sed "s/^/    /"
        [ "$rc" = 0 ] || failed=1
    done
    exit $failed'
    unshare --mount --pid --uts --ipc --fork --kill-child --propagation private \
        bash -c "$setup" setup "$root" "$inner" "$checkout" &
    unshare_pid=$!
    wait "$unshare_pid" && status=0 || status=$?
    unshare_pid=
    say "host after: load $(hostload); $(uptime); total $(($(date +%s) - t0)) s"
    if [ "$status" = 0 ]; then say "PASS: both README commands passed"; else say "FAIL: exit $status"; fi
}
main "$@"; exit  # (one line: read whole before main runs, nothing after it is read)
