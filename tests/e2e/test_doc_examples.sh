#!/usr/bin/env bash
# The documentation's examples cannot rot: every shell example in README.md and docs/*.md is
# marked on the line before its fence, `<!-- example: run -->` or `<!-- example: not run:
# REASON -->` (tests/e2e/doc_examples.py reads them; an unmarked one fails here). Each one to be
# run runs here as its text stands, with bash -e -o pipefail, as uid 65534, in a new directory
# of its own holding what the examples name as a user's files would be (in.txt, app.tar: a
# docker-archive of a small rootfs, a.out: a program that copies stdin to stdout), with a HOME
# of its own (~/bin on PATH), XDG_RUNTIME_DIR and GPU lease directory (other tests lease the
# same simulated GPUs). The simulated GPU host stands in for the host's driver: `gpubox` on
# PATH is a wrapper that adds `--driver-root HOST` to run, list, doctor, check and cdi
# generate, and nothing else. A failing example is reported with its file and the line of the
# command that failed, and its output. docs/testing.md says how to write one.
E2E_FAKE_HOSTS=1
. "$(dirname "$0")/lib.sh"
[ -n "${E2E_HOST:-}" ] || skip "the simulated GPU host is built as root (run the suite as root; it drops privileges)"
# The documentation: lib.sh's copy when it dropped privileges, else the checkout's.
DOCS=$E2E_DIR/doc-src
[ -f "$DOCS/README.md" ] || DOCS=$(cd "$E2E_DIR/../.." && pwd)
[ -f "$DOCS/README.md" ] && [ -d "$DOCS/docs" ] || { echo "Bail out! no README.md and docs/ to read"; exit 1; }

# What the examples find on PATH: the wrapper, as `gpubox`.
real=$(cd "$(dirname "$GPUBOX")" && pwd)/$(basename "$GPUBOX")
mkdir "$WORK/bin"
cat >"$WORK/bin/gpubox" <<EOF
#!/bin/bash
# The simulated GPU host as the host's driver, for the commands that read one.
case \${0##*/}:\${1:-}:\${2:-} in
gpubox:run:* | gpubox:list:* | gpubox:doctor:* | gpubox:check:*) c=\$1; shift; exec -a "\$0" "$real" "\$c" --driver-root "$E2E_HOST" "\$@" ;;
gpubox:cdi:generate) shift 2; exec -a "\$0" "$real" cdi generate --driver-root "$E2E_HOST" "\$@" ;;
esac
exec -a "\$0" "$real" "\$@"
EOF
chmod 0755 "$WORK/bin/gpubox"

# The files the examples name, as a user would have them.
F=$WORK/files
mkdir "$F"
printf 'pear\napple\nfig\n' >"$F/in.txt"
install -m 0755 "$(command -v cat)" "$F/a.out"
"$GPUBOX" rootfs create "$WORK/app-rootfs" >/dev/null || { echo "Bail out! rootfs create failed"; exit 1; }
require_userns "$WORK/app-rootfs"
# app.tar: docker save's format (manifest.json, the config, one layer) of that rootfs.
python3 - "$WORK/app-rootfs" "$F/app.tar" <<'EOF' || { echo "Bail out! cannot write app.tar"; exit 1; }
import hashlib, io, json, sys, tarfile
root, out = sys.argv[1], sys.argv[2]
buf = io.BytesIO()
with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
    t.add(root, arcname=".")
layer = buf.getvalue()
diff = "sha256:" + hashlib.sha256(layer).hexdigest()
config = json.dumps({"architecture": "amd64", "os": "linux",
                     "config": {"Env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                                "WorkingDir": "/", "Cmd": ["sh"]},
                     "rootfs": {"type": "layers", "diff_ids": [diff]}}).encode()
cname = hashlib.sha256(config).hexdigest() + ".json"
manifest = json.dumps([{"Config": cname, "RepoTags": ["app:latest"], "Layers": ["layer.tar"]}]).encode()
with tarfile.open(out, "w") as t:
    for name, data in (("manifest.json", manifest), (cname, config), ("layer.tar", layer)):
        i = tarfile.TarInfo(name)
        i.size = len(data)
        t.addfile(i, io.BytesIO(data))
EOF

X=$WORK/examples
mkdir "$X"
python3 "$E2E_DIR/doc_examples.py" "$DOCS" "$X" >"$WORK/list" || { echo "Bail out! doc_examples.py failed"; exit 1; }
ran=0 skipped=0
while IFS=$'\t' read -r kind a b c; do
    case $kind in
    error) not_ok "$a:$b: $c" ;;
    skip) skipped=$((skipped + 1)); echo "# not run: $a:$b: $c" ;;
    run)
        ran=$((ran + 1))
        num=$a file=$b first=$c
        d=$WORK/run-$num
        mkdir -p "$d/home/bin" "$d/run" "$d/leases" && chmod 0700 "$d/run" && cp -p "$F"/* "$d/"
        # Line N of the example is line first+N-1 of the file; the trap names the one that failed.
        # (The time limit only stops a hung example: 2 minutes, where the slowest takes seconds.)
        # shellcheck disable=SC2016  # (the inner shell expands $LINENO and $0)
        (cd "$d" && env -i PATH="$d/home/bin:$WORK/bin:/usr/bin:/bin" HOME="$d/home" \
            XDG_RUNTIME_DIR="$d/run" GPUBOX_LEASE_DIR="$d/leases" LANG=C.UTF-8 TERM=dumb \
            timeout -k 5 120 bash --noprofile --norc -e -o pipefail -c \
            'trap '\''echo "$LINENO" >"$0.line"'\'' ERR; . "$0"' "$X/$num.sh") </dev/null >"$d.out" 2>&1
        rc=$?
        if [ "$rc" = 0 ]; then
            ok "$file:$first: the example runs"
        else
            at=$first
            [ -s "$X/$num.sh.line" ] && at=$((first + $(cat "$X/$num.sh.line") - 1))
            mapfile -t tail < <(tail -15 "$d.out")
            [ "$rc" = 124 ] && rc="124: it ran 2 minutes"
            not_ok "$file:$at: the example fails (exit $rc)" "$file:$at: $(sed -n "$((at - first + 1))p" "$X/$num.sh")" \
                "its output's last lines:" "${tail[@]}"
        fi
        ;;
    esac
done <"$WORK/list"
echo "# $ran examples run, $skipped marked not run"
check "the documentation has examples that run" test "$ran" -gt 0
finish
