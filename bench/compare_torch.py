#!/usr/bin/env python3
"""gridsampler's backward (and optionally forward) against PyTorch's CPU
grid_sampler_2d_backward, on a table of eight cases (CASES below: the common
training shape, a larger image with border padding, a batch-1 512x512 image,
many channels on a small image, both bicubic paddings, nearest, float64), in
one run.

For each case and thread count the two are timed in turns (torch, then
gridsampler, repeated `--rounds` times) so that the machine's drift affects
both alike; each side reports the median of its per-round medians. Prints a
markdown table with the speed-up (torch time / gridsampler time).

    /usr/bin/python3 bench/compare_torch.py [--cli build/tools/gridsampler]
        [--threads 1,2] [--reps 10] [--rounds 3]

torch is whichever the interpreter imports (Debian's python3-torch 1.13
under /usr/bin/python3); the table says which version ran.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import time

MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
PADS = {"zeros": 0, "border": 1, "reflection": 2}

# (N, C, Hin, Win, Hout, Wout), mode, padding, align_corners, dtype
CASES = [
    ((8, 64, 64, 64, 64, 64), "bilinear", "zeros", False, "f32"),
    ((4, 32, 128, 128, 128, 128), "bilinear", "border", True, "f32"),
    ((1, 3, 512, 512, 512, 512), "bilinear", "zeros", False, "f32"),
    ((2, 256, 32, 32, 32, 32), "bilinear", "reflection", False, "f32"),
    ((4, 16, 64, 64, 64, 64), "bicubic", "zeros", False, "f32"),
    ((4, 16, 64, 64, 64, 64), "bicubic", "reflection", True, "f32"),
    ((8, 64, 64, 64, 64, 64), "nearest", "zeros", False, "f32"),
    ((8, 64, 64, 64, 64, 64), "bilinear", "zeros", False, "f64"),
]


def default_cli():
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "build", "tools", "gridsampler")


def case_label(shape, mode, pad, align, dtype):
    return f"{','.join(map(str, shape))} {mode} {pad} {str(align).lower()} {dtype}"


def torch_median_ms(shape, mode, pad, align, dtype, threads, reps, op="backward"):
    import torch  # here, so that bench/thread_scaling.py can use this module without torch

    torch.set_num_threads(threads)
    n, c, hi, wi, ho, wo = shape
    dt = torch.float32 if dtype == "f32" else torch.float64
    gen = torch.Generator().manual_seed(1)
    x = torch.rand(n, c, hi, wi, generator=gen, dtype=dt) * 2 - 1
    grid = torch.rand(n, ho, wo, 2, generator=gen, dtype=dt) * 2.2 - 1.1
    go = torch.rand(n, c, ho, wo, generator=gen, dtype=dt) * 2 - 1
    if op == "backward":
        fn = torch.ops.aten.grid_sampler_2d_backward
        args = (go, x, grid, MODES[mode], PADS[pad], align, [True, True])
    else:
        fn = torch.ops.aten.grid_sampler_2d
        args = (x, grid, MODES[mode], PADS[pad], align)
    fn(*args)  # warm-up
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def ours_median_ms(cli, shape, mode, pad, align, dtype, threads, reps, op="backward"):
    cmd = [cli, "bench", "--shape", ",".join(map(str, shape)), "--op", op, "--mode", mode, "--padding", pad,
           "--dtype", dtype, "--threads", str(threads), "--reps", str(reps)]
    if align:
        cmd.append("--align-corners")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return result["median_ms"], result["gbps"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=default_cli())
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--op", choices=["backward", "forward"], default="backward")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    import torch

    print(f"torch {torch.__version__}; {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} CPUs; {args.op}; medians of {args.rounds} rounds x {args.reps} reps\n")
    header = "| case (N,C,Hin,Win,Hout,Wout mode padding align dtype) |"
    rule = "|---|"
    for t in threads:
        header += f" torch {t}T ms | ours {t}T ms | speed-up {t}T |"
        rule += "---:|---:|---:|"
    print(header)
    print(rule)
    speedups = {t: [] for t in threads}
    for shape, mode, pad, align, dtype in CASES:
        row = f"| {case_label(shape, mode, pad, align, dtype)} |"
        for t in threads:
            tt, oo = [], []
            for _ in range(args.rounds):
                tt.append(torch_median_ms(shape, mode, pad, align, dtype, t, args.reps, args.op))
                oo.append(ours_median_ms(args.cli, shape, mode, pad, align, dtype, t, args.reps, args.op)[0])
            tm, om = statistics.median(tt), statistics.median(oo)
            speedups[t].append(tm / om)
            row += f" {tm:.2f} | {om:.2f} | {tm / om:.1f}x |"
        print(row, flush=True)
    for t in threads:
        s = speedups[t]
        geo = 1.0
        for v in s:
            geo *= v
        geo **= 1.0 / len(s)
        print(f"\n{t} thread(s): geometric mean speed-up {geo:.2f}x, min {min(s):.2f}x, max {max(s):.2f}x")


if __name__ == "__main__":
    main()
