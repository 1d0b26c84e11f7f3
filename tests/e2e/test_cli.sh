#!/usr/bin/env bash
# The command line's traps, as a user meets them: every subcommand's --help, conflicting options,
# sizes without a unit, bwrap-style binds, the line a limit kill prints, the man page against
# --help, doctor's AppArmor report.
. "$(dirname "$0")/lib.sh"
R=$WORK/rootfs
make_rootfs "$R"
require_userns "$R"

# Every subcommand takes --help: exit 0, its usage on stdout, nothing on stderr.
for cmd in "run" "list" "doctor" "rootfs create" "rootfs"; do
    # shellcheck disable=SC2086
    box $cmd --help
    expect_eq "gpubox $cmd --help exits 0" "$rc:$err" "0:"
    expect_match "gpubox $cmd --help prints its usage" "$out" "^usage: gpubox $cmd"
done
box run --help
for opt in "--bind SRC:DST" "--memory-limit SIZE" "--gpu SPEC" "--quiet"; do
    expect_match "run --help lists $opt" "$out" "^  $opt "
done
box --help
expect_eq "gpubox --help exits 0" "$rc" 0
expect_match "gpubox --help lists the commands" "$out" '^  gpubox rootfs create '
expect_match "gpubox --help lists run's options" "$out" '^  --memory-limit SIZE '
box help run
expect_match "gpubox help run = gpubox run --help" "$rc:$out" "^0:usage: gpubox run"

# Conflicts: one line, exit 125.
box run --writable --read-only "$R" true
expect_eq "--writable --read-only -> 125" "$rc" 125
expect_eq "--writable --read-only: one line naming both" "$err" \
    "gpubox: run: --writable and --read-only contradict each other (choose one)"
box run --gpu none --gpu 0 "$R" true
expect_eq "--gpu none with another --gpu -> 125" "$rc" 125
expect_match "--gpu none conflict names both" "$err" '^gpubox: run: --gpu none contradicts --gpu 0$'

# A size needs a unit.
box run --memory-limit 256 "$R" true
expect_eq "--memory-limit 256 -> 125" "$rc" 125
expect_eq "a bare number suggests the unit" "$err" \
    "gpubox: --memory-limit 256: no unit; did you mean 256M? (units: B, K, M, G)"
# (Large enough for any sandbox: a tiny limit is a race with the sampler, not a parser test.)
M=$WORK/meta.json
box run --memory-limit 300000000B --meta "$M" "$R" true
expect_eq "an explicit B is bytes: the limit is 300000000, and the run goes on" "$rc:$(limit_value memory)" "0:300000000"

# --bind mistakes say what was meant.
box run --bind /tmp /mnt "$R" true
expect_eq "bwrap-style --bind SRC DST -> 125" "$rc" 125
expect_eq "bwrap-style --bind: says --bind SRC:DST" "$err" \
    "gpubox: run: --bind takes one argument SRC:DST: did you mean --bind /tmp:/mnt?"
box run --ro-bind /etc "$R" true
expect_eq "--ro-bind without a destination -> 125" "$rc" 125
expect_eq "--ro-bind without a destination: says SRC:DST" "$err" \
    "gpubox: run: --ro-bind /etc: no destination: did you mean --ro-bind /etc:/etc? (binds are recursive: mounts below /etc come too)"

# A limit kill prints one line, also without --meta; --quiet silences it; a clean run prints nothing.
box run --wall-time-limit 0.5 "$R" sleep 5
expect_eq "wall-time kill -> 137" "$rc" 137
expect_eq "wall-time kill: one line on stderr" "$err" "gpubox: killed: wall-clock limit 0.500 s exceeded"
box run --quiet --wall-time-limit 0.5 "$R" sleep 5
expect_eq "--quiet: the kill line is gone" "$rc:$err" "137:"
box run --stdout-limit 1K "$R" sh -c 'yes'
expect_match "output-limit kill: one line" "$rc:$err" '^137:gpubox: killed: stdout limit 1K exceeded$'
box run --wall-time-limit 5 "$R" true
expect_eq "no kill: stderr stays empty" "$rc:$err" "0:"

# The man page comes from the same table as --help.
box --man
expect_match "gpubox --man is a man page" "$rc:$out" '^0:\.TH GPUBOX 1'
man=$out
box run --help
missing=""
for opt in $(printf '%s\n' "$out" | grep -oE '^  --?[a-z-]+'); do
    printf '%s\n' "$man" | grep -qF -- "$(printf '%s' "$opt" | sed 's/-/\\-/g')" || missing="$missing $opt"
done
expect_eq "every run option of --help is in the man page" "$missing" ""
for section in SYNOPSIS COMMANDS "EXIT STATUS" ENVIRONMENT FILES EXAMPLES; do
    expect_match "man page has $section" "$man" "^\\.SH \"?$section"
done

# doctor says where AppArmor stands.
box doctor
expect_match "doctor reports AppArmor's user namespace restriction" "$out" '^(ok|PROBLEM|info) +AppArmor'

finish
