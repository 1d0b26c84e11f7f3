#!/usr/bin/env bash
# gpubox installed like a real tool: `cmake --install` (binary, gpubox(1), bash and zsh
# completion, AppArmor profile), and the Debian package installed with apt into a fresh Debian 12
# root (mmdebstrap minbase, cached per build directory), where an ordinary user (uid 65534) runs
# `gpubox run` and the example grader from PATH; then removed and purged without a trace.
# Needs root (apt, chroot); the sandboxes themselves run as uid 65534.
E2E_AS_ROOT=1
. "$(dirname "$0")/lib.sh"
[ "$(id -u)" = 0 ] || skip "installing packages needs root"
BUILD=$(cd "$(dirname "$GPUBOX")/.." && pwd)
SRC=$(cd "$E2E_DIR/../.." && pwd)
[ -f "$BUILD/CPackConfig.cmake" ] || { echo "Bail out! $BUILD is not gpubox's build directory"; exit 1; }

# --- cmake --install, into a staging directory
stage=$WORK/stage
DESTDIR=$stage cmake --install "$BUILD" --prefix /usr/local >"$WORK/install.log" 2>&1
expect_eq "cmake --install succeeds" "$?" 0
for f in bin/gpubox libexec/gpubox/gpubox-scope libexec/gpubox/gpubox-unpack libexec/gpubox/gpubox-nvml share/man/man1/gpubox.1.gz share/bash-completion/completions/gpubox \
         share/zsh/site-functions/_gpubox share/gpubox/apparmor/gpubox; do
    check "installs /usr/local/$f" test -s "$stage/usr/local/$f"
done
docs=$(cd "$SRC" && echo README.md docs/*.md)  # the documentation: README and every docs/ page
for f in $docs; do
    check "installs /usr/local/share/doc/gpubox/$f" cmp -s "$SRC/$f" "$stage/usr/local/share/doc/gpubox/$f"
done
man=$(zcat "$stage/usr/local/share/man/man1/gpubox.1.gz")
expect_match "gpubox(1) is the binary's --man" "$man" '^\.TH GPUBOX 1 "" "gpubox [0-9.]+"'
expect_eq "gpubox(1) equals gpubox --man" "$man" "$("$stage/usr/local/bin/gpubox" --man)"
if command -v man >/dev/null; then
    expect_match "man renders gpubox(1)" "$(MANWIDTH=100 man -l "$stage/usr/local/share/man/man1/gpubox.1.gz" 2>/dev/null)" '--memory-limit SIZE'
fi
profile=$(cat "$stage/usr/local/share/gpubox/apparmor/gpubox")
expect_match "the AppArmor profile names the installed binary" "$profile" '^profile gpubox /usr/local/bin/gpubox flags=\(unconfined\) \{$'
expect_match "the AppArmor profile allows userns" "$profile" '^  userns,$'
expect_match "the AppArmor profile states its ABI" "$profile" '^abi <abi/4.0>,$'
if command -v apparmor_parser >/dev/null && [ -e /etc/apparmor.d/abi/4.0 ]; then
    check "apparmor_parser accepts the profile" apparmor_parser -Q -K "$stage/usr/local/share/gpubox/apparmor/gpubox"
fi

# --- bash completion, driven as bash would drive it
complete_words() {  # WORDS...: the candidates for the last word
    PATH=$stage/usr/local/bin:$PATH bash -c '
        . "$1"; shift
        COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _gpubox 2>/dev/null
        printf "%s\n" "${COMPREPLY[@]}"' _ "$stage/usr/local/share/bash-completion/completions/gpubox" "$@" | sort | tr '\n' ' '
}
expect_eq "bash completes subcommands" "$(complete_words gpubox r)" "rmi rootfs run "
expect_eq "bash completes run's options from --help" "$(complete_words gpubox run --mem)" "--memory-limit "
expect_match "bash completes --gpu specs" "$(complete_words gpubox run --gpu '')" '^all none '
expect_eq "bash completes --meta-format" "$(complete_words gpubox run --meta-format '')" "isolate json "
mkdir -p "$WORK/cwd/rootfs-a"
expect_eq "bash completes paths for ROOTFS" "$(cd "$WORK/cwd" && complete_words gpubox run --share-net root)" "rootfs-a "
expect_eq "bash completes list's options" "$(complete_words gpubox list --)" "--driver-root --help --json "
# --- zsh completion, where zsh is installed: typed into an interactive zsh on a pty (zpty)
if command -v zsh >/dev/null; then
    check "zsh parses _gpubox" zsh -n "$stage/usr/local/share/zsh/site-functions/_gpubox"
    got=$(HOME=$WORK PATH=$stage/usr/local/bin:$PATH timeout 60 zsh -f -c '
        zmodload zsh/zpty
        zpty z "PS1=\"> \" TERM=dumb zsh -f -i"
        zpty -w z "fpath=($1 \$fpath); autoload -Uz compinit; compinit -u -D; setopt nobeep; print RE\"\"ADY"
        zpty -r z ready "*READY*"
        for line in "gpubox ru" "gpubox run --memory-l" "gpubox run --meta-format i" "gpubox list --j"; do
            zpty -w -n z "$line"$'"'"'\t'"'"'; sleep 1; zpty -w z $'"'"'\x05; : done'"'"'; sleep 0.3
        done
        zpty -w z "print FIN\"\"ISHED"
        zpty -r z all "*FINISHED*"
        print -r -- ${all//$'"'"'\r'"'"'/}
        zpty -d z' _ "$stage/usr/local/share/zsh/site-functions" 2>&1 | tr -d '\b' |
        grep -aoE 'gpubox [^;[:cntrl:]]*; : done' | sort -u)
    expect_match "zsh completes subcommands" "$got" '^gpubox run +; : done$'
    expect_match "zsh completes run's options from --help" "$got" '^gpubox run --memory-limit +; : done$'
    expect_match "zsh completes --meta-format" "$got" '^gpubox run --meta-format isolate +; : done$'
    expect_match "zsh completes list's options" "$got" '^gpubox list --json +; : done$'
fi

# --- the Debian package
pkg=$WORK/pkg
cpack -G DEB --config "$BUILD/CPackConfig.cmake" -B "$pkg" >"$WORK/cpack.log" 2>&1
cpack_rc=$?
expect_eq "cpack -G DEB succeeds" "$cpack_rc" 0
[ "$cpack_rc" = 0 ] || grep -v '^CPack: ' "$WORK/cpack.log" | tail -20 | sed 's/^/#   /'
deb=$(ls "$pkg"/gpubox_*.deb 2>/dev/null | head -1)
check "the package is gpubox_VERSION_ARCH.deb" test -s "$deb"
info=$(dpkg-deb -f "$deb" Package Depends Version)
expect_match "the package depends on libc6" "$info" '^Depends: .*libc6'
expect_match "  and, for gpubox-scope, on libsystemd0" "$info" '^Depends: .*libsystemd0'
contents=$(dpkg-deb -c "$deb" | awk '{print $6}')
for f in ./usr/bin/gpubox ./usr/libexec/gpubox/gpubox-scope ./usr/libexec/gpubox/gpubox-unpack ./usr/libexec/gpubox/gpubox-nvml ./usr/share/man/man1/gpubox.1.gz ./usr/share/bash-completion/completions/gpubox \
         ./usr/share/zsh/vendor-completions/_gpubox ./usr/share/gpubox/apparmor/gpubox; do
    expect_match "the package ships $f" "$contents" "^${f//./\\.}$"
done
for f in $docs; do
    expect_match "the package ships ./usr/share/doc/gpubox/$f" "$contents" "^\./usr/share/doc/gpubox/${f//./\\.}$"
done
expect_match "the packaged profile names /usr/bin/gpubox" \
    "$(dpkg-deb --fsys-tarfile "$deb" | tar -xO ./usr/share/gpubox/apparmor/gpubox)" '^profile gpubox /usr/bin/gpubox '

# --- a fresh Debian 12 root, made once per build directory
# libarchive13: gpubox-unpack's, which the package depends on and this root has no apt lists for.
include=busybox-static,gcc,libc6-dev,libarchive13
cache=${GPUBOX_INSTALL_ROOT_CACHE:-$BUILD/test-install-bookworm-$(printf %s "$include" | cksum | cut -d' ' -f1).tar}
if [ ! -f "$cache" ] || [ ! -s "$cache" ]; then
    rm -rf "$cache"
    # mmdebstrap picks its output's format by the name's ending: the temporary one ends in .tar too.
    mmdebstrap --quiet --variant=minbase --include="$include" bookworm "$cache.tmp.tar" \
        >"$WORK/mmdebstrap.log" 2>&1 && mv "$cache.tmp.tar" "$cache" ||
        { echo "Bail out! mmdebstrap failed: $(tail -3 "$WORK/mmdebstrap.log")"; rm -rf "$cache.tmp.tar"; exit 1; }
fi
root=$WORK/root
mkdir "$root" && tar -C "$root" -xf "$cache" || { echo "Bail out! cannot unpack $cache"; exit 1; }
# in_root [--user] CMD...: CMD in the fresh root, with its own /proc, /dev and /sys. As the user,
# pivoted rather than chrooted: the kernel refuses a user namespace to a chrooted process.
in_root() {
    local user=0
    [ "$1" = --user ] && { user=1; shift; }
    unshare --mount --fork -- bash -c '
        r=$1 user=$2; shift 2
        mount --make-rprivate / && mount --bind "$r" "$r" && mount -t proc proc "$r/proc" &&
            mount --rbind /dev "$r/dev" && mount --rbind /sys "$r/sys" || exit 1
        cd "$r" && mkdir -p .host && pivot_root . .host || exit 1
        env=(env -i PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin HOME=/tmp DEBIAN_FRONTEND=noninteractive)
        [ "$user" = 1 ] || exec "${env[@]}" "$@"
        exec "${env[@]}" setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all --bounding-set=-all "$@"' \
        _ "$root" "$user" "$@"
}
cp "$deb" "$root/tmp/"
cp -r "$SRC/examples/autograder" "$root/tmp/autograder" && chmod -R a+rX "$root/tmp/autograder"
in_root apt-get install -y -q "/tmp/$(basename "$deb")" >"$WORK/apt.log" 2>&1
expect_eq "apt install ./gpubox_*.deb in a fresh Debian 12" "$?" 0
expect_eq "gpubox is on PATH" "$(in_root --user sh -c 'command -v gpubox')" /usr/bin/gpubox
out=$(in_root --user sh -c 'cd /tmp && gpubox rootfs create r >/dev/null && gpubox run r sh -c "echo hello from uid \$(id -u)"' 2>&1)
expect_eq "an ordinary user runs gpubox from PATH" "$out" "hello from uid 65534"
out=$(in_root --user sh -c 'cd /tmp && export GPUBOX_IMAGES=/tmp/images && tar -C r -cf r.tar . &&
    gpubox pull --name img tar:r.tar 2>/dev/null && gpubox run img echo hello from an image' 2>&1)
expect_eq "pull finds gpubox-unpack in libexec, with its libraries installed by apt" "$out" $'img\nhello from an image'
out=$(in_root --user sh -c '/usr/libexec/gpubox/gpubox-nvml /nonexistent/libnvidia-ml.so.1; echo "rc=$?"' 2>&1)
expect_eq "the packaged gpubox-nvml runs with the package's dependencies, and says what it cannot load" "$out" \
    $'dlopen("/nonexistent/libnvidia-ml.so.1"): /nonexistent/libnvidia-ml.so.1: cannot open shared object file: No such file or directory\nrc=1'
out=$(in_root --user sh -c 'cd /tmp && gpubox run --wall-time-limit 0.3 r sleep 5; echo "rc=$?"' 2>&1)
expect_eq "a limit kill says why" "$out" $'gpubox: killed: wall-clock limit 0.300 s exceeded\nrc=137'
out=$(in_root --user bash /tmp/autograder/grade.sh /tmp/autograder/submissions/correct.c 2>&1)
expect_match "the example grader works from PATH" "$out" '^score: 3/3$'
out=$(in_root --user bash /tmp/autograder/grade.sh /tmp/autograder/submissions/slow.c 2>&1)
expect_match "the example grader grades a slow submission TLE" "$out" 'TLE'
files=$(in_root dpkg -L gpubox)
in_root apt-get remove -y -q gpubox >>"$WORK/apt.log" 2>&1 && in_root dpkg --purge gpubox >>"$WORK/apt.log" 2>&1
expect_eq "apt remove and dpkg --purge succeed" "$?" 0
[ "${GPUBOX_TEST_VERBOSE:-0}" = 1 ] && sed 's/^/#   /' "$WORK/apt.log"
left=""
for f in $files; do [ -f "$root$f" ] && left="$left $f"; done
expect_eq "no file of the package is left" "$left" ""
expect_eq "dpkg knows gpubox no more" "$(in_root dpkg-query -W -f='${Status}' gpubox 2>/dev/null)" ""
check "no AppArmor profile is left" test ! -e "$root/etc/apparmor.d/gpubox"
rm -rf "$root"
finish
