#!/usr/bin/env python3
"""A random sweep of 2-D grid_sample problems outside the named suite,
gridsampler against the torch of this interpreter, to find classes of use
that run slower than PyTorch. bench/workloads.py's named workloads are what
the project is tuned on; this draws shapes, grid kinds, modes, paddings,
align_corners, dtypes and layouts at random (a fixed seed gives the same
cases), so that the tuning is checked on problems nobody picked.

For each case: inputs made by bench/workloads.py's grid kinds into a
temporary folder, then `rounds` rounds, each one `gridsampler bench`
process (median of `reps` calls) and `reps` torch calls in this process
(their median), 2 threads each by default. Printed: torch ms / ours ms per
case, then the geometric mean, the minimum and the count under 1x.

    python bench/random_sweep.py --cli build/tools/gridsampler [--seed 1] [--count 40]
        [--op backward|forward] [--rounds 3] [--reps 5] [--threads 2]

Run it with an interpreter that has torch (the venv of scripts/ci-python.sh).
Cases are float32 or float64 only: torch 2.15's float16 and bfloat16 CPU
kernels corrupted their heap or crashed here on larger images (a 2,2,384x768
bilinear backward, an 8,12,200^2 bicubic float16 forward;
docs/performance.md, "Sparse backwards in every layout"), so 16-bit cases
are not drawn. Sizes are capped at about 2e7 input plus output elements.
"""
import argparse
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workloads as W  # noqa: E402

DTYPES = {"f32": torch.float32, "f64": torch.float64}
CLI_DTYPES = {"f32": "float32", "f64": "float64"}
MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
PADS = {"zeros": 0, "border": 1, "reflection": 2}


def draw(rng):
    """One random Workload."""
    n = rng.choice([1, 2, 4, 8, 16, 32, 64, 128, 256, 1024])
    c = rng.choice([1, 1, 2, 3, 3, 4, 5, 6, 8, 12, 16, 24, 32, 64])
    hi = rng.choice([8, 16, 28, 32, 48, 64, 96, 128, 200, 256, 384, 512])
    wi = rng.choice([hi, hi, hi * 2, max(4, hi // 2)])
    kind = rng.choice(["affine", "smooth", "uniform", "resize", "window", "far_affine", "points"])
    if kind == "window":
        ho = wo = rng.choice([3, 5, 7, 9, 16])
    elif kind == "points":
        ho, wo = 1, rng.choice([64, 256, 1024, 4096])
    elif kind == "resize":
        f = rng.choice([0.25, 0.5, 2.0, 1.5])
        ho, wo = max(1, int(hi * f)), max(1, int(wi * f))
    else:
        ho, wo = hi, wi
    while n * c * (hi * wi + ho * wo) > 2e7 and n > 1:
        n //= 2
    while n * c * (hi * wi + ho * wo) > 2e7 and c > 1:
        c //= 2
    mode = rng.choice(["bilinear", "bilinear", "bilinear", "nearest", "bicubic"])
    pad = rng.choice(["zeros", "border", "reflection"])
    align = rng.choice([True, False])
    dtype = rng.choice(["f32", "f32", "f32", "f64"])  # (no 16 bits: see the module's text)
    layout = rng.choice(["nchw", "nchw", "nhwc"])
    return W.Workload("sweep", "random_sweep.py", (n, c, hi, wi, ho, wo), kind, mode, pad, align, dtype, layout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", required=True)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--count", type=int, default=40)
    ap.add_argument("--op", choices=["forward", "backward"], default="backward")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    rng = random.Random(args.seed)
    ratios = []
    with tempfile.TemporaryDirectory() as folder:
        for i in range(args.count):
            w = draw(rng)
            arrays = W.make_inputs(w)
            for k, a in arrays.items():
                np.save(f"{folder}/{k}.npy", a)
            t = {k: torch.from_numpy(a).to(DTYPES[w.dtype]) for k, a in arrays.items()}
            if w.layout == "nhwc":
                for k in ("input", "grad"):
                    t[k] = t[k].contiguous(memory_format=torch.channels_last)
            mode, pad = MODES[w.mode], PADS[w.padding]

            def torch_once():
                if args.op == "forward":
                    torch.ops.aten.grid_sampler_2d(t["input"], t["grid"], mode, pad, w.align_corners)
                else:
                    torch.ops.aten.grid_sampler_2d_backward(t["grad"], t["input"], t["grid"], mode, pad,
                                                            w.align_corners, [True, True])

            torch_once()  # warm-up
            cmd = [args.cli, "bench", "--input", f"{folder}/input.npy", "--grid", f"{folder}/grid.npy", "--op",
                   args.op, "--mode", w.mode, "--padding", w.padding, "--dtype", CLI_DTYPES[w.dtype], "--layout",
                   w.layout, "--threads", str(args.threads), "--reps", str(args.reps)]
            if args.op == "backward":
                cmd += ["--grad", f"{folder}/grad.npy"]
            if w.align_corners:
                cmd.append("--align-corners")
            ours, theirs = [], []
            for _ in range(args.rounds):
                out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
                ours.append(json.loads(out.strip().splitlines()[-1])["median_ms"])
                times = []
                for _ in range(args.reps):
                    start = time.perf_counter()
                    torch_once()
                    times.append((time.perf_counter() - start) * 1e3)
                theirs.append(statistics.median(times))
            o, th = statistics.median(ours), statistics.median(theirs)
            ratios.append(th / o)
            print(f"{i:3d} {th / o:6.2f}x  torch {th:9.3f} ms  ours {o:9.3f} ms  {w.label()}", flush=True)
    geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
    print(f"torch {torch.__version__}, {args.op}, {args.threads} threads: geometric mean {geo:.2f}x, "
          f"min {min(ratios):.2f}x, under 1x: {sum(r < 1 for r in ratios)} of {len(ratios)}")


if __name__ == "__main__":
    main()
