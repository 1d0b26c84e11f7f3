#!/usr/bin/env python3
"""Writes OCI image layouts for the registry test and the pull benchmark.

The layer tars are crafted entry by entry (tarfile), so that they hold what a hostile or unusual
image holds (whiteouts, an opaque directory, hard links, symlinks out of the image, a device node,
setuid bits, a file capability) exactly, whoever runs this: a `docker build` or `umoci` would need
a daemon or root to make some of these entries. The layout JSON (blobs, manifests, an index) is
written here too, with every digest computed from the bytes, as the image-spec says.

  oci_image.py test OUT --base ROOTFS --escape DIR --arch ARCH --other-arch ARCH
  oci_image.py big OUT --base ROOTFS --mib N --layers K
  oci_image.py pair OUT --base ROOTFS --mib N    two images, "one" and "two", sharing the base
                                                 and an N MiB data layer, each with its /marker
"""
import argparse
import gzip
import hashlib
import io
import json
import os
import struct
import sys
import tarfile

LAYER_GZ = "application/vnd.oci.image.layer.v1.tar+gzip"
LAYER_TAR = "application/vnd.oci.image.layer.v1.tar"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
INDEX = "application/vnd.oci.image.index.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
REF = "org.opencontainers.image.ref.name"


class Layout:
    """An OCI image layout directory: content-addressed blobs plus a top-level index.json."""

    def __init__(self, path):
        self.path = path
        self.refs = []
        os.makedirs(os.path.join(path, "blobs", "sha256"), exist_ok=True)
        with open(os.path.join(path, "oci-layout"), "w") as f:
            json.dump({"imageLayoutVersion": "1.0.0"}, f)

    def blob(self, data, media_type):
        digest = hashlib.sha256(data).hexdigest()
        with open(os.path.join(self.path, "blobs", "sha256", digest), "wb") as f:
            f.write(data)
        return {"mediaType": media_type, "digest": "sha256:" + digest, "size": len(data)}

    def json_blob(self, obj, media_type):
        return self.blob(json.dumps(obj, sort_keys=True).encode(), media_type)

    def layer(self, tar_bytes):
        """A gzip layer; returns (descriptor, diff_id). mtime 0 keeps the digest reproducible.
        A bytearray stays uncompressed (a plain tar layer, as the image-spec also allows)."""
        diff_id = "sha256:" + hashlib.sha256(tar_bytes).hexdigest()
        if isinstance(tar_bytes, bytearray):
            return self.blob(bytes(tar_bytes), LAYER_TAR), diff_id
        gz = gzip.compress(tar_bytes, compresslevel=1, mtime=0)
        return self.blob(gz, LAYER_GZ), diff_id

    def image(self, layers, arch, config=None):
        """A manifest over LAYERS (tar bytes each) with an image config; returns its descriptor."""
        descs, diff_ids = zip(*(self.layer(t) for t in layers))
        cfg = {"architecture": arch, "os": "linux", "config": config or {},
               "rootfs": {"type": "layers", "diff_ids": list(diff_ids)}}
        manifest = {"schemaVersion": 2, "mediaType": MANIFEST,
                    "config": self.json_blob(cfg, CONFIG), "layers": list(descs)}
        return self.json_blob(manifest, MANIFEST)

    def tag(self, desc, name):
        self.refs.append(dict(desc, annotations={REF: name}))

    def close(self):
        index = {"schemaVersion": 2, "mediaType": INDEX, "manifests": self.refs}
        with open(os.path.join(self.path, "index.json"), "w") as f:
            json.dump(index, f, sort_keys=True)


class Tar:
    """Builds one layer tar in memory. Every entry is owned by root, as in a published image."""

    def __init__(self):
        self.buf = io.BytesIO()
        self.tar = tarfile.open(fileobj=self.buf, mode="w", format=tarfile.PAX_FORMAT)

    def _info(self, name, kind, mode):
        info = tarfile.TarInfo(name)
        info.type, info.mode, info.uid, info.gid, info.mtime = kind, mode, 0, 0, 1700000000
        return info

    def dir(self, name, mode=0o755):
        self.tar.addfile(self._info(name, tarfile.DIRTYPE, mode))

    def file(self, name, data=b"", mode=0o644, pax=None):
        info = self._info(name, tarfile.REGTYPE, mode)
        info.size = len(data)
        if pax:
            info.pax_headers = pax
        self.tar.addfile(info, io.BytesIO(data))

    def big_file(self, name, size):
        """SIZE random bytes: gzip cannot shrink them, nor the weights and binaries of images."""
        info = self._info(name, tarfile.REGTYPE, 0o644)
        info.size = size
        self.tar.addfile(info, _Random(size))

    def symlink(self, name, target):
        info = self._info(name, tarfile.SYMTYPE, 0o777)
        info.linkname = target
        self.tar.addfile(info)

    def hardlink(self, name, target):
        info = self._info(name, tarfile.LNKTYPE, 0o644)
        info.linkname = target
        self.tar.addfile(info)

    def chardev(self, name, major, minor):
        info = self._info(name, tarfile.CHRTYPE, 0o666)
        info.devmajor, info.devminor = major, minor
        self.tar.addfile(info)

    def tree(self, root):
        """Every entry below ROOT (a directory on disk), hard links and symlinks as they are."""
        def owner_root(info):
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            return info
        for entry in sorted(os.listdir(root)):
            self.tar.add(os.path.join(root, entry), arcname=entry, filter=owner_root)

    def bytes(self):
        self.tar.close()
        return self.buf.getvalue()


class _Random(io.RawIOBase):
    def __init__(self, size):
        self.left = size

    def read(self, size=-1):
        n = self.left if size < 0 else min(size, self.left)
        self.left -= n
        return os.urandom(n)


def vfs_cap_net_raw():
    """security.capability (VFS_CAP_REVISION_2, effective) granting CAP_NET_RAW (bit 13)."""
    raw = struct.pack("<IIIII", 0x02000001, 1 << 13, 0, 0, 0)
    return raw.decode("utf-8", "surrogateescape")  # tarfile writes it back as the same bytes


def content_layer(escape):
    up = "../" * 16 + escape.lstrip("/")
    t = Tar()
    for d in ("data", "data/work", "data/opq", "data/opq/olddir"):
        t.dir(d)
    t.file("data/work/hello.txt", b"hello\n")
    t.file("data/gone.txt", b"to be whited out\n")
    t.file("data/opq/old1", b"hidden by the opaque dir\n")
    t.file("data/opq/olddir/x", b"hidden too\n")
    t.file("data/hard1", b"linked\n")
    t.hardlink("data/hard2", "data/hard1")
    t.symlink("data/abs-link", escape + "/abs-target")
    t.symlink("data/rel-link", up + "/rel-target")
    t.symlink("data/over", escape + "/over-target")
    t.chardev("data/devnode", 1, 3)
    t.file("usr/bin/suidprog", b"#!/bin/sh\necho suid\n", mode=0o4755)
    t.file("data/sgidprog", b"#!/bin/sh\necho sgid\n", mode=0o2755)
    t.file("data/capprog", b"#!/bin/sh\necho cap\n", mode=0o755,
           pax={"SCHILY.xattr.security.capability": vfs_cap_net_raw()})
    return t.bytes()


def delete_layer():
    t = Tar()
    t.file("data/.wh.gone.txt")
    t.file("data/opq/.wh..wh..opq")
    t.file("data/opq/new1", b"new\n")
    return t.bytes()


def replace_layer():
    t = Tar()
    t.file("data/over", b"replaced\n")  # a file where a lower layer has a symlink out
    return t.bytes()


def evil_layer(escape):
    """Entries that a naive unpacker would write outside the image through."""
    up = "../" * 16 + escape.lstrip("/")
    t = Tar()
    t.symlink("esc", escape)
    t.file("esc/pwned", b"written through an absolute symlink\n")
    t.symlink("up", up)
    t.file("up/pwned2", b"written through a relative symlink\n")
    t.hardlink("hl", up + "/victim")
    t.file(up + "/pwned3", b"written by a ../ entry name\n")
    return t.bytes()


def marker_layer(name, data):
    t = Tar()
    t.file(name, data)
    return t.bytes()


APP_CONFIG = {
    "Env": ["PATH=/usr/local/bin:/usr/bin:/bin", "GREETING=hello from the image",
            "CUDA_VERSION=12.4.0"],
    "WorkingDir": "/data/work",
    # A wrapper as images' docker-entrypoint.sh are: it marks the environment and runs the
    # command it is given (a CMD replaces Cmd, the Entrypoint stays, as in docker run).
    "Entrypoint": ["/bin/sh", "-c", 'export VIA_ENTRYPOINT=yes; if [ "$1" = first ]; '
                   'then echo "entry:$1:$2:$(pwd):$GREETING"; else exec "$@"; fi', "entrypoint"],
    "Cmd": ["first", "second"],
}


def test_images(args):
    lay = Layout(args.out)
    t = Tar()
    t.tree(args.base)
    base = t.bytes()
    lay.tag(lay.image([base, content_layer(args.escape), delete_layer(), replace_layer()],
                      args.arch, APP_CONFIG), "app")
    # A multi-platform index: the marker says which manifest was picked. Both carry the host's
    # base layer, so that either can run here; only the manifests' platforms differ.
    plat = []
    for arch in (args.arch, args.other_arch):
        desc = lay.image([base, marker_layer("platform", arch.encode() + b"\n")], arch)
        plat.append(dict(desc, platform={"architecture": arch, "os": "linux"}))
    index = {"schemaVersion": 2, "mediaType": INDEX, "manifests": plat}
    lay.tag(lay.json_blob(index, INDEX), "multi")
    # Uncompressed, so that the test's corruption (bytes overwritten in the file's data) leaves
    # a well-formed tar whose only fault is its digest.
    unique = bytearray(marker_layer("data/unique", os.urandom(256 * 1024)))
    corrupt, _ = lay.layer(unique)
    lay.tag(lay.image([base, unique], args.arch), "corrupt")
    lay.tag(lay.image([base, evil_layer(args.escape)], args.arch), "evil")
    lay.close()
    print(corrupt["digest"])


def big_image(args):
    """About MIB MiB of random files over LAYERS layers, on top of the base rootfs."""
    lay = Layout(args.out)
    t = Tar()
    t.tree(args.base)
    layers = [t.bytes()]
    per_layer = args.mib // args.layers
    for i in range(args.layers):
        t = Tar()
        t.dir("data%d" % i)
        for j in range(0, per_layer, 32):
            t.big_file("data%d/blob%03d" % (i, j // 32), min(32, per_layer - j) << 20)
        layers.append(t.bytes())
    lay.tag(lay.image(layers, args.arch, {"Cmd": ["/bin/sh"]}), "big")
    lay.close()


def pair_images(args):
    """Two images sharing their first two layers (the base, MIB MiB of data): what two tags of
    one base are in a registry. Each has a layer of its own with /marker naming it."""
    lay = Layout(args.out)
    t = Tar()
    t.tree(args.base)
    base = t.bytes()
    t = Tar()
    t.dir("data")
    t.big_file("data/blob", args.mib << 20)
    data = t.bytes()
    for name in ("one", "two"):
        lay.tag(lay.image([base, data, marker_layer("marker", name.encode() + b"\n")], args.arch,
                          {"Cmd": ["/bin/cat", "/marker"]}), name)
    lay.close()


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="what", required=True)
    p = sub.add_parser("test")
    p.add_argument("out")
    p.add_argument("--base", required=True)
    p.add_argument("--escape", required=True)
    p.add_argument("--arch", required=True)
    p.add_argument("--other-arch", required=True)
    p = sub.add_parser("big")
    p.add_argument("out")
    p.add_argument("--base", required=True)
    p.add_argument("--arch", required=True)
    p.add_argument("--mib", type=int, default=1024)
    p.add_argument("--layers", type=int, default=5)
    p = sub.add_parser("pair")
    p.add_argument("out")
    p.add_argument("--base", required=True)
    p.add_argument("--arch", required=True)
    p.add_argument("--mib", type=int, default=8)
    args = ap.parse_args()
    {"test": test_images, "big": big_image, "pair": pair_images}[args.what](args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
