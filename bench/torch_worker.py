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
"""
import json
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


def median_ms(cmd):
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
    fn(*args)  # warm-up, and the place a missing kernel shows
    times = []
    for _ in range(cmd["reps"]):
        t0 = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
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
