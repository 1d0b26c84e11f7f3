#!/usr/bin/env python3
"""no_perf.py COMMAND...: runs COMMAND under a seccomp filter that refuses perf_event_open with
EPERM, as a container's default profile does (Docker's, podman's): where gpubox cannot have the
kernel count the workload's CPU, and sums it over /proc instead (isolate/tree_clock.hpp)."""
import ctypes
import os
import platform
import struct
import sys

NR = {"x86_64": 298, "aarch64": 241}[platform.machine()]
BPF_LD_W_ABS, BPF_JEQ_K, BPF_RET_K = 0x20, 0x15, 0x06
SECCOMP_RET_ALLOW, SECCOMP_RET_ERRNO, EPERM = 0x7FFF0000, 0x00050000, 1
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2

prog = [
    (BPF_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    (BPF_JEQ_K, 0, 1, NR),
    (BPF_RET_K, 0, 0, SECCOMP_RET_ERRNO | EPERM),
    (BPF_RET_K, 0, 0, SECCOMP_RET_ALLOW),
]
code = b"".join(struct.pack("HBBI", *insn) for insn in prog)
buf = ctypes.create_string_buffer(code)


class SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


libc = ctypes.CDLL(None, use_errno=True)
fprog = SockFprog(len(prog), ctypes.addressof(buf))
if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) or libc.prctl(
        PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0):
    sys.exit(f"no_perf.py: prctl: {os.strerror(ctypes.get_errno())}")
os.execvp(sys.argv[1], sys.argv[1:])
