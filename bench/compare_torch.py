#!/usr/bin/env python3
"""gridsampler against PyTorch's CPU grid_sampler_2d (forward) and
grid_sampler_2d_backward, on named real workloads, several torch versions in
one run.

    python3 bench/compare_torch.py [--suite real|tuned|volumes] [--op forward,backward]
        [--threads 2] [--rounds 3] [--reps 10] [--filter REGEX]
        [--cli build/tools/gridsampler]
        [--torch ~/.cache/gridsampler/venv-py3.11/bin/python,/usr/bin/python3]

Suites:
  real   bench/workloads.py's WORKLOADS: the shapes, options and grids of
         calls that models and tools make (spatial transformers, RAFT
         correlation lookups, registration, NeRF feature planes, resizing,
         far coordinates, channels-last, float64, float16/bfloat16, ...).
  tuned  the eight cases the kernels were tuned on (CASES below), each with a
         uniformly random grid in [-1.1, 1.1]; README and docs/performance.md
         quote tables of these.
  volumes  bench/workloads.py's VOLUME_WORKLOADS: 5-D grid_sample against
         torch.ops.aten.grid_sampler_3d[_backward], on the same kind of
         files.

Every side times the same data: for each workload the input, grid and grad
are drawn once (fixed seed, numpy) into a temporary folder as .npy files.
Each interpreter given to --torch runs bench/torch_worker.py as one
long-lived subprocess (Debian's python3-torch 1.13 under /usr/bin/python3, a
newer torch in a venv); gridsampler is timed through `gridsampler bench
--input --grid --grad`. Within a round the sides run in turns (each torch,
then gridsampler), `--rounds` times, so that the machine's drift affects all
alike; each side's figure is the median of its per-round medians of `--reps`
calls (after one warm-up call). A torch that cannot run a workload (a dtype
its CPU kernel lacks) shows "n/a".

Prints, per op and thread count, a markdown table: the times, the ratio torch
time / gridsampler time (above 1: gridsampler is faster) for each torch, and
GB/s of gridsampler and of the first torch, GB/s counting every input and
output once each (bench/workloads.py's bytes_moved, the definition `gridsampler
bench` uses). The header gives this machine's copy bandwidth
(bench/copy_bandwidth.py) as the yardstick; then geometric means of the
ratios.

This module imports only the standard library at load time (bench/ab.py and
bench/thread_scaling.py import CASES and ours_median_ms from it); numpy is
needed to run the suites.
"""
import argparse
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

import copy_bandwidth

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_TORCH = [os.path.expanduser("~/.cache/gridsampler/venv-py3.11/bin/python"), "/usr/bin/python3"]

# The tuned cases: (N, C, Hin, Win, Hout, Wout), mode, padding, align_corners,
# dtype: the common training shape, a larger border/align case, a batch-1
# 512x512 image, many channels on a small image, both bicubic paddings,
# nearest, float64.
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
    return os.path.join(HERE, "..", "build", "tools", "gridsampler")


def case_label(shape, mode, pad, align, dtype):
    return f"{','.join(map(str, shape))} {mode} {pad} {str(align).lower()} {dtype}"


def ours_median_ms(cli, shape, mode, pad, align, dtype, threads, reps, op="backward"):
    """`gridsampler bench` on its own random data (for bench/thread_scaling.py
    and bench/ab.py): (median_ms, gbps)."""
    cmd = [cli, "bench", "--shape", ",".join(map(str, shape)), "--op", op, "--mode", mode, "--padding", pad,
           "--dtype", dtype, "--threads", str(threads), "--reps", str(reps)]
    if align:
        cmd.append("--align-corners")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    return result["median_ms"], result["gbps"]


def bytes_of(w, op):
    from workloads import VolumeWorkload, bytes_moved, volume_bytes_moved

    return volume_bytes_moved(w, op) if isinstance(w, VolumeWorkload) else bytes_moved(w, op)


def ours_files_ms(cli, w, folder, op, threads, reps):
    """`gridsampler bench` on a workload's files: median ms."""
    return ours_files_result(cli, w, folder, op, threads, reps)["median_ms"]


def ours_files_result(cli, w, folder, op, threads, reps):
    """`gridsampler bench` on a workload's files: its JSON answer (median_ms,
    gbps, peak_extra_mib, ...)."""
    cmd = [cli, "bench", "--input", f"{folder}/input.npy", "--grid", f"{folder}/grid.npy", "--op", op,
           "--mode", w.mode, "--padding", w.padding, "--dtype", w.dtype, "--layout", w.layout,
           "--threads", str(threads), "--reps", str(reps)]
    if op == "backward":
        cmd += ["--grad", f"{folder}/grad.npy"]
    if w.align_corners:
        cmd.append("--align-corners")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    result = json.loads(out.strip().splitlines()[-1])
    # The tables' GB/s come from bytes_moved; the CLI counts its own: they
    # must be the same definition.
    expected = bytes_of(w, op) / (result["median_ms"] * 1e6)
    if abs(result["gbps"] - expected) > 1e-3 * expected + 1e-6:
        raise RuntimeError(f"{w.name} {op}: the CLI reports {result['gbps']} GB/s, bytes_moved gives {expected}")
    return result


def worker_command(w, folder, op, threads, reps):
    """bench/torch_worker.py's command for a workload's files."""
    return {"dir": folder, "op": op, "mode": w.mode, "padding": w.padding, "align_corners": w.align_corners,
            "dtype": w.dtype, "layout": w.layout, "threads": threads, "reps": reps}


class TorchWorker:
    """bench/torch_worker.py under one interpreter, kept running."""

    def __init__(self, python):
        self.python = python
        self.proc = subprocess.Popen([python, os.path.join(HERE, "torch_worker.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, bufsize=1)
        hello = self.proc.stdout.readline()
        if not hello:
            raise RuntimeError(f"{python}: bench/torch_worker.py did not start (is torch installed there?)")
        self.version = json.loads(hello)["torch"]

    def median_ms(self, w, folder, op, threads, reps):
        """Median ms, or None when this torch cannot run the workload."""
        self.proc.stdin.write(json.dumps(worker_command(w, folder, op, threads, reps)) + "\n")
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.python}: bench/torch_worker.py exited during {w.name} {op}")
        answer = json.loads(line)
        if "error" in answer:
            print(f"  torch {self.version}, {w.name} {op}: {answer['error']}", file=sys.stderr)
            return None
        return answer["median_ms"]

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def tuned_workloads():
    from workloads import Workload  # numpy: only when a suite runs

    return [Workload(case_label(*case), "tuned case", case[0], "uniform", mode=case[1], padding=case[2],
                     align_corners=case[3], dtype=case[4]) for case in CASES]


def save_inputs(w, folder):
    import numpy as np

    from workloads import VolumeWorkload, make_inputs, make_volume_inputs

    make = make_volume_inputs if isinstance(w, VolumeWorkload) else make_inputs
    for name, array in make(w).items():
        np.save(os.path.join(folder, f"{name}.npy"), array)


def geomean(values):
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def fmt_ms(v):
    return "n/a" if v is None else f"{v:.3f}" if v < 1 else f"{v:.2f}"


def print_table(op, threads, workloads, results, workers, label_of):
    """results[(name, op, threads)] = {"ours": ms, version: ms or None}."""

    versions = [wk.version for wk in workers]
    header = "| workload |" + "".join(f" torch {v} ms |" for v in versions) + " ours ms |"
    header += "".join(f" vs {v} |" for v in versions) + " ours GB/s |"
    header += f" torch {versions[0]} GB/s |" if versions else ""
    rule = "|---|" + "---:|" * (2 * len(versions) + 2 + (1 if versions else 0))
    print(f"\n{op}, {threads} thread{'s' if threads > 1 else ''} (ratio = torch ms / ours ms)\n")
    print(header)
    print(rule)
    ratios = {v: [] for v in versions}
    for w in workloads:
        r = results[(w.name, op, threads)]
        ours = r["ours"]
        row = f"| {label_of(w)} |" + "".join(f" {fmt_ms(r[v])} |" for v in versions) + f" {fmt_ms(ours)} |"
        for v in versions:
            if r[v] is None:
                row += " n/a |"
            else:
                ratios[v].append(r[v] / ours)
                row += f" {r[v] / ours:.2f}x |"
        gb = bytes_of(w, op) / 1e6
        row += f" {gb / ours:.1f} |"
        if versions:
            row += " n/a |" if r[versions[0]] is None else f" {gb / r[versions[0]]:.1f} |"
        print(row)
    print()
    for v in versions:
        s = ratios[v]
        if s:
            print(f"vs torch {v}: geometric mean ratio {geomean(s):.2f}x over {len(s)} workloads "
                  f"(min {min(s):.2f}x, max {max(s):.2f}x)  ")
        else:
            print(f"vs torch {v}: no workload ran  ")
    sys.stdout.flush()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", choices=["real", "tuned", "volumes"], default="real")
    ap.add_argument("--cli", default=default_cli())
    ap.add_argument("--torch", default=",".join(DEFAULT_TORCH),
                    help="interpreters with torch, comma-separated; each runs bench/torch_worker.py")
    ap.add_argument("--op", default="forward,backward")
    ap.add_argument("--threads", default="2", help="thread counts, comma-separated")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--filter", default="", help="regular expression: time the workloads whose name matches")
    args = ap.parse_args()
    ops = args.op.split(",")
    if any(op not in ("forward", "backward") for op in ops):
        ap.error("--op: forward, backward or both")
    threads = [int(t) for t in args.threads.split(",")]

    if args.suite == "real":
        from workloads import WORKLOADS

        workloads, label_of = WORKLOADS, lambda w: w.label()
    elif args.suite == "volumes":
        from workloads import VOLUME_WORKLOADS

        workloads, label_of = VOLUME_WORKLOADS, lambda w: w.label()
    else:
        workloads, label_of = tuned_workloads(), lambda w: w.name
    workloads = [w for w in workloads if re.search(args.filter, w.name)]
    if not workloads:
        ap.error(f"--filter {args.filter!r} matches no workload")

    workers = []
    for python in filter(None, args.torch.split(",")):
        if not os.path.exists(python):
            print(f"note: {python} not found, left out", file=sys.stderr)
            continue
        try:
            workers.append(TorchWorker(python))
        except RuntimeError as e:
            print(f"note: {e}; left out", file=sys.stderr)

    cpu = platform.processor() or platform.machine()
    print(f"{args.suite} suite; {', '.join(f'torch {wk.version} ({wk.python})' for wk in workers) or 'no torch'}; "
          f"gridsampler {os.path.relpath(args.cli)}; {cpu}, {os.cpu_count()} CPUs; "
          f"medians of {args.rounds} rounds x {args.reps} reps  ")
    for t in sorted({1} | set(threads)):
        print(copy_bandwidth.summary(t) + "  ")
    # Other work on the machine moves every figure (a thread that loses its
    # core holds the others at the next barrier): say how busy it was.
    print("load average (1, 5, 15 min) at start: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()) + "  ")
    sys.stdout.flush()

    results = {}
    for w in workloads:
        folder = tempfile.mkdtemp(prefix="gs_workload_")
        try:
            save_inputs(w, folder)
            for op in ops:
                for t in threads:
                    times = {"ours": []} | {wk.version: [] for wk in workers}
                    for _ in range(args.rounds):
                        for wk in workers:
                            times[wk.version].append(wk.median_ms(w, folder, op, t, args.reps))
                        times["ours"].append(ours_files_ms(args.cli, w, folder, op, t, args.reps))
                    results[(w.name, op, t)] = {
                        k: None if None in v else statistics.median(v) for k, v in times.items()}
                    print(f"  {w.name} {op} {t}T: " + ", ".join(
                        f"{k} {fmt_ms(v)}" for k, v in results[(w.name, op, t)].items()), file=sys.stderr)
        finally:
            shutil.rmtree(folder)
    for wk in workers:
        wk.close()
    print("load average (1, 5, 15 min) at end: " + ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    for op in ops:
        for t in threads:
            print_table(op, t, workloads, results, workers, label_of)


if __name__ == "__main__":
    main()
