#!/usr/bin/env python3
"""Golden data for volumes from PyTorch's grid_sampler_3d and its backward.

How to run (from anywhere; PyTorch 2.15 must import):

    ~/.cache/gridsampler/venv-py3.11/bin/python tests/data/make_golden_3d.py

Made with PyTorch 2.15.0 (CPU, one thread) and NumPy 2.4; the versions used
are written at the top of the manifest tests/data/golden3d/cases.txt. Fixed
seeds and one thread: running it again with the same versions reproduces the
files bit for bit.

To keep the data small, the cases of one shape and dtype share their inputs
and stack their results along a leading axis. It (re)writes
tests/data/golden3d/ (next to this script):
  <set>_input.npy  (N, C, Din, Hin, Win)          random normal
  <set>_grid.npy   (N, Dout, Hout, Wout, 3)        (x, y, z), see "grids"
  <set>_grad.npy   (N, C, Dout, Hout, Wout)        random normal upstream gradient
  <set>_out.npy    (K, N, C, Dout, Hout, Wout)     torch.ops.aten.grid_sampler_3d
  <set>_dx.npy     (K, N, C, Din, Hin, Win)      } torch.ops.aten.grid_sampler_3d_backward(
  <set>_dgrid.npy  (K, N, Dout, Hout, Wout, 3)   }   grad, input, grid, mode, padding,
                                                     align_corners, [True, True])
  cases.txt        one line per case: "set index mode padding align_corners dtype",
                   index k selecting [k] of the stacked results (mode: bilinear|
                   nearest|bicubic, padding: zeros|border|reflection,
                   align_corners: 0|1, dtype: f32|f64); '#' starts a comment.
Arrays are little-endian, C order, of the set's dtype (float32/float64); torch
computed in that dtype.

Sets, each in f32 and f64 (<kind>_<dtype>):
  rand  N=2 C=2 in 2x3x4 -> out 2x3x3, every mode x padding x align (18 x 2):
        random grid in [-1.6, 1.6] with exact values (edges, centre, outside)
        mixed in.
  lat0  N=1 C=2 in 2x4x4 -> out 2x2x4, align_corners=0, every mode x padding;
  lat1  N=1 C=2 in 3x5x5 -> out 2x2x4, align_corners=1, every mode x padding:
        every component exactly on the half-pixel lattice (unnormalised values
        k/2 from -2 to size+1, |x| <= 1.6): pixel centres, and half-way points
        (ties for nearest, reflection band edges). Each size (ac=0) or size-1
        (ac=1) is a power of two, so the values are dyadic and PyTorch's
        unnormalisation of them is exact.
  d1    N=1 C=2 in 1x3x4 -> out 1x2x3   Din = 1   } every mode x padding x align,
  h1    N=1 C=2 in 3x1x4 -> out 1x2x3   Hin = 1   } random grids with +-1, 0 and
  w1    N=1 C=2 in 3x4x1 -> out 1x2x3   Win = 1   } +-0.5 mixed in (size 1,
  p1    N=1 C=2 in 1x1x1 -> out 1x2x3   all 1     } align 0: +-1 are ties)
Grids are finite: the rules for NaN, Inf and huge values are the library's own
(docs/design.md section 2), tested in C++.
"""

import os
import platform
import sys

import numpy as np
import torch

SEED = 20261204
MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}
DTYPES = {"f32": (np.float32, torch.float32), "f64": (np.float64, torch.float64)}
EXACT = np.array([-1.5, -1.25, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 1.25, 1.5])

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden3d")


def lattice_coords(size, align_corners):
    """Normalised coords whose unnormalised value is k/2 for k/2 in [-2, size+1]
    (clipped to |x| <= 1.6). Exact in float32 when the divisor is 2^m."""
    span = (size - 1) if align_corners else size
    assert span & (span - 1) == 0, "size (or size-1) must be a power of two"
    vals = []
    for k in range(-4, 2 * (size + 1) + 1):
        u = k / 2.0
        x = 2.0 * u / span - 1.0 if align_corners else (2.0 * u + 1.0) / span - 1.0
        if abs(x) <= 1.6:
            vals.append(x)
    return np.array(vals, dtype=np.float64)


def random_grid(rng, shape):
    g = rng.uniform(-1.6, 1.6, size=shape)
    mask = rng.random(size=g.shape) < 0.25
    g[mask] = rng.choice(EXACT, size=int(mask.sum()))
    return g


def lattice_grid(rng, n, out, size, align_corners):
    """size = (Din, Hin, Win); component 0 (x) follows W, 1 (y) H, 2 (z) D."""
    g = np.empty((n,) + out + (3,))
    flat = g.reshape(-1, 3)
    for comp, axis_size in enumerate((size[2], size[1], size[0])):
        vals = lattice_coords(axis_size, align_corners)
        assert len(vals) <= flat.shape[0], "grid too small for every lattice value"
        col = rng.choice(vals, size=flat.shape[0])
        # Every value at least once, each component in its own order.
        col[: len(vals)] = np.roll(vals, 3 * comp)
        flat[:, comp] = col
    return g


def size1_grid(rng, n, out):
    g = random_grid(rng, (n,) + out + (3,))
    flat = g.reshape(-1, 3)
    flat[:4] = [[-1.0, 1.0, 0.5], [1.0, -1.0, -0.5], [0.0, 0.5, 1.0], [-0.5, 0.0, -1.0]]
    return g


def sets():
    """(kind, N, C, in (D, H, W), out (D, H, W), grid maker, aligns)."""
    return [
        ("rand", 2, 2, (2, 3, 4), (2, 3, 3), "random", (0, 1)),
        ("lat0", 1, 2, (2, 4, 4), (2, 2, 4), "lattice", (0,)),
        ("lat1", 1, 2, (3, 5, 5), (2, 2, 4), "lattice", (1,)),
        ("d1", 1, 2, (1, 3, 4), (1, 2, 3), "size1", (0, 1)),
        ("h1", 1, 2, (3, 1, 4), (1, 2, 3), "size1", (0, 1)),
        ("w1", 1, 2, (3, 4, 1), (1, 2, 3), "size1", (0, 1)),
        ("p1", 1, 2, (1, 1, 1), (1, 2, 3), "size1", (0, 1)),
    ]


def save(path, arr, np_dtype):
    arr = np.ascontiguousarray(arr, dtype=np.dtype(np_dtype).newbyteorder("<"))
    np.save(path, arr, allow_pickle=False)


def main():
    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    rng = np.random.default_rng(SEED)
    os.makedirs(OUT_DIR, exist_ok=True)
    for f in os.listdir(OUT_DIR):
        if f.endswith(".npy") or f == "cases.txt":
            os.remove(os.path.join(OUT_DIR, f))

    lines = [
        "# Golden cases for tests/volume_reference_test.cpp, made by tests/data/make_golden_3d.py",
        "# torch %s, numpy %s, python %s, %s" % (torch.__version__, np.__version__,
                                                 platform.python_version(), platform.machine()),
        "# seed %d; forward: torch.ops.aten.grid_sampler_3d; backward:" % SEED,
        "# torch.ops.aten.grid_sampler_3d_backward(grad, input, grid, mode, padding, align_corners, [True, True])",
        "# set index mode padding align_corners dtype",
    ]
    count = 0
    for (kind, n, c, size, out, maker, aligns) in sets():
        # One set of values per kind, rounded to each dtype.
        inp = rng.standard_normal((n, c) + size)
        grad = rng.standard_normal((n, c) + out)
        if maker == "random":
            grid = random_grid(rng, (n,) + out + (3,))
        elif maker == "lattice":
            grid = lattice_grid(rng, n, out, size, aligns[0])
        else:
            grid = size1_grid(rng, n, out)
        assert np.all(np.isfinite(grid))
        for dname, (np_dt, t_dt) in DTYPES.items():
            set_id = "%s_%s" % (kind, dname)
            ti = torch.from_numpy(inp.astype(np_dt))
            tg = torch.from_numpy(grid.astype(np_dt))
            tgr = torch.from_numpy(grad.astype(np_dt))
            assert ti.dtype == t_dt
            outs, dxs, dgrids = [], [], []
            for mode, mode_i in MODES.items():
                for pad, pad_i in PADDINGS.items():
                    for ac in aligns:
                        o = torch.ops.aten.grid_sampler_3d(ti, tg, mode_i, pad_i, bool(ac))
                        ref = torch.nn.functional.grid_sample(
                            ti, tg, mode=mode, padding_mode=pad, align_corners=bool(ac))
                        assert torch.equal(o, ref)
                        dx, dgrid = torch.ops.aten.grid_sampler_3d_backward(
                            tgr, ti, tg, mode_i, pad_i, bool(ac), [True, True])
                        lines.append("%s %d %s %s %d %s" % (set_id, len(outs), mode, pad, ac, dname))
                        outs.append(o.numpy())
                        dxs.append(dx.numpy())
                        dgrids.append(dgrid.numpy())
                        count += 1
            base = os.path.join(OUT_DIR, set_id)
            save(base + "_input.npy", ti.numpy(), np_dt)
            save(base + "_grid.npy", tg.numpy(), np_dt)
            save(base + "_grad.npy", tgr.numpy(), np_dt)
            save(base + "_out.npy", np.stack(outs), np_dt)
            save(base + "_dx.npy", np.stack(dxs), np_dt)
            save(base + "_dgrid.npy", np.stack(dgrids), np_dt)
    with open(os.path.join(OUT_DIR, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %d cases to %s" % (count, OUT_DIR), file=sys.stderr)


if __name__ == "__main__":
    main()
