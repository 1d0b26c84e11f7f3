# The frameworks users run, one check each, for tools/gpu-frameworks.sh, which runs them under
# gpubox on a GPU host: python3 gpu_frameworks.py NAME. Each prints "NAME ok ..." when it worked.
import os, sys, time
name = sys.argv[1]
t0 = time.time()
if name == "torch_loader":
    # A healthy job: 4 DataLoader workers forked from a parent holding ~200 MiB, CUDA in the parent.
    import torch
    from torch.utils.data import DataLoader, Dataset
    class D(Dataset):
        def __init__(self): self.data = torch.randn(50_000_000)  # ~191 MiB, shared copy-on-write
        def __len__(self): return 256
        def __getitem__(self, i): return self.data[i * 1000:(i + 1) * 1000].sum()
    w = torch.randn(4096, 4096, device="cuda")
    total = 0.0
    seen = False
    for b in DataLoader(D(), batch_size=16, num_workers=4):
        total += float((w @ w).sum().item() * 0 + b.sum())
        if not seen:  # what each process holds, as the monitor reads it
            seen = True
            import psutil
            me = psutil.Process()
            tot = {}
            for p in [me] + me.children(recursive=True):
                d = {}
                for l in open(f"/proc/{p.pid}/smaps_rollup").read().splitlines()[1:]:
                    k, v = l.split(":"); d[k] = int(v.split()[0]) >> 10
                st = {l.split(":")[0]: int(l.split()[1]) >> 10 for l in open(f"/proc/{p.pid}/status") if l.startswith(("RssAnon", "RssShmem", "RssFile", "VmPTE"))}
                print("mem", p.pid, p.name(), {k: d[k] for k in ("Rss", "Pss_Anon", "Pss_Shmem", "Pss_File", "Shared_Clean", "Shared_Dirty", "Private_Dirty")}, st)
                for k in ("Pss_Anon", "Pss_Shmem"): tot[k] = tot.get(k, 0) + d[k]
                for k in ("RssAnon", "RssShmem", "VmPTE"): tot[k] = tot.get(k, 0) + st[k]
            print("mem total MiB", tot)
            # the parent's largest resident mappings
            rows = []; cur = None
            for l in open(f"/proc/{me.pid}/smaps"):
                f = l.split()
                if not f[0].endswith(":"): cur = " ".join(f[5:]) or "[anon]"
                elif f[0] in ("Anonymous:", "Rss:"): rows.append((f[0], int(f[1]) >> 10, cur))
            agg = {}
            for k, v, n in rows: agg[(k, n)] = agg.get((k, n), 0) + v
            for (k, n), v in sorted(agg.items(), key=lambda x: -x[1])[:14]: print("map", k, v, "MiB", n)
    rss = [l for l in open("/proc/self/status") if l.startswith(("RssAnon", "RssShmem"))]
    print("torch_loader ok", torch.cuda.get_device_name(0), " ".join(x.split()[1] for x in rss), "kB")
elif name == "nccl":
    import torch, torch.distributed as dist
    dist.init_process_group("nccl", init_method="tcp://127.0.0.1:29511", rank=0, world_size=1)
    x = torch.ones(1 << 20, device="cuda")
    dist.all_reduce(x)
    torch.cuda.synchronize()
    assert x[0].item() == 1.0
    print("nccl ok", torch.cuda.nccl.version())
    dist.destroy_process_group()
elif name == "triton":
    import torch, triton, triton.language as tl
    @triton.jit
    def add(x, y, o, n, B: tl.constexpr):
        i = tl.program_id(0) * B + tl.arange(0, B)
        m = i < n
        tl.store(o + i, tl.load(x + i, mask=m) + tl.load(y + i, mask=m), mask=m)
    n = 1 << 20
    x = torch.rand(n, device="cuda"); y = torch.rand(n, device="cuda"); o = torch.empty_like(x)
    add[(triton.cdiv(n, 1024),)](x, y, o, n, B=1024)
    assert torch.allclose(o, x + y)
    print("triton ok", triton.__version__)
elif name == "jax":
    import jax, jax.numpy as jnp
    d = jax.devices()
    assert len(d) == 1 and d[0].platform == "gpu", d
    a = jnp.ones((2048, 2048))
    assert float((a @ a)[0, 0]) == 2048.0
    print("jax ok", jax.__version__, d)
elif name == "cupy":
    import cupy as cp
    assert cp.cuda.runtime.getDeviceCount() == 1
    assert int(cp.arange(1000).sum()) == 499500
    print("cupy ok", cp.__version__)
elif name == "torch_hog":
    # past its memory limit with CUDA up: must end ML, not OK or an OOM of the host
    import torch
    w = torch.ones(1024, device="cuda"); torch.cuda.synchronize()
    hog = [torch.ones(64 << 20) for _ in range(32)]  # 32 x 256 MiB of host memory, touched
    print("torch_hog not stopped", len(hog))
elif name == "devcount":
    import torch
    print("devcount ok", torch.cuda.device_count())
print(f"{name}: {time.time() - t0:.1f} s")
