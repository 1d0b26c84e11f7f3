#!/usr/bin/env bash
# gpubox under a real Slurm (Debian 12's slurm-wlm 22.05), one node, started here as root with
# its own munged, ports, state and config in a temp dir; jobs are submitted as uid 65534.
# gres.conf names a simulated GPU host's /dev/nvidia[0-3] (minors out of PCI order), and
# task/cgroup with ConstrainDevices=yes (cgroup v1 devices) fences each job to its own.
# Checks: --gpu slurm in sbatch arrays and srun steps, no-GPU jobs, the device cgroup check,
# scancel and time limits (SIGTERM forwarded, --meta written, nothing left), --die-with-parent,
# and --gpu auto leases (not Slurm's: 6 sandboxes on 4 GPUs, kill -9, --gpu-share).
export E2E_AS_ROOT=1
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/slurm_lib.sh"

# --- the time limit job first: it takes a minute ---
# Slurm signals every process of the step itself, the sandbox's too. The workload's sleep
# ignores SIGTERM: were it killed first, the shell's `wait` would return 0 and the shell end
# before its own SIGTERM came (seen once in CI), and the test would not see the trap run.
cat >"$J/limit.sh" <<EOF
#!/bin/bash
exec $G run --meta $J/limit.json --kill-after 2 $R sh -c 'trap "echo got-TERM; exit 9" TERM; echo started; (trap "" TERM; exec sleep ${S}10) & wait'
EOF
limit_id=$(as_nobody sbatch --parsable --time=1 -o "$J/limit.out" "$J/limit.sh")

# --- an array of one-GPU jobs: each sees exactly the GPU whose minor Slurm gave it ---
cat >"$J/one.sh" <<EOF
#!/bin/bash
echo "gpus=\$SLURM_JOB_GPUS"
$G run --driver-root $H --gpu slurm $R nvidia-smi -L
echo "rc=\$?"
sleep 1
EOF
as_nobody sbatch --parsable --array=0-7 --gres=gpu:1 -o "$J/one-%a.out" "$J/one.sh" >/dev/null
check "the array's 8 tasks finish" wait_jobs 180
bad=""
for a in $(seq 0 7); do
    f=$J/one-$a.out
    m=$(sed -n 's/^gpus=//p' "$f")
    lines=$(grep -c '^GPU ' "$f")
    [ -n "$m" ] && grep -q "^rc=0" "$f" && [ "$lines" = 1 ] && grep -q "UUID: ${UUID_OF[$m]})" "$f" || bad+="task $a: $(tr '\n' '|' <"$f") "
done
expect_eq "every array task sees exactly the GPU of the minor in SLURM_JOB_GPUS" "$bad" ""

# --- srun steps ---
out=$(as_nobody srun --gres=gpu:2 bash -c 'echo "gpus=$SLURM_STEP_GPUS"; '"$G"' run --driver-root '"$H"' --gpu slurm '"$R"' nvidia-smi -L' 2>&1)
m=$(sed -n 's/^gpus=//p' <<<"$out")
want=""
for x in ${m//,/ }; do want+="${UUID_OF[$x]} "; done
got=$(grep -o 'GPU-[0-9a-f-]*' <<<"$out" | sort | tr '\n' ' ')
expect_eq "srun --gres=gpu:2 sees both of its GPUs ($m)" "$got" "$(tr ' ' '\n' <<<"$want" | grep . | sort | tr '\n' ' ')"
out=$(as_nobody srun bash -c "$G run --driver-root $H --gpu slurm $R true; echo rc=\$?" 2>&1)
expect_match "a job with no GPU: exit 125 and why" "$out" '^gpubox: --gpu slurm: Slurm job [0-9]+ has no GPU on this node'
expect_match "... exit status 125" "$out" '^rc=125$'
out=$("${NOBODY[@]}" "$G" run --driver-root "$H" --gpu slurm "$R" true 2>&1; echo "rc=$?")
expect_match "outside Slurm: exit 125 and why" "$out" '^gpubox: --gpu slurm: not in a Slurm allocation'
if [ $cgv1 = 1 ]; then
    out=$(as_nobody srun --gres=gpu:1 bash -c "echo gpus=\$SLURM_STEP_GPUS; $G run --driver-root $H --gpu all $R true; echo rc=\$?" 2>&1)
    expect_match "ConstrainDevices: a GPU outside the step is refused before launch, naming the cgroup" "$out" \
        'the device cgroup "[0-9]+:devices:/slurm[^"]*" refuses /dev/nvidia[0-9]'
    expect_match "... exit status 125" "$out" '^rc=125$'
else
    must_work && not_ok "cgroup v1 devices controller missing" || echo "# skip ConstrainDevices: no cgroup v1 devices controller"
fi

# --- scancel: the workload gets SIGTERM, the meta file is written, nothing is left ---
submit_and_cancel() {  # NAME SCRIPT-BODY
    printf '#!/bin/bash\n%s\n' "$2" >"$J/$1.sh"
    local id
    id=$(as_nobody sbatch --parsable -o "$J/$1.out" "$J/$1.sh")
    wait_until 120 grep -qs started "$J/$1.out"
    scancel "$id"
    wait_until 120 job_gone "$id"
}
M=$J/cancel.json
submit_and_cancel cancel "exec $G run --meta $M $R sh -c 'trap \"echo got-TERM; exit 7\" TERM; echo started; (trap \"\" TERM; exec sleep ${S}11) & wait'"
expect_match "scancel: the workload got SIGTERM" "$(cat "$J/cancel.out")" '^got-TERM$'
expect_eq "scancel: --meta says terminated by SIGTERM" "$(field status):$(field terminated):$(field exit_code)" "RE:SIGTERM:7"
expect_eq "scancel: nothing left running" "$(left "sleep ${S}11")" ""

M=$J/ignore.json
submit_and_cancel ignore "exec $G run --meta $M --kill-after 2 $R sh -c 'trap \"\" TERM; echo started; exec sleep ${S}12'"
expect_eq "a workload that ignores SIGTERM is killed after --kill-after" "$(field status):$(field terminated):$(field killed)" "SG:SIGTERM:true"
expect_eq "... nothing left running" "$(left "sleep ${S}12")" ""

M=$J/child.json
submit_and_cancel child "$G run --die-with-parent --kill-after 60 --meta $M $R sh -c 'trap \"\" TERM; echo started; exec sleep ${S}13'; echo after"
wait_until 60 test -s "$M"
expect_match "gpubox as a plain child with --die-with-parent: the meta file is written" "$(field terminated)" '^(parent_died|SIGTERM)$'
expect_eq "... nothing left running (before KillWait's SIGKILL)" "$(left "sleep ${S}13")" ""

# --- GPU leases without a scheduler ---
export GPUBOX_LEASE_DIR=$T/leases
mkdir -m 1777 "$T/leases" "$T/auto"
# box, as uid 65534 (sets $rc, $out, $err)
box() { "${NOBODY[@]}" env GPUBOX_LEASE_DIR="$GPUBOX_LEASE_DIR" "$G" "$@" >"$WORK/.out" 2>"$WORK/.err"; rc=$?; out=$(cat "$WORK/.out"); err=$(cat "$WORK/.err"); }
for i in 1 2 3 4 5 6; do
    "${NOBODY[@]}" env GPUBOX_LEASE_DIR="$GPUBOX_LEASE_DIR" "$G" run --driver-root "$H" --gpu auto --gpu-wait 120 \
        --bind "$T/auto:/auto" "$R" sh -c 'u=$(nvidia-smi -L | grep -o "GPU-[0-9a-f-]*"); set -C; : >/auto/$u || echo COLLISION; sleep 1; rm /auto/$u; echo $u' \
        >"$T/auto/run$i.out" 2>&1 &
done
wait
expect_eq "--gpu auto: 6 sandboxes on 4 GPUs, each got one, never two on one GPU" \
    "$(cat "$T"/auto/run*.out | grep -c '^GPU-'):$(cat "$T"/auto/run*.out | grep -c COLLISION)" "6:0"
"${NOBODY[@]}" env GPUBOX_LEASE_DIR="$GPUBOX_LEASE_DIR" "$G" run --driver-root "$H" --gpu auto:4 "$R" sleep ${S}14 &
gp=$!
# leases KIND N: N lease lines of that kind in gpubox list (one per holder and GPU)
leases() { [ "$("$G" list --driver-root "$H" | grep -c "  $1  pid")" = "$2" ]; }
wait_until 60 leases exclusive 4
listed=$("$G" list --driver-root "$H")
expect_match "gpubox list shows the holder of each lease" "$listed" '^[0-3]  exclusive  pid [0-9]+  uid 65534  '
box run --driver-root "$H" --gpu auto "$R" true
expect_match "while all 4 are held, --gpu auto fails at once, naming holders" "$rc:$err" '^125:gpubox: --gpu auto:1: only 0 of 4 GPUs free in .*exclusive, pid [0-9]+ uid 65534'
kill -9 "$gp"; wait "$gp" 2>/dev/null
box run --driver-root "$H" --gpu auto:4 "$R" nvidia-smi -L
expect_eq "after kill -9 of the holder, all 4 are free again" "$rc:$(grep -c '^GPU ' <<<"$out")" "0:4"
expect_eq "... and its sandbox is gone" "$(left "sleep ${S}14")" ""
share() { exec "${NOBODY[@]}" env GPUBOX_LEASE_DIR="$GPUBOX_LEASE_DIR" "$G" run --driver-root "$H" --gpu auto:4 --gpu-share "$R" "$@"; }
# The holders hold until they are told to go (SIGTERM to gpubox, forwarded), not for a time.
share sleep ${S}15 & s1=$!
share sleep ${S}15 & s2=$!
wait_until 60 leases shared 8 || not_ok "(the two sharers did not get their leases)"
box run --driver-root "$H" --gpu auto:4 --gpu-share "$R" true
expect_eq "--gpu-share: a third sharer joins two" "$rc" 0
box run --driver-root "$H" --gpu auto "$R" true
expect_match "an exclusive lease fails while sharers run" "$rc:$err" '^125:.*shared, pid'
"${NOBODY[@]}" env GPUBOX_LEASE_DIR="$GPUBOX_LEASE_DIR" "$G" run --driver-root "$H" --gpu auto --gpu-wait 120 "$R" true &
waiter=$!
sleep 1  # (started later than the sharers end, it would pass without waiting: never falsely)
kill -TERM "$s1" "$s2"
wait "$waiter"
expect_eq "... and with --gpu-wait gets one once they are gone" "$?" 0
wait "$s1" "$s2"
"${NOBODY[@]}" env GPUBOX_LEASE_DIR="$GPUBOX_LEASE_DIR" "$G" run --driver-root "$H" --gpu auto:4 "$R" sleep ${S}16 &
ex=$!
wait_until 60 leases exclusive 4 || not_ok "(the exclusive holder did not get its leases)"
box run --driver-root "$H" --gpu auto --gpu-share "$R" true
expect_match "a sharer fails while an exclusive lease is held" "$rc:$err" '^125:.*exclusive, pid'
kill -TERM "$ex"
wait "$ex"

# --- the time limit job, submitted first ---
wait_until 300 job_gone "$limit_id"
M=$J/limit.json
expect_match "job time limit: the workload got SIGTERM" "$(cat "$J/limit.out" 2>/dev/null)" '^got-TERM$'
expect_eq "job time limit: --meta says terminated by SIGTERM" "$(field status):$(field terminated):$(field exit_code)" "RE:SIGTERM:9"
expect_eq "job time limit: nothing left running" "$(left "sleep ${S}10")" ""
finish
