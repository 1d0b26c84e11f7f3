#!/usr/bin/env bash
# Usage: tools/hot-text-check.sh GPUBOX HOT_TEXT_LD
#
# Whether the linker laid GPUBOX out as HOT_TEXT_LD says (tools/hot-text.sh): an output section
# .text.gpubox_hot, and every global function the script names by section (.text.NAME) that
# GPUBOX has, inside it (a local one may have namesakes in other files, in sections named
# otherwise). Says how many it found and how large the section is.
set -euo pipefail
bin=$1 script=$2
read -r start size < <(readelf -SW "$bin" | sed -n 's/.*\] \.text\.gpubox_hot *PROGBITS *\([0-9a-f]*\) [0-9a-f]* \([0-9a-f]*\) .*/\1 \2/p')
[ -n "${start:-}" ] || { echo "hot-text-check: $bin has no .text.gpubox_hot section" >&2; exit 1; }
python3 - "$bin" "$script" "$start" "$size" <<'PY'
import re, subprocess, sys
binary, script, start, size = sys.argv[1], sys.argv[2], int(sys.argv[3], 16), int(sys.argv[4], 16)
named = set(re.findall(r"^\s+\*\(\.text\.(\S+)\)$", open(script).read(), re.M))
out = subprocess.run(["nm", "--defined-only", binary], capture_output=True, text=True, check=True)
found, outside = 0, []
for line in out.stdout.splitlines():
    f = line.split()
    if len(f) == 3 and f[1] == "T" and f[2] in named:
        found += 1
        if not start <= int(f[0], 16) < start + size:
            outside.append(f[2])
print(f"hot-text-check: {found} of the script's {len(named)} functions are global ones of {binary}, "
      f"in a hot section of {size // 1024} KiB")
if outside or found < len(named) // 4:
    for name in outside[:10]:
        print(f"hot-text-check: {name} lies outside it", file=sys.stderr)
    if found < len(named) // 4:
        print("hot-text-check: most of the script's functions are missing: rerun tools/hot-text.sh",
              file=sys.stderr)
    sys.exit(1)
PY
