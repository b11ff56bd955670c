"""Speed and memory of gradient-penalty steps (second order): gridsampler vs PyTorch.

Each step is a forward, a ``create_graph=True`` gradient, a loss on that
gradient, and ``.backward()``, so it runs grid_sample's double backward:

  eikonal   feature planes 3,32,128,128, 65,536 points (grid (3, 1, 65536, 2)),
            bilinear border align_corners, a fixed linear head over the
            channels; loss = mean((|df/dp| - 1)^2)
  r1        images 8,3,64,64 through an affine augmentation warp, bilinear
            reflection; loss = sum((d sum(out * w) / d input)^2)
  bicubic   4,16,64,64 -> 64x64, random grid in [-1.1, 1.1], zeros;
            loss = sum((d sum(out * w) / d grid)^2)

Variants: ``torch`` (F.grid_sample: PyTorch's kernels and its composite double
backward) and ``gridsampler`` (gridsampler.torch.grid_sample: its kernels and
native double backward). Times: the variants interleaved step by step, median
per variant and the ratio in the same run. Memory: each variant in its own
subprocess, the peak resident size during the steps (VmHWM, which ru_maxrss
reports, reset after a warm-up step) minus the resident size before the
measured steps.

    python python/benchmarks/second_order_step.py [--threads 2] [--steps 15] [--only eikonal]
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

import gridsampler.torch as gst

SAMPLERS = {"torch": F.grid_sample, "gridsampler": gst.grid_sample}


def make(workload):
    gen = torch.Generator().manual_seed(0)
    if workload == "eikonal":
        planes = torch.randn(3, 32, 128, 128, generator=gen, requires_grad=True)
        head = torch.randn(32, generator=gen)
        pts = torch.rand(3, 1, 65536, 2, generator=gen) * 2 - 1

        def step(sample):
            p = pts.clone().requires_grad_()
            feat = sample(planes, p, mode="bilinear", padding_mode="border", align_corners=True)
            f = torch.einsum("nckp,c->nkp", feat, head)
            (df,) = torch.autograd.grad(f.sum(), p, create_graph=True)
            loss = ((df.norm(dim=-1) - 1) ** 2).mean()
            planes.grad = None
            loss.backward()
            return loss.item(), planes.grad
        return step
    if workload == "r1":
        images = torch.randn(8, 3, 64, 64, generator=gen)
        angle = (torch.rand(8, generator=gen) - 0.5) * 0.4
        theta = torch.stack([torch.stack([angle.cos(), -angle.sin(), 0.05 * angle], 1),
                             torch.stack([angle.sin(), angle.cos(), -0.05 * angle], 1)], 1)
        theta.requires_grad_()  # the penalty's gradient reaches the warp's parameters
        w = torch.randn(8, 3, 64, 64, generator=gen)

        def step(sample):
            x = images.clone().requires_grad_()
            grid = F.affine_grid(theta, (8, 3, 64, 64), align_corners=False)
            out = sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
            (dx,) = torch.autograd.grad((out * w).sum(), x, create_graph=True)
            loss = (dx ** 2).sum()
            theta.grad = None
            loss.backward()
            return loss.item(), theta.grad
        return step
    if workload == "bicubic":
        x = torch.randn(4, 16, 64, 64, generator=gen, requires_grad=True)
        g0 = torch.rand(4, 64, 64, 2, generator=gen) * 2.2 - 1.1
        w = torch.randn(4, 16, 64, 64, generator=gen)

        def step(sample):
            g = g0.clone().requires_grad_()
            out = sample(x, g, mode="bicubic", padding_mode="zeros", align_corners=False)
            (dg,) = torch.autograd.grad((out * w).sum(), g, create_graph=True)
            loss = (dg ** 2).sum()
            x.grad = None
            loss.backward()
            return loss.item(), x.grad
        return step
    raise ValueError(workload)


WORKLOADS = ("eikonal", "r1", "bicubic")


def time_workload(workload, steps):
    step = make(workload)
    results = {name: step(s) for name, s in SAMPLERS.items()}  # warm-up, and the check
    (la, ga), (lb, gb) = results["torch"], results["gridsampler"]
    scale = max(1.0, ga.abs().max().item())
    err = (ga - gb).abs().max().item() / scale
    times = {name: [] for name in SAMPLERS}
    for _ in range(steps):
        for name, sample in SAMPLERS.items():
            t0 = time.perf_counter()
            step(sample)
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(t) * 1e3 for name, t in times.items()}, abs(la - lb) / max(1.0, abs(la)), err


def peak_mib(workload, variant, steps, threads):
    """Peak resident memory of `steps` steps above the process's resident
    memory before them, in a fresh process, after one warm-up step. The peak (VmHWM, what ru_maxrss
    reports) is reset to the current size first through /proc/self/clear_refs,
    so that torch's import and the setup do not hide the steps' peak."""
    code = f"""
import sys, torch
sys.path.insert(0, {repr(sys.path[0])})
torch.set_num_threads({threads})
import second_order_step as b
def status(key):
    for line in open("/proc/self/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1])
step = b.make({workload!r})
step(b.SAMPLERS[{variant!r}])  # one-time costs (lazy imports, the op's first call) are not the step's
open("/proc/self/clear_refs", "w").write("5")
before = status("VmRSS")
for _ in range({steps}):
    step(b.SAMPLERS[{variant!r}])
print((status("VmHWM") - before) / 1024)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--memory-steps", type=int, default=3)
    ap.add_argument("--only", choices=WORKLOADS)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rows = []
    print(f"torch {torch.__version__}, {args.threads} threads, median of {args.steps} interleaved steps")
    print(f"{'workload':10s} {'torch ms':>9s} {'gs ms':>8s} {'speed-up':>8s} "
          f"{'torch MiB':>9s} {'gs MiB':>7s} {'grad err':>9s}")
    for wl in WORKLOADS if args.only is None else (args.only,):
        ms, loss_err, grad_err = time_workload(wl, args.steps)
        mem = {v: peak_mib(wl, v, args.memory_steps, args.threads) for v in SAMPLERS}
        row = dict(workload=wl, torch_ms=ms["torch"], gridsampler_ms=ms["gridsampler"],
                   speedup=ms["torch"] / ms["gridsampler"], torch_peak_mib=mem["torch"],
                   gridsampler_peak_mib=mem["gridsampler"], loss_rel_err=loss_err,
                   grad_rel_err=grad_err)
        rows.append(row)
        print(f"{wl:10s} {row['torch_ms']:9.1f} {row['gridsampler_ms']:8.1f} {row['speedup']:7.2f}x "
              f"{row['torch_peak_mib']:9.1f} {row['gridsampler_peak_mib']:7.1f} {grad_err:9.1e}")
    if args.json:
        print(json.dumps(rows))


if __name__ == "__main__":
    main()
