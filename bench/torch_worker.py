#!/usr/bin/env python3
"""Times PyTorch's CPU grid_sampler_2d (forward) and grid_sampler_2d_backward
for bench/compare_torch.py: one long-lived process per interpreter (so each
torch version is imported once), driven by JSON lines on stdin, one JSON line
answered on stdout per command.

First line written: {"torch": VERSION}. Then, for each command

    {"dir": D, "op": "forward"|"backward", "mode": M, "padding": P,
     "align_corners": B, "dtype": "f32"|"f64"|"f16"|"bf16", "layout": "nchw"|"nhwc"|"ncdhw"|"ndhwc",
     "threads": T, "reps": R}

it loads D/input.npy, D/grid.npy and D/grad.npy (as bench/workloads.py
writes them; 5-D files: the 3-D operators), converts them to the dtype (bf16 files hold float32 values
that bfloat16 holds exactly) and, for nhwc, to channels_last memory (input
and grad), calls the op once to warm up and then R times, and answers
{"median_ms": ...}, or {"error": "..."} when this torch cannot run it (a
dtype its CPU kernel lacks, say). An empty line or end of input ends it.

    python bench/torch_worker.py   (run by compare_torch.py, not by hand)

`--memory JSON` instead runs one such command (reps ignored) in this fresh
process and answers its peak extra memory (bench/memory.py's suites).

    python bench/torch_worker.py --memory '{"dir": ..., ...}'
"""
import ctypes
import ctypes.util
import json
import resource
import statistics
import sys
import time

import numpy as np
import torch

MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
PADS = {"zeros": 0, "border": 1, "reflection": 2}
DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32, "f64": torch.float64}

_loaded = {}  # (dir, dtype, layout) -> tensors; the last one only, workloads can be large


def tensors(d, dtype, layout):
    key = (d, dtype, layout)
    if key not in _loaded:
        _loaded.clear()
        t = {k: torch.from_numpy(np.load(f"{d}/{k}.npy")).to(DTYPES[dtype]) for k in ("input", "grid", "grad")}
        if layout in ("nhwc", "ndhwc"):
            # The grid has no channel dimension; it stays as it is.
            fmt = torch.channels_last if layout == "nhwc" else torch.channels_last_3d
            for k in ("input", "grad"):
                t[k] = t[k].contiguous(memory_format=fmt)
        _loaded[key] = t
    return _loaded[key]


def peak_rss_kib(reset):
    """The process's peak resident KiB (Linux: VmHWM, else ru_maxrss, which
    also holds the peak of what a vfork-then-exec replaced: the parent's).
    reset: first return freed heap memory to the system (glibc's
    malloc_trim, as `gridsampler bench` does) and lower the peak to the
    current resident size (Linux: /proc/self/clear_refs), so what came
    before cannot hide what follows."""
    if reset:
        try:
            ctypes.CDLL(ctypes.util.find_library("c")).malloc_trim(0)
        except (OSError, AttributeError):
            pass
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            pass
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def op_call(cmd):
    """The op a command names and its arguments, on the command's tensors."""
    torch.set_num_threads(cmd["threads"])
    t = tensors(cmd["dir"], cmd["dtype"], cmd["layout"])
    mode, pad, align = MODES[cmd["mode"]], PADS[cmd["padding"]], cmd["align_corners"]
    # 5-D inputs: the 3-D operators.
    ops = torch.ops.aten
    volume = t["input"].dim() == 5
    if cmd["op"] == "backward":
        fn = ops.grid_sampler_3d_backward if volume else ops.grid_sampler_2d_backward
        args = (t["grad"], t["input"], t["grid"], mode, pad, align, [True, True])
    else:
        fn = ops.grid_sampler_3d if volume else ops.grid_sampler_2d
        args = (t["input"], t["grid"], mode, pad, align)
    return fn, args


def median_ms(cmd):
    fn, args = op_call(cmd)
    fn(*args)  # warm-up, and the place a missing kernel shows
    times = []
    for _ in range(cmd["reps"]):
        t0 = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def peak_extra(cmd):
    """bench/memory.py's measurement: peak resident MiB of 3 calls (a warm-up
    and 2 timed ones, as `gridsampler bench --reps 2` makes) over the
    process's memory once the inputs exist; the outputs count as extra."""
    fn, args = op_call(cmd)
    base = peak_rss_kib(True)
    times = []
    for i in range(3):
        t0 = time.perf_counter()
        fn(*args)  # each call's results are dropped at once
        if i:
            times.append((time.perf_counter() - t0) * 1e3)
    return {"peak_extra_mib": (peak_rss_kib(False) - base) / 1024, "median_ms": statistics.median(times),
            "torch": torch.__version__}


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--memory":
        # One command, in a process of its own (bench/memory.py).
        print(json.dumps(peak_extra(json.loads(sys.argv[2]))), flush=True)
        return
    print(json.dumps({"torch": torch.__version__}), flush=True)
    for line in sys.stdin:
        if not line.strip():
            break
        try:
            answer = {"median_ms": median_ms(json.loads(line))}
        except (RuntimeError, NotImplementedError) as e:
            answer = {"error": str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}
        print(json.dumps(answer), flush=True)


if __name__ == "__main__":
    main()
