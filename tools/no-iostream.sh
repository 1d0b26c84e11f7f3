#!/usr/bin/env bash
# gpubox's start-up sets up no iostreams (ctest: no_iostream). A static binary with any code
# that includes <iostream> (gpubox's own, or a library's: yaml-cpp's did) runs
# std::ios_base::Init before main in every process it starts: the standard streams and the C++
# locale, ~0.5 ms and a dozen page faults on the VMs CI runs on, a twentieth of a judge's run,
# whether the run prints anything or not. gpubox prints through common/print.hpp instead.
# Read from the linked binary with nm, so a new include anywhere, or a library that brings one,
# is caught.
#
# Usage: no-iostream.sh BINARY
set -euo pipefail
bin=$1
syms=$(nm "$bin")
[ -n "$syms" ] || { echo "no-iostream: $bin has no symbol table to check" >&2; exit 1; }
if grep -qE ' _ZNSt8ios_base4InitC[12]Ev$' <<<"$syms"; then
    echo "no-iostream: $bin links std::ios_base::Init (some code it links includes <iostream>):" >&2
    grep -E ' _GLOBAL__sub_I' <<<"$syms" | sed 's/^/  static initializer: /' >&2
    echo "  print with common/print.hpp, and find the include with: grep -rn '<iostream>'" >&2
    exit 1
fi
echo "no-iostream: $bin sets up no iostreams before main"
