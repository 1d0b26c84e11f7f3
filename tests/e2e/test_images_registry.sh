#!/usr/bin/env bash
# gpubox pull from a real registry: Debian's docker-registry (the distribution project's v2
# registry) on 127.0.0.1 with TLS from a test CA and htpasswd basic auth, plus a plain-HTTP
# instance and a stopped one. The images are crafted layer by layer (tests/e2e/oci_image.py:
# whiteouts, an opaque dir, hard links, symlinks out of the image, a device node, setuid/setgid
# bits, a file capability, Env/WorkingDir/Entrypoint/Cmd, a two-platform index) and pushed with
# skopeo. Then, as an ordinary user with the CA and credentials where skopeo looks for them
# (~/.config/containers), it pulls them every way a user would and runs them by name.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/registry_lib.sh"

# The registry side, once, before lib.sh drops to uid 65534: the registries belong to root, so
# the user can neither read their storage nor stop them. What the user part needs is exported
# (setpriv keeps the environment).
setup_registries() {
    REG_SETUP_PID=$$
    REG_TOP=$(mktemp -d /tmp/gpubox-reg.XXXXXX)
    # Where the image's symlinks point: a directory the user may write, so that an unpacker
    # that followed them could write there (and the test would see it).
    REG_ESCAPE=$(mktemp -d /tmp/gpubox-reg-escape.XXXXXX)
    trap 'reg_stop_all; rm -rf "$REG_TOP" "$REG_ESCAPE"' EXIT
    trap 'exit 143' TERM INT HUP
    echo "not to be touched" >"$REG_ESCAPE/victim"
    chmod 0755 "$REG_ESCAPE" && chmod 0644 "$REG_ESCAPE/victim"
    [ "$(id -u)" = 0 ] && chown -R 65534:65534 "$REG_ESCAPE"
    reg_init "$REG_TOP" || bail "cannot make the test CA and htpasswd"
    reg_start main tls && REG_TLS_PORT=$REG_PORT || bail "cannot start the TLS registry"
    reg_start plain plain && REG_HTTP_PORT=$REG_PORT || bail "cannot start the HTTP registry"
    # A registry that ran on this port and was stopped: nothing listens there any more.
    reg_start gone tls && REG_GONE_PORT=$REG_PORT && reg_stop "${REG_PIDS[-1]}" ||
        bail "cannot start and stop a third registry"
    case $(uname -m) in
        x86_64) REG_ARCH=amd64 REG_OTHER_ARCH=arm64 ;;
        aarch64) REG_ARCH=arm64 REG_OTHER_ARCH=amd64 ;;
        *) bail "no test images for $(uname -m)" ;;
    esac
    "$GPUBOX" rootfs create "$REG_TOP/base" >/dev/null || bail "gpubox rootfs create failed"
    local corrupt main=docker://127.0.0.1:$REG_TLS_PORT/lab
    corrupt=$(python3 "$HERE/oci_image.py" test "$REG_TOP/oci" --base "$REG_TOP/base" \
        --escape "$REG_ESCAPE" --arch "$REG_ARCH" --other-arch "$REG_OTHER_ARCH") ||
        bail "oci_image.py failed"
    # (--preserve-digests: skopeo would gzip corrupt's plain tar layer on the way)
    reg_push "oci:$REG_TOP/oci:app" "$main/app:1" --digestfile "$REG_TOP/app.digest" &&
        reg_push "oci:$REG_TOP/oci:multi" "$main/multi:1" --all &&
        reg_push "oci:$REG_TOP/oci:corrupt" "$main/corrupt:1" --preserve-digests &&
        reg_push "oci:$REG_TOP/oci:evil" "$main/evil:1" &&
        python3 "$HERE/oci_image.py" big "$REG_TOP/oci-big" --base "$REG_TOP/base" \
            --arch "$REG_ARCH" --mib 12 --layers 1 &&
        reg_push "oci:$REG_TOP/oci-big:big" "$main/big:1" &&
        reg_push "oci:$REG_TOP/oci:app" "docker://127.0.0.1:$REG_HTTP_PORT/lab/app:1" \
            --dest-tls-verify=false || bail "skopeo copy to the registry failed"
    REG_APP_DIGEST=$(cat "$REG_TOP/app.digest")
    # Bit rot in the registry's storage: 16 bytes of the corrupt image's own layer (a plain
    # tar) overwritten inside a file's data, so the blob keeps its size and stays a valid tar.
    local blob
    blob=$(reg_blob_file main "$corrupt")
    [ -f "$blob" ] && printf 'corrupted-bytes!' | dd of="$blob" bs=1 seek=8192 conv=notrunc \
        status=none || bail "cannot corrupt $blob"
    REG_CA=$REG_TOP/ca/ca.crt
    REG_LOG=$REG_TOP/main.log REG_OCI=$REG_TOP/oci-big
    reg_push "oci:$REG_TOP/oci:app" "$main/moving:1" &&
        reg_push "oci:$REG_TOP/oci:app" "$main/app-docker:1" --format v2s2 ||
        bail "skopeo copy to the registry failed"
    chmod 0644 "$REG_LOG" && chmod -R a+rX "$REG_OCI" || bail "cannot share $REG_LOG, $REG_OCI"
    export REG_LOG REG_OCI REG_TLS_PORT REG_HTTP_PORT REG_GONE_PORT REG_CA REG_USER REG_PASS \
        REG_ESCAPE \
        REG_APP_DIGEST REG_ARCH REG_OTHER_ARCH REG_SETUP_PID
}
bail() { echo "Bail out! $*"; exit 1; }

if [ -z "${GPUBOX_E2E_UNPRIVILEGED:-}" ]; then
    : "${GPUBOX:?set GPUBOX to the gpubox binary}"
    reg_require_tools
    setup_registries
fi
. "$HERE/lib.sh"
# Run directly as an ordinary user, the registries are this very shell's: stop them too.
[ "${REG_SETUP_PID:-}" = $$ ] &&
    trap 'reg_stop_all; rm -rf "$REG_TOP" "$REG_ESCAPE"; chmod -R u+w "$WORK"; rm -rf "$WORK"' EXIT

make_rootfs "$WORK/rootfs"
require_userns "$WORK/rootfs"
# A user with nothing configured but what the test puts in its HOME.
unset XDG_RUNTIME_DIR XDG_DATA_HOME XDG_CONFIG_HOME REGISTRY_AUTH_FILE DOCKER_CONFIG
export HOME=$WORK/home GPUBOX_IMAGES=$WORK/store
mkdir -p "$HOME"
reg_user_config "$HOME" "$REG_TLS_PORT" "$REG_GONE_PORT"
R=127.0.0.1:$REG_TLS_PORT
S=$GPUBOX_IMAGES
escape_state() { (cd "$REG_ESCAPE" && find . -printf '%p %y %s %n\n' | LC_ALL=C sort; cat victim); }
escape0=$(escape_state)
store_state() { (cd "$S" 2>/dev/null && find . -printf '%p %y %s\n' | LC_ALL=C sort); }
# The user's entries in the temp directories, to compare at the end. Not other tests' own work
# directories (gpubox-e2e.*): they run at the same time as uid 65534 too (test_autograder_example
# keeps one in /var/tmp), and more of their life overlaps this test's on a loaded machine.
mine_in() {
    find "$1" -mindepth 1 -maxdepth 1 -user "$(id -u)" ! -path "$WORK" ! -name 'gpubox-e2e.*' 2>/dev/null | sort
}
tmp0=$(mine_in "${TMPDIR:-/tmp}")
var_tmp0=$(mine_in /var/tmp)

# expect_pull_error DESC SOURCE REASON-REGEX [OPTIONS...]: exit 125, one line naming the
# source and the reason, nothing on stdout, the store exactly as before.
expect_pull_error() {
    local desc=$1 src=$2 reason=$3 before
    shift 3
    before=$(store_state)
    box pull "$@" "$src"
    printf '# %s\n' "$err"
    expect_eq "$desc: exit 125" "$rc" 125
    # (the layers fetched before the failure, if any, are shown first: progress off a terminal)
    err=$(grep -v '^gpubox: pull: layer [0-9]*/[0-9]* sha256:' <<<"$err")
    expect_eq "$desc: one line on stderr" "$(printf '%s\n' "$err" | wc -l)" 1
    expect_match "$desc: the line names the source and the reason" "$err" \
        "^gpubox: pull ${src//./\\.}: .*($reason)"
    expect_eq "$desc: nothing on stdout" "$out" ""
    expect_eq "$desc: nothing left in the store" "$(store_state)" "$before"
}

# --- by tag, with the CA and credentials from ~/.config/containers
box pull "docker://$R/lab/app:1"
printf '# %s\n' "$err"
expect_eq "pull by tag: exit 0" "$rc" 0
expect_eq "pull by tag: stdout is the stored name" "$out" "app:1"
expect_match "pull by tag: the summary counts what was dropped" "$(tail -1 <<<"$err")" \
    'dropped 1 device nodes?, 2 setuid/setgid bits?, 1 file capabilit(y|ies)'
box images
expect_match "images lists app:1 with its digest" "$out" "^app:1 .*${REG_APP_DIGEST:7:12}"

# --- what the workload sees
box run app:1
expect_eq "no CMD: the image's Entrypoint + Cmd run, in WorkingDir, with Env" "$rc:$out" \
    "0:entry:first:second:/data/work:hello from the image"
box run app:1 sh -c 'echo "$VIA_ENTRYPOINT|$GREETING|$CUDA_VERSION|$PATH|$(pwd)"'
expect_eq "CMD: run by the image's Entrypoint, with its Env and WorkingDir" "$rc:$out" \
    "0:yes|hello from the image|12.4.0|/usr/local/bin:/usr/bin:/bin|/data/work"
box run --env GREETING=mine --workdir /tmp app:1 sh -c 'echo "$GREETING|$CUDA_VERSION|$(pwd)"'
expect_eq "--env and --workdir override the image's" "$rc:$out" "0:mine|12.4.0|/tmp"
box run app:1 sh -c '
    echo "opq: $(ls -A /data/opq | tr "\n" " ")"
    [ -e /data/gone.txt ] && echo "gone.txt: present" || echo "gone.txt: absent"
    if [ -c /data/devnode ]; then echo "devnode: char device"
    elif [ -e /data/devnode ]; then echo "devnode: $(stat -c %F /data/devnode)"
    else echo "devnode: absent"; fi
    echo "modes: $(stat -c %a /usr/bin/suidprog /data/sgidprog | tr "\n" " ")"
    echo "hard: $(stat -c "%i:%h" /data/hard1) $(stat -c "%i:%h" /data/hard2) $(cat /data/hard2)"
    echo "abs: $(readlink /data/abs-link)"
    echo "rel: $(readlink /data/rel-link)"
    [ -L /data/over ] && echo "over: symlink" || echo "over: $(cat /data/over)"
    echo "hello: $(cat /data/work/hello.txt)"'
expect_eq "the layers' tree runs" "$rc" 0
expect_match "opaque dir: only the upper layer's entry" "$out" '^opq: new1 $'
expect_match "whiteout: the file is gone" "$out" '^gone.txt: absent$'
expect_match "no device node" "$out" '^devnode: absent$'
expect_match "no setuid/setgid bit" "$out" '^modes: 755 755 $'
expect_match "hard link kept (one inode, 2 links)" "$out" '^hard: ([0-9]+):2 \1:2 linked$'
expect_match "absolute symlink out of the image kept as a symlink" "$out" \
    "^abs: $REG_ESCAPE/abs-target$"
expect_match "relative ../ symlink kept as a symlink" "$out" \
    "^rel: (\.\./){16}${REG_ESCAPE#/}/rel-target$"
expect_match "a file replaces a lower layer's symlink" "$out" '^over: replaced$'
expect_match "plain content" "$out" '^hello: hello$'
capfile=$(find "$S" -path '*/data/capprog' | head -1)  # (in its layer's tree)
expect_eq "the stored file has no security.capability" "$(python3 -c '
import os, sys; print(sorted(os.listxattr(sys.argv[1], follow_symlinks=False)))' "$capfile")" "[]"
expect_eq "nothing written outside the image during unpack" "$(escape_state)" "$escape0"

# --- a run writing everywhere leaves the stored image as it was
check "the pulled image is in the store" test -n "$capfile"
before=$(tree_hash "$S")
box run app:1 sh -c 'echo x >/data/hard1; rm -rf /data/opq /data/work; echo y >/new;
    chmod 4755 /usr/bin/suidprog; ln -sf /etc /data/abs-link; mkdir -p /usr/bin/z; echo done'
expect_eq "a run that writes everywhere succeeds (writes go to its own layer)" "$rc:$out" "0:done"
expect_eq "the stored image is unchanged after it" "$(tree_hash "$S")" "$before"
box run --writable app:1 sh -c 'echo x >/data/hard1; rm -rf /data/opq'
expect_eq "the stored image is unchanged after --writable (rc $rc)" "$(tree_hash "$S")" "$before"

# --- again: reused; by digest; --name
box pull "docker://$R/lab/app:1"
expect_eq "re-pull: exit 0, same name" "$rc:$out" "0:app:1"
expect_match "re-pull: says it reused the stored image" "$err" 'reused'
expect_eq "re-pull: the store holds one image" "$(ls "$S/blobs/sha256" | wc -l)" 1
# (the registry's access log: a GET of each blob, layer or config, a pull downloaded)
blob_gets() { grep -c "\"GET /v2/lab/$1/blobs/sha256:" "$REG_LOG"; }
gets0=$(blob_gets app)
box pull "docker://$R/lab/app:1"
expect_eq "re-pull again: exit 0" "$rc:$out" "0:app:1"
expect_eq "re-pull: no blob downloaded again (the manifest alone was asked for)" \
    "$(blob_gets app)" "$gets0"
# A Docker-format manifest, which skopeo converts to OCI on the way (a digest of its own)
box pull "docker://$R/lab/app-docker:1"
expect_eq "Docker-format manifest: pulled" "$rc:$out" "0:app-docker:1"
gets0=$(blob_gets app-docker)
box pull "docker://$R/lab/app-docker:1"
expect_match "Docker-format manifest, again: reused" "$rc:$err" '^0:.*reused'
expect_eq "Docker-format manifest, again: no blob downloaded again" \
    "$(blob_gets app-docker)" "$gets0"
box rmi app-docker:1
box pull "docker://$R/lab/app@$REG_APP_DIGEST"
expect_eq "pull by digest: REPO@sha256:<12 hex>" "$rc:$out" "0:app@${REG_APP_DIGEST:0:19}"
expect_match "pull by digest: the same digest as app:1, reused" "$err" 'reused'
box run "app@${REG_APP_DIGEST:0:19}"
expect_eq "run by the digest name" "$rc:$out" "0:entry:first:second:/data/work:hello from the image"
box pull --name lab-app "docker://$R/lab/app:1"
expect_eq "--name names it" "$rc:$out" "0:lab-app"

# --- --squashfs: the layered image as one squashfs file (its whiteouts and opaque directories
# applied), run as the tree runs (unpacked once where /dev/fuse is closed, as here by default)
GPUBOX_IMAGES=$WORK/store-sq box pull --squashfs "docker://$R/lab/app:1"
expect_eq "pull --squashfs from the registry: exit 0" "$rc:$out" "0:app:1"
sq=$(ls "$WORK"/store-sq/blobs/sha256/*/rootfs.sqsh 2>/dev/null)
check "  one squashfs file that unsquashfs reads" sh -c 'unsquashfs -s "$1" >/dev/null' _ "$sq"
expect_eq "  no whiteout device in it" "$(unsquashfs -lls "$sq" | grep -c '^c')" 0
GPUBOX_IMAGES=$WORK/store-sq box run app:1
expect_eq "  it runs as the layered image does" "$rc:$out" "0:entry:first:second:/data/work:hello from the image"
rm -rf "$WORK/store-sq"

# --- a tag moved to another image since it was pulled: pulled again
box pull --name moving "docker://$R/lab/moving:1"
expect_eq "moving:1 (app's image): reused" "$rc:$(grep -c reused <<<"$err")" "0:1"
HOME=$WORK/home skopeo --policy <(echo '{"default": [{"type": "insecureAcceptAnything"}]}') \
    copy -q "oci:$REG_OCI:big" "docker://$R/lab/moving:1" ||
    bail "cannot move the tag lab/moving:1"
gets0=$(blob_gets moving)
box pull --name moving "docker://$R/lab/moving:1"
expect_eq "moved tag: pulled (not reused)" "$rc:$(grep -c reused <<<"$err")" "0:0"
check "moved tag: its blobs were downloaded" test "$(blob_gets moving)" -gt "$gets0"
box run moving sh -c '[ -d /data0 ] && [ ! -e /data/work ] && echo big'
expect_eq "moved tag: the name runs the new image" "$rc:$out" "0:big"
box rmi moving

# --- a multi-platform index: the host's platform unless --platform says otherwise
box pull "docker://$R/lab/multi:1"
expect_eq "index: pulled" "$rc:$out" "0:multi:1"
box run multi:1 cat /platform
expect_eq "index: the workload sees the host's platform's image" "$rc:$out" "0:$REG_ARCH"
box pull --platform "linux/$REG_OTHER_ARCH" --name multi-other "docker://$R/lab/multi:1"
expect_eq "index --platform: pulled" "$rc:$out" "0:multi-other"
box run multi-other cat /platform
expect_eq "index --platform: the other platform's image" "$out" "$REG_OTHER_ARCH"
gets0=$(blob_gets multi)
box pull "docker://$R/lab/multi:1"
expect_match "index, again: the host's platform's image is reused" "$rc:$err" '^0:.*reused'
box pull --platform "linux/$REG_OTHER_ARCH" --name multi-other "docker://$R/lab/multi:1"
expect_match "index --platform, again: reused" "$rc:$err" '^0:.*reused'
expect_eq "index, again: no blob downloaded again" "$(blob_gets multi)" "$gets0"

# --- on a terminal (a pty from script(1)): progress, by layer and bytes, for a 12 MiB layer
script -qec "stty cols 100; exec $(printf '%q ' "$GPUBOX" pull "docker://$R/lab/big:1")" \
    /dev/null </dev/null >"$WORK/tty.out" 2>&1
tty_out=$(tr '\r' '\n' <"$WORK/tty.out")
expect_match "on a terminal: the pull succeeds" "$tty_out" '^big:1'
expect_match "on a terminal: progress by layer and bytes" "$tty_out" \
    'unpacking layer 2/2: [0-9]+ MiB'
box rmi big:1
expect_eq "rmi: exit 0, gone from the list" "$rc:$("$GPUBOX" images | grep -c '^big:1 ')" "0:0"

# --- credentials and trust, where else a user keeps them
printf '{"auths": {"%s": {"auth": "%s"}}}\n' "$R" "$(reg_basic_auth)" >"$WORK/auth.json"
mkdir -p "$WORK/bare/.docker" "$WORK/certdir" && cp "$REG_CA" "$WORK/certdir/ca.crt"
cp "$WORK/auth.json" "$WORK/bare/.docker/config.json"
HOME=$WORK/bare box pull --cert-dir "$WORK/certdir" --name via-docker "docker://$R/lab/app:1"
expect_eq "~/.docker/config.json credentials and --cert-dir" "$rc:$out" "0:via-docker"
rm "$WORK/bare/.docker/config.json"
HOME=$WORK/bare REGISTRY_AUTH_FILE=$WORK/auth.json box pull --cert-dir "$WORK/certdir" \
    --name via-env "docker://$R/lab/app:1"
expect_eq "\$REGISTRY_AUTH_FILE" "$rc:$out" "0:via-env"
HOME=$WORK/bare box pull --cert-dir "$WORK/certdir" --authfile "$WORK/auth.json" \
    --name via-authfile "docker://$R/lab/app:1"
expect_eq "--authfile" "$rc:$out" "0:via-authfile"
HOME=$WORK/bare box pull --cert-dir "$WORK/certdir" --creds "$REG_USER:$REG_PASS" \
    --name via-creds "docker://$R/lab/app:1"
expect_eq "--creds" "$rc:$out" "0:via-creds"

# --- failures: one line, exit 125, nothing stored
expect_pull_error "bad credentials" "docker://$R/lab/multi:1" "authentication failed" \
    --creds "$REG_USER:wrong" --name bad-creds
HOME=$WORK/bare expect_pull_error "no credentials" "docker://$R/lab/multi:1" \
    "authentication failed" --cert-dir "$WORK/certdir"
HOME=$WORK/bare expect_pull_error "a CA the user does not trust" "docker://$R/lab/app:1" \
    "certificate" --creds "$REG_USER:$REG_PASS" --name untrusted
expect_pull_error "no such tag" "docker://$R/lab/app:nope" "no such image/tag"
expect_pull_error "a corrupted blob" "docker://$R/lab/corrupt:1" "digest mismatch"
expect_pull_error "registry stopped" "docker://127.0.0.1:$REG_GONE_PORT/lab/app:1" \
    "cannot connect to 127\.0\.0\.1:$REG_GONE_PORT"
expect_pull_error "plain HTTP without --insecure" "docker://127.0.0.1:$REG_HTTP_PORT/lab/app:1" \
    "plain HTTP.*--insecure"
box pull --insecure --name app-http "docker://127.0.0.1:$REG_HTTP_PORT/lab/app:1"
expect_eq "plain HTTP with --insecure" "$rc:$out" "0:app-http"
box run app-http
expect_eq "run the image pulled over HTTP" "$out" \
    "entry:first:second:/data/work:hello from the image"

# --- entries that would write outside the image through its own symlinks, a hard link out and
# a ../ member name: refused (one line, nothing stored) or kept inside; never written outside.
before=$(store_state)
box pull "docker://$R/lab/evil:1"
printf '# %s\n' "$err"
if [ "$rc" = 0 ]; then
    expect_eq "evil layer: pulled, named" "$out" "evil:1"
else
    expect_eq "evil layer: refused with exit 125 and one line (progress lines aside)" \
        "$rc:$(grep -vc '^gpubox: pull: layer [0-9]*/[0-9]* sha256:' <<<"$err")" "125:1"
    expect_eq "evil layer: refused, nothing stored" "$(store_state)" "$before"
fi
expect_eq "evil layer: nothing written outside the image" "$(escape_state)" "$escape0"

# --- nothing left behind by the pulls: no helper process, no temp files
# This test's processes (other tests run as the same uid): gpubox from this test's copy, and
# anything naming the test's directories (skopeo and gpubox-unpack get the store's).
leftovers() {
    ps -eo comm=,args= | awk -v d="$(dirname "$GPUBOX")/" -v w="$WORK" \
        '(index($0, d) || index($0, w)) && $1 !~ /^(bash|ps|awk|mawk|gawk)$/'
}
expect_eq "no helper process left (skopeo, gpubox-unpack, a sandbox)" "$(leftovers)" ""
expect_eq "nothing left in \$TMPDIR" "$(mine_in "${TMPDIR:-/tmp}")" "$tmp0"
expect_eq "nothing left in /var/tmp" "$(mine_in /var/tmp)" "$var_tmp0"
expect_eq "nothing left in the store's tmp/" "$(ls -A "$S/tmp" 2>/dev/null)" ""
finish
