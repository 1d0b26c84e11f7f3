#!/usr/bin/env bash
# Start-to-exit of /bin/true: gpubox vs bubblewrap with the same rootfs, /proc, /dev and tmpfs
# setup, the `unshare` floor, and gpubox --gpu 0 on a simulated 8-GPU host vs bwrap given the
# same binds by hand. Medians over RUNS runs (default 300), side by side in one run.
# BENCH_BASELINE=/path/to/older/gpubox adds before/after rows for that binary, same run.
. "$(dirname "$0")/common.sh"
bench_setup "$@"
R=$OUTDIR/rootfs
"$GPUBOX" rootfs create "$R" >/dev/null
# BENCH_DRIVER_ROOT=/ measures a real GPU node's driver instead of the simulated host.
H=${BENCH_DRIVER_ROOT:-$W/host8}
host_name=${BENCH_DRIVER_ROOT:+driver under $BENCH_DRIVER_ROOT}
host_name=${host_name:-simulated 8-GPU host}

bwrap_base=(bwrap --unshare-all --die-with-parent --new-session --ro-bind "$R" / --proc /proc
            --dev /dev --tmpfs /tmp --tmpfs /run)
# The GPU binds gpubox makes, by hand: every step --gpu 0 adds to gpubox's own plan, as bwrap
# options. bwrap cannot create mount points in a read-only root, so what gpubox puts in the
# image's directories goes to a side directory; gpubox's generated files (the procfs copies, its
# ld.so.cache) become binds of the host's (of an empty stand-in where the host has none).
side() { case $1 in /dev/* | /proc/driver/* | /run/*) echo "$1" ;; *) echo "/run/nvidia/${1##*/}" ;; esac; }
steps() { "$GPUBOX" run --print-plan "$@" "$R" true | sed -n 's/^mount [0-9]*\/[0-9]*: //p'; }
gpu_steps=$({ diff <(steps) <(steps --driver-root "$H" --gpu 0) || true; } | sed -n 's/^> //p')
bwrap_gpu=("${bwrap_base[@]}")
while read -r kind a _ b _; do
    case $kind in
        bind-dev) bwrap_gpu+=(--dev-bind "$a" "$b") ;;
        ro-bind) bwrap_gpu+=(--ro-bind "$a" "$(side "$b")") ;;
        bind) bwrap_gpu+=(--bind "$a" "$(side "$b")") ;;
        symlink) bwrap_gpu+=(--symlink "$b" "$(side "$a")") ;;
        tmpfs) bwrap_gpu+=(--tmpfs "$a") ;;
        mkdir) bwrap_gpu+=(--dir "$a") ;;
        file) src=$H$a
              # a file gpubox writes with no host original (OpenCL's vendor file): a stand-in
              [ -e "$src" ] || { src=$OUTDIR/standin-${a##*/} && : >"$src"; }
              bwrap_gpu+=(--ro-bind "$src" "$(side "$a")") ;;
        *) echo "bench: no bwrap equivalent for GPU step: $kind $a" >&2; exit 1 ;;
    esac
done <<<"$gpu_steps"

echo "machine: $(nproc) cores, $(uname -r); gpubox $("$GPUBOX" --version | cut -d' ' -f2), $(bwrap --version), $(hyperfine --version)"
echo "measured as uid $(id -u); median of ${RUNS:-300} runs each, milliseconds"
echo "--gpu 0 adds $(grep -c . <<<"$gpu_steps") mount steps ($(grep -c 'bind' <<<"$gpu_steps") binds); bwrap gets the same"
mapfile -t t < <(measure "unshare -Urmpf --mount-proc /bin/true" "${bwrap_base[*]} /bin/true" \
    "$GPUBOX run $R /bin/true" "$GPUBOX run --driver-root $H --gpu 0 $R /bin/true" "${bwrap_gpu[*]} /bin/true")
printf '%-58s %8s\n' "command" "median"
printf '%-58s %8s\n' "unshare -Urmpf --mount-proc (floor)" "${t[0]}"
printf '%-58s %8s\n' "bwrap --unshare-all ... (no GPU)" "${t[1]}"
printf '%-58s %8s\n' "gpubox run (no GPU)" "${t[2]}"
printf '%-58s %8s\n' "gpubox run --gpu 0 ($host_name)" "${t[3]}"
printf '%-58s %8s\n' "bwrap with the same GPU binds by hand" "${t[4]}"
echo "ratio gpubox / bwrap (no GPU):              $(ratio "${t[2]}" "${t[1]}")"
echo "ratio gpubox --gpu 0 / bwrap GPU binds:     $(ratio "${t[3]}" "${t[4]}")"
echo "GPU discovery + injection added:            $(awk -v a="${t[3]}" -v b="${t[2]}" 'BEGIN { printf "%.3f ms", a - b }') (this run)"
# The same difference from runs interleaved one by one (without, with, without, ...), so that
# the VM's drift over seconds lands on both sides alike: the median of 400 paired differences.
read -r _ _ d q1 q3 < <(pairs 400 -- "$GPUBOX" run "$R" /bin/true -- "$GPUBOX" run --driver-root "$H" --gpu 0 "$R" /bin/true)
echo "GPU added, 400 interleaved pairs:            $d ms median (quartiles $q1 to $q3)"
# On one CPU (a Slurm task with one core), discovery cannot run beside init.
read -r _ _ d q1 q3 < <(pairs 200 -- taskset -c 0 "$GPUBOX" run "$R" /bin/true -- \
    taskset -c 0 "$GPUBOX" run --driver-root "$H" --gpu 0 "$R" /bin/true)
echo "GPU added on one CPU (taskset -c 0), 200 pairs: $d ms median (quartiles $q1 to $q3)"
echo "sequential runs/s over 300: gpubox $(runs_per_second 300 "$GPUBOX" run "$R" /bin/true)," \
     "bwrap $(runs_per_second 300 "${bwrap_base[@]}" /bin/true)"
echo "peak RSS (KiB, GNU time): gpubox $(/usr/bin/time -f %M "$GPUBOX" run "$R" /bin/true 2>&1 >/dev/null | tail -1)," \
     "gpubox --gpu 0 $(/usr/bin/time -f %M "$GPUBOX" run --driver-root "$H" --gpu 0 "$R" /bin/true 2>&1 >/dev/null | tail -1)," \
     "bwrap $(/usr/bin/time -f %M "${bwrap_base[@]}" /bin/true 2>&1 >/dev/null | tail -1)"

# Before/after: BENCH_BASELINE's gpubox (bench/common.sh) against this build, same run, same
# rootfs and host: medians side by side, each one's ratio to bwrap, and interleaved pairs.
if [ -x "$W/gpubox-baseline" ]; then
    B=$W/gpubox-baseline
    mapfile -t t < <(measure "${bwrap_base[*]} /bin/true" "$B run $R /bin/true" "$GPUBOX run $R /bin/true" \
        "$B run --driver-root $H --gpu 0 $R /bin/true" "$GPUBOX run --driver-root $H --gpu 0 $R /bin/true")
    echo "baseline $("$B" --version | cut -d' ' -f2) vs this build:"
    echo "  gpubox run (no GPU):      ${t[1]} vs ${t[2]} ms; / bwrap ${t[0]}: $(ratio "${t[1]}" "${t[0]}") vs $(ratio "${t[2]}" "${t[0]}")"
    echo "  gpubox run --gpu 0:       ${t[3]} vs ${t[4]} ms; GPU added $(awk -v a="${t[3]}" -v b="${t[1]}" 'BEGIN { printf "%.3f", a - b }') vs $(awk -v a="${t[4]}" -v b="${t[2]}" 'BEGIN { printf "%.3f", a - b }') ms"
    read -r _ _ d q1 q3 < <(pairs 400 -- "$B" run "$R" /bin/true -- "$GPUBOX" run "$R" /bin/true)
    echo "  this build - baseline, 400 pairs, no GPU:   $d ms median (quartiles $q1 to $q3)"
    read -r _ _ d q1 q3 < <(pairs 400 -- "$B" run --driver-root "$H" --gpu 0 "$R" /bin/true -- \
        "$GPUBOX" run --driver-root "$H" --gpu 0 "$R" /bin/true)
    echo "  this build - baseline, 400 pairs, --gpu 0:  $d ms median (quartiles $q1 to $q3)"
fi

# Discovery must not grow with the host filesystem: the same host with 20000 unrelated files
# beside the driver's libraries and 5000 more libraries in its ld.so.cache, interleaved with the
# plain one.
[ -n "${BENCH_DRIVER_ROOT:-}" ] && exit 0
read -r a b _ < <(pairs 200 -- "$GPUBOX" run --driver-root "$H" --gpu 0 "$R" /bin/true -- \
    "$GPUBOX" run --driver-root "$W/host8big" --gpu 0 "$R" /bin/true)
echo "host with 20000 extra files and 5000 extra ld.so.cache entries: $b ms vs $a ms (ratio $(ratio "$b" "$a"))"
