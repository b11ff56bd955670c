#!/usr/bin/env python3
"""Peak extra memory of grid sampling: PyTorch against gridsampler.

    /usr/bin/python3 bench/memory.py [--suite tuned|real|volumes] [--op forward,backward]
        [--cli build/tools/gridsampler]
        [--torch-python ~/.cache/gridsampler/venv-py3.11/bin/python]
        [--threads 2] [--runs 1] [--cases SUBSTRING ...]

Suites: `tuned` (the default) is the eight backward cases below, on random
data each side makes for itself; `real` and `volumes` are the named
workloads of bench/workloads.py (compare_torch.py's suites), forward and
backward (--op), on the workloads' own files: each side loads the same .npy
files (PyTorch through bench/torch_worker.py --memory, gridsampler through
`gridsampler bench --input --grid --grad`) and converts them to the
workload's dtype and layout before the baseline.

Each side runs each case in a fresh process of its own, 3 calls (backward:
output_mask both gradients), with --threads threads:

  * PyTorch: torch.ops.aten.grid_sampler_2d_backward (the suites: the
    workload's op, 2-D or 3-D), called 3 times by the interpreter given as
    --torch-python (torch.set_num_threads(--threads)); each call's results
    are dropped as soon as it returns.
  * gridsampler: `<cli> bench --reps 2` (a warm-up call and 2 timed ones),
    which reports peak_extra_mib in its JSON line.

"Extra" is the same on both sides: the process's peak resident memory
(Linux: VmHWM, which ru_maxrss reports) after the 3 calls, minus its resident memory once
the inputs (input, grid, grad) exist and are filled. The outputs (output,
or dx and dgrid) do not exist yet at that point, on either side, so they count as extra: the
outputs PyTorch allocates in each call, the ones the CLI allocates once
before its calls. Just before the baseline, freed heap memory is returned
to the system (glibc's malloc_trim) and the peak is lowered to the current
resident size (Linux: writing 5 to /proc/self/clear_refs), so that neither
memory the start-up freed (which a call could reuse without growing) nor a
transient peak of the start-up (importing torch, filling the inputs) can
hide part of the calls' memory. The tuned cases' inputs are filled in
place on both sides. Both sides start their thread pools during the calls,
after the baseline.

Prints a markdown table: case, each side's MiB and the ratio ours / torch
(the medians over --runs processes), and each side's median time per call
from the same runs (2 timed calls: indicative only).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
PADS = {"zeros": 0, "border": 1, "reflection": 2}

# (N, C, Hin, Win, Hout, Wout), mode, padding, align_corners, dtype
CASES = [
    ((8, 64, 64, 64, 64, 64), "bilinear", "zeros", False, "f32"),
    ((1, 3, 512, 512, 512, 512), "bilinear", "zeros", False, "f32"),
    ((3, 32, 128, 128, 256, 256), "bilinear", "zeros", False, "f32"),  # 65,536 points per plane
    ((4, 32, 128, 128, 128, 128), "bilinear", "border", True, "f32"),
    ((4, 32, 256, 256, 256, 256), "bilinear", "zeros", False, "f32"),
    ((512, 1, 32, 32, 32, 32), "bilinear", "zeros", False, "f32"),
    ((1, 1, 768, 768, 768, 768), "bilinear", "zeros", False, "f32"),
    ((4096, 1, 32, 48, 7, 7), "bilinear", "zeros", True, "f32"),
]

HERE = os.path.dirname(os.path.abspath(__file__))

# The PyTorch side of the tuned cases, run as `python -c TORCH_CHILD '<json args>'`.
TORCH_CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
import torch
from torch_worker import peak_rss_kib

a = json.loads(sys.argv[1])
torch.set_num_threads(a["threads"])
n, c, hi, wi, ho, wo = a["shape"]
dt = torch.float32 if a["dtype"] == "f32" else torch.float64
gen = torch.Generator().manual_seed(1)
# Filled in place: no temporaries, whose freed memory the op could reuse.
x = torch.empty(n, c, hi, wi, dtype=dt).uniform_(-1, 1, generator=gen)
grid = torch.empty(n, ho, wo, 2, dtype=dt).uniform_(-1.1, 1.1, generator=gen)
go = torch.empty(n, c, ho, wo, dtype=dt).uniform_(-1, 1, generator=gen)
base = peak_rss_kib(True)
fn = torch.ops.aten.grid_sampler_2d_backward
args = (go, x, grid, a["mode"], a["padding"], a["align"], [True, True])
fn(*args)  # warm-up, like the CLI's
times = []
for _ in range(2):
    t0 = time.perf_counter()
    fn(*args)
    times.append((time.perf_counter() - t0) * 1e3)
print(json.dumps({"peak_extra_mib": (peak_rss_kib(False) - base) / 1024,
                  "median_ms": sum(times) / len(times), "torch": torch.__version__}))
"""


def case_label(shape, mode, pad, align, dtype):
    return f"{','.join(map(str, shape))} {mode} {pad} {str(align).lower()} {dtype}"


def run_torch(python, case, threads):
    shape, mode, pad, align, dtype = case
    arg = json.dumps({"shape": shape, "mode": MODES[mode], "padding": PADS[pad], "align": align,
                      "dtype": dtype, "threads": threads})
    out = subprocess.run([python, "-c", TORCH_CHILD, arg, HERE], check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_ours(cli, case, threads):
    shape, mode, pad, align, dtype = case
    cmd = [cli, "bench", "--shape", ",".join(map(str, shape)), "--op", "backward", "--mode", mode,
           "--padding", pad, "--dtype", dtype, "--threads", str(threads), "--reps", "2"]
    if align:
        cmd.append("--align-corners")
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def run_torch_files(python, w, folder, op, threads):
    from compare_torch import worker_command

    cmd = worker_command(w, folder, op, threads, reps=2)
    out = subprocess.run([python, os.path.join(HERE, "torch_worker.py"), "--memory", json.dumps(cmd)],
                         capture_output=True, text=True)
    if out.returncode != 0:  # a dtype this torch's CPU kernel lacks, say
        print(f"  torch, {w.name} {op}: {(out.stderr.strip().splitlines() or ['failed'])[-1]}", file=sys.stderr)
        return None
    return json.loads(out.stdout.strip().splitlines()[-1])


def medians(runs, key):
    return None if None in runs else statistics.median(r[key] for r in runs)


def fmt(v, spec):
    return "n/a" if v is None else format(v, spec)


def main_suite(args):
    """The named workloads: a table per suite, forward and backward."""
    import tempfile
    import shutil

    from compare_torch import ours_files_result, save_inputs
    from workloads import VOLUME_WORKLOADS, WORKLOADS

    workloads = [w for w in (WORKLOADS if args.suite == "real" else VOLUME_WORKLOADS)
                 if not args.cases or any(c in w.label() for c in args.cases)]
    if not workloads:
        sys.exit("no workload matches --cases")
    ops = args.op.split(",")
    rows, ratios, version = [], [], None
    for w in workloads:
        folder = tempfile.mkdtemp(prefix="gs_memory_")
        try:
            save_inputs(w, folder)
            for op in ops:
                t = [run_torch_files(args.torch_python, w, folder, op, args.threads) for _ in range(args.runs)]
                o = [ours_files_result(args.cli, w, folder, op, args.threads, 2) for _ in range(args.runs)]
                version = version or next((r["torch"] for r in t if r), None)
                tm, om = medians(t, "peak_extra_mib"), medians(o, "peak_extra_mib")
                tt, ot = medians(t, "median_ms"), medians(o, "median_ms")
                ratio = None if tm is None else om / max(tm, 0.1)
                if ratio is not None:
                    ratios.append((ratio, om - tm, f"{w.name} {op}"))
                rows.append(f"| {w.label()} | {op} | {fmt(tm, '.1f')} | {om:.1f} | {fmt(ratio, '.2f')} | "
                            f"{fmt(tt, '.2f')} | {ot:.2f} |")
                print(f"  {w.name} {op}: torch {fmt(tm, '.1f')} MiB, ours {om:.1f} MiB", file=sys.stderr)
        finally:
            shutil.rmtree(folder)
    print(f"{args.suite} suite; torch {version}; {args.threads} threads, 3 calls; peak extra MiB "
          f"(median of {args.runs} process(es) per side)\n")
    print("| workload | op | torch MiB | ours MiB | ours/torch | torch ms | ours ms |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(row)
    over = [r for r in ratios if r[0] > 1.5]
    print(f"\nover 1.5x PyTorch's: {len(over)} of {len(ratios)}" +
          "".join(f"; {name} {r:.2f}x (+{d:.1f} MiB)" for r, d, name in sorted(over, reverse=True)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=os.path.join(HERE, "..", "build", "tools", "gridsampler"))
    ap.add_argument("--torch-python",
                    default=os.path.expanduser("~/.cache/gridsampler/venv-py3.11/bin/python"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=1, help="processes per case and side (median)")
    ap.add_argument("--cases", action="append", help="keep cases whose label contains this")
    ap.add_argument("--suite", choices=["tuned", "real", "volumes"], default="tuned")
    ap.add_argument("--op", default="forward,backward", help="suites real and volumes: the ops measured")
    args = ap.parse_args()
    if args.suite != "tuned":
        return main_suite(args)
    cases = [c for c in CASES if not args.cases or any(s in case_label(*c) for s in args.cases)]
    if not cases:
        sys.exit("no case matches --cases")
    version = None
    rows = []
    for case in cases:
        t = [run_torch(args.torch_python, case, args.threads) for _ in range(args.runs)]
        o = [run_ours(args.cli, case, args.threads) for _ in range(args.runs)]
        version = t[0]["torch"]
        tm = statistics.median(r["peak_extra_mib"] for r in t)
        om = statistics.median(r["peak_extra_mib"] for r in o)
        tt = statistics.median(r["median_ms"] for r in t)
        ot = statistics.median(r["median_ms"] for r in o)
        rows.append(f"| {case_label(*case)} | {tm:.1f} | {om:.1f} | {om / max(tm, 0.1):.2f} | "
                    f"{tt:.2f} | {ot:.2f} |")
    print(f"torch {version}; backward, {args.threads} threads, 3 calls; peak extra MiB "
          f"(median of {args.runs} process(es) per side)\n")
    print("| case (N,C,Hin,Win,Hout,Wout mode padding align dtype) | torch MiB | ours MiB | ours/torch "
          "| torch ms | ours ms |")
    print("|---|---:|---:|---:|---:|---:|")
    for row in rows:
        print(row)


if __name__ == "__main__":
    main()
