#!/bin/sh
# Runs as root in the guest, once, at boot (from the image's gpubox-vmtest.service): hands the
# test to the lingering user "tester", who has a systemd user manager but no login session.
P=/mnt/payload
T=/home/tester/gpubox-vm
i=0
until systemctl --quiet is-active user@1000.service || [ $i -ge 240 ]; do sleep 0.5; i=$((i + 1)); done
mkdir -p $T && cp $P/gpubox $P/gpubox-scope $P/probe $P/*.sh $T/ && chown -R tester:tester $T
echo "# guest: Linux $(uname -r), $(systemctl --version | head -1)"
echo "# user@1000.service: $(systemctl is-active user@1000.service), DelegateControllers=$(systemctl show -p DelegateControllers --value user@1000.service)"
exec runuser -u tester -- env -i HOME=/home/tester PATH=/usr/bin:/bin XDG_RUNTIME_DIR=/run/user/1000 \
    GPUBOX=$T/gpubox PROBE=$T/probe E2E_DIR=$T GPUBOX_TESTS_MUST_WORK=1 bash $T/guest_test.sh
