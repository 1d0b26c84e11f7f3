# Sourced by tests/e2e/test_images_registry.sh and bench/images.sh: Debian's registry server (the
# distribution project's v2 registry, `docker-registry`) on 127.0.0.1, with TLS from a CA made
# here and htpasswd (bcrypt) basic auth, or plain HTTP; test images pushed to it with skopeo.
# The access log (each request, in NAME.log) shows what a pull fetched. reg_init first;
# reg_stop_all on every exit path (the callers' EXIT traps). Safe under set -e.
REG_TOOLS=(docker-registry skopeo htpasswd openssl python3)
REG_USER=gpubox-tester
REG_PASS=${REG_PASS:-s3cret-$$-pass}  # kept when the script re-runs itself as another user

# reg_missing_tools: the names of the tools this needs that are not on PATH.
reg_missing_tools() {
    local t
    for t in "${REG_TOOLS[@]}"; do command -v "$t" >/dev/null || printf '%s ' "$t"; done
}

# reg_require_tools: in a test (TAP), before lib.sh: skips it (77) when a tool is missing, or
# bails out where the suite must work (GPUBOX_TESTS_MUST_WORK=1).
reg_require_tools() {
    local missing
    missing=$(reg_missing_tools)
    [ -z "$missing" ] && return 0
    [ "${GPUBOX_TESTS_MUST_WORK:-0}" = 1 ] && { echo "Bail out! missing: $missing(bash .ci/install-deps.sh)"; exit 1; }
    echo "1..0 # SKIP missing: $missing"
    exit 77
}

# reg_init DIR: DIR (a new directory) gets the CA, the server's key and certificate (IP SAN
# 127.0.0.1), the htpasswd file and the skopeo policy; the registries' state goes below it.
reg_init() {
    REG_TOP=$1
    REG_PIDS=()
    mkdir -p "$REG_TOP/ca" "$REG_TOP/home" && chmod 0755 "$REG_TOP" "$REG_TOP/ca" || return 1
    (
        cd "$REG_TOP/ca" || exit 1
        openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=gpubox test CA" \
            -keyout ca.key -out ca.crt &&
            openssl req -newkey rsa:2048 -nodes -subj "/CN=127.0.0.1" -keyout server.key \
                -out server.csr &&
            printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' >ext.cnf &&
            openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 \
                -extfile ext.cnf -out server.crt &&
            chmod 0600 ca.key server.key && chmod 0644 ca.crt
    ) >"$REG_TOP/openssl.log" 2>&1 || { cat "$REG_TOP/openssl.log"; return 1; }
    htpasswd -Bbc "$REG_TOP/htpasswd" "$REG_USER" "$REG_PASS" 2>/dev/null || return 1
    # skopeo's own trust policy, so that the host's /etc/containers/policy.json plays no part.
    echo '{"default": [{"type": "insecureAcceptAnything"}]}' >"$REG_TOP/policy.json"
    # The CA alone, as --dest-cert-dir wants it (every *.crt there is a CA).
    mkdir -p "$REG_TOP/certs" && cp "$REG_TOP/ca/ca.crt" "$REG_TOP/certs/ca.crt"
}

reg_free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])'
}

# reg_basic_auth: the test's credentials as auth.json and ~/.docker/config.json hold them.
reg_basic_auth() { printf '%s:%s' "$REG_USER" "$REG_PASS" | base64 -w0; }

# reg_config NAME PORT tls|plain: the registry's config file for one instance.
reg_config() {
    local name=$1 port=$2 mode=$3 c=$REG_TOP/$1.yml
    cat >"$c" <<EOF
version: 0.1
log:
  level: warn
  accesslog:
    disabled: false
storage:
  filesystem:
    rootdirectory: $REG_TOP/storage-$name
  delete:
    enabled: true
http:
  addr: 127.0.0.1:$port
EOF
    if [ "$mode" = tls ]; then
        cat >>"$c" <<EOF
  tls:
    certificate: $REG_TOP/ca/server.crt
    key: $REG_TOP/ca/server.key
auth:
  htpasswd:
    realm: gpubox-test
    path: $REG_TOP/htpasswd
EOF
    fi
    echo "$c"
}

# reg_start NAME tls|plain: starts one registry instance on a free port and waits until it
# accepts connections; sets REG_PORT. A port taken between the probe and the registry's bind
# makes the registry exit: then it tries another port.
reg_start() {
    local name=$1 mode=$2 port pid try end
    mkdir -p "$REG_TOP/storage-$name" && chmod 0700 "$REG_TOP/storage-$name"
    for try in 1 2 3 4 5; do
        port=$(reg_free_port) || return 1
        env -i PATH=/usr/bin:/bin HOME="$REG_TOP/home" \
            docker-registry serve "$(reg_config "$name" "$port" "$mode")" \
            >>"$REG_TOP/$name.log" 2>&1 </dev/null &
        pid=$!
        end=$((SECONDS + 120))  # (a margin for a loaded machine; it comes in well under a second)
        while [ "$SECONDS" -lt "$end" ]; do
            kill -0 "$pid" 2>/dev/null || break
            if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
                REG_PIDS+=("$pid")
                REG_PORT=$port
                return 0
            fi
            sleep 0.1
        done
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    echo "registry $name did not start:" >&2
    tail -5 "$REG_TOP/$name.log" >&2
    return 1
}

# reg_stop PID: stops one registry and waits for it, so its port is closed on return.
reg_stop() {
    kill "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
    local keep=() p
    for p in "${REG_PIDS[@]}"; do [ "$p" = "$1" ] || keep+=("$p"); done
    REG_PIDS=("${keep[@]}")
}

reg_stop_all() {
    local p
    for p in "${REG_PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${REG_PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
    REG_PIDS=()
}

# reg_push SRC DEST [SKOPEO-OPTIONS...]: skopeo copy from an OCI layout to the registry at DEST
# (docker://...), with the test's credentials and CA; --digestfile etc. pass through.
reg_push() {
    local src=$1 dest=$2
    shift 2
    env -i PATH=/usr/bin:/bin HOME="$REG_TOP/home" skopeo --policy "$REG_TOP/policy.json" \
        copy -q --dest-creds "$REG_USER:$REG_PASS" --dest-cert-dir "$REG_TOP/certs" "$@" \
        "$src" "$dest"
}

# reg_blob_file NAME DIGEST: where registry NAME keeps the blob DIGEST (sha256:HEX) on disk.
reg_blob_file() {
    local hex=${2#sha256:}
    echo "$REG_TOP/storage-$1/docker/registry/v2/blobs/sha256/${hex:0:2}/$hex/data"
}

# reg_user_config HOME PORT...: the user's view of the registries, where skopeo and the
# containers-image library look: the CA per HOST:PORT and the credentials in auth.json.
reg_user_config() {
    local home=$1 port auths=""
    shift
    for port in "$@"; do
        mkdir -p "$home/.config/containers/certs.d/127.0.0.1:$port"
        cp "$REG_CA" "$home/.config/containers/certs.d/127.0.0.1:$port/ca.crt"
        auths+="${auths:+, }\"127.0.0.1:$port\": {\"auth\": \"$(reg_basic_auth)\"}"
    done
    printf '{"auths": {%s}}\n' "$auths" >"$home/.config/containers/auth.json"
}
