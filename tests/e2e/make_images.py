#!/usr/bin/env python3
"""Builds the test images of tests/e2e/test_images.sh from a root filesystem directory:
a docker-archive (docker save's format), an OCI layout, an oci-archive, and a plain tar.

    make_images.py BASE_ROOTFS OUT_DIR VICTIM_DIR

Three layers: BASE (the rootfs, plus files later layers change), HOSTILE (whiteouts, an opaque
directory, a device node, a setuid file, a file capability, hard links, symlinks pointing out of
the image and entries that try to write through them, a '../escape' member), and TOP (a file
into a read-only directory, a file replacing a symlink to a host file). Two configs share them:
'entry' (Entrypoint + Cmd) and 'env' (Cmd printing what the workload sees)."""
import gzip
import hashlib
import io
import json
import os
import sys
import tarfile

base, out, victim = sys.argv[1], sys.argv[2], sys.argv[3]


def add(t, name, data=b"", mode=0o644, **kw):
    i = tarfile.TarInfo(name)
    for k, v in kw.items():
        setattr(i, k, v)
    i.mode = mode
    if i.type == tarfile.REGTYPE:
        i.size = len(data)
        t.addfile(i, io.BytesIO(data))
    else:
        t.addfile(i)


def layer(fill):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as t:
        fill(t)
    return buf.getvalue()


def base_layer(t):
    t.add(base, arcname=".", filter=lambda i: setattr(i, "uid", 0) or setattr(i, "gid", 0) or i)
    for d in ("data", "opq", "opq/sub", "work", "work/dir"):
        add(t, d, type=tarfile.DIRTYPE, mode=0o755)
    add(t, "data/keep", b"kept\n")
    add(t, "data/gone", b"whited out\n")
    add(t, "opq/lower", b"hidden by the opaque marker\n")
    add(t, "opq/sub/lower2", b"hidden too\n")
    add(t, "ro", type=tarfile.DIRTYPE, mode=0o555)
    add(t, "ro/f", b"in a read-only dir\n", mode=0o444)


def hostile_layer(t):
    add(t, "data/.wh.gone")
    add(t, "opq/.wh..wh..opq")
    add(t, "opq/new", b"same layer as the marker\n")
    add(t, "dev/evil", type=tarfile.CHRTYPE, devmajor=1, devminor=3, mode=0o666)
    add(t, "dev/evilblk", type=tarfile.BLKTYPE, devmajor=8, devminor=0, mode=0o660)
    add(t, "usr/bin/suid", b"#!/bin/sh\necho suid\n", mode=0o4755)
    add(t, "usr/bin/sgid", b"#!/bin/sh\necho sgid\n", mode=0o2755)
    i = tarfile.TarInfo("usr/bin/capped")
    i.mode, i.size = 0o755, 4
    i.pax_headers = {"SCHILY.xattr.security.capability": "\x01\x00\x00\x02\x00\x20\x00\x00"}
    t.addfile(i, io.BytesIO(b"cap\n"))
    add(t, "hl", type=tarfile.LNKTYPE, linkname="data/keep")
    add(t, "etcpass", type=tarfile.SYMTYPE, linkname="/etc/passwd", mode=0o777)
    add(t, "abs", type=tarfile.SYMTYPE, linkname=victim, mode=0o777)
    add(t, "rel", type=tarfile.SYMTYPE, linkname="../../../../../../../../.." + victim, mode=0o777)
    add(t, "abs/pwned", b"written through an absolute link\n")
    add(t, "rel/pwned2", b"written through a relative link\n")
    add(t, "pw", type=tarfile.SYMTYPE, linkname=victim + "/file", mode=0o777)
    add(t, "../escape", b"dot-dot member\n")
    add(t, "hlout", type=tarfile.LNKTYPE, linkname="../../../../../../etc/passwd")


def top_layer(t):
    add(t, "ro/g", b"added to a read-only dir\n", mode=0o444)
    add(t, "pw", b"replaced the link, not the host file\n")


LAYERS = [layer(base_layer), layer(hostile_layer), layer(top_layer)]
ENV = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "CUDA_VERSION=12.4.0",
       "LD_LIBRARY_PATH=/usr/local/cuda/lib64", "NVIDIA_DRIVER_CAPABILITIES=utility",
       "NVIDIA_VISIBLE_DEVICES=all", "FROM_IMAGE=yes", "OVERRIDE=image",
       "LD_PRELOAD=" + os.path.join(os.path.dirname(victim), "evil.so")]


def config(kind, diff_ids):
    c = {"Env": ENV, "WorkingDir": "/work/dir"}
    if kind == "entry":
        c.update(Entrypoint=["/bin/echo", "entry"], Cmd=["default-cmd"])
    else:
        c.update(Cmd=["/bin/sh", "-c", "pwd; env | sort"])
    return json.dumps({"architecture": "amd64", "os": "linux", "config": c,
                       "rootfs": {"type": "layers", "diff_ids": diff_ids}}).encode()


def sha(b):
    return hashlib.sha256(b).hexdigest()


def docker_archive(path, cfg):
    with tarfile.open(path, "w") as t:
        names = []
        for data in LAYERS:
            names.append(sha(data) + "/layer.tar")
            add(t, names[-1], data)
        add(t, sha(cfg) + ".json", cfg)
        m = [{"Config": sha(cfg) + ".json", "RepoTags": ["entry:1"], "Layers": names}]
        add(t, "manifest.json", json.dumps(m).encode())


def oci_layout(d, cfg):
    os.makedirs(d + "/blobs/sha256")

    def blob(b):
        open(d + "/blobs/sha256/" + sha(b), "wb").write(b)
        return {"digest": "sha256:" + sha(b), "size": len(b)}
    layers = [dict(blob(gzip.compress(x, 1, mtime=0)), mediaType="application/vnd.oci.image.layer.v1.tar+gzip")
              for x in LAYERS]
    m = json.dumps({"schemaVersion": 2, "mediaType": "application/vnd.oci.image.manifest.v1+json",
                    "config": dict(blob(cfg), mediaType="application/vnd.oci.image.config.v1+json"),
                    "layers": layers}).encode()
    desc = dict(blob(m), mediaType="application/vnd.oci.image.manifest.v1+json",
                annotations={"org.opencontainers.image.ref.name": "v1"})
    open(d + "/index.json", "w").write(json.dumps({"schemaVersion": 2, "manifests": [desc]}))
    open(d + "/oci-layout", "w").write('{"imageLayoutVersion": "1.0.0"}')
    return layers


diff_ids = ["sha256:" + sha(x) for x in LAYERS]
docker_archive(out + "/entry.docker.tar", config("entry", diff_ids))
oci_layers = oci_layout(out + "/envimg", config("env", diff_ids))
with tarfile.open(out + "/envimg.oci.tar", "w") as t:
    t.add(out + "/envimg", arcname=".")
with tarfile.open(out + "/plain.tar", "w") as t:
    t.add(base, arcname=".")
# A copy of the layout with one byte of the last layer's blob changed.
os.system("cp -r '%s/envimg' '%s/corrupt'" % (out, out))
p = out + "/corrupt/blobs/sha256/" + oci_layers[-1]["digest"][7:]
b = bytearray(open(p, "rb").read())
b[len(b) // 2] ^= 0xFF
open(p, "wb").write(bytes(b))
