#!/usr/bin/python3
"""Golden data for gridsampler from PyTorch's grid_sampler_2d and its backward.

How to run (from anywhere; Debian's python3-torch must import):

    /usr/bin/python3 tests/data/make_golden.py

Made with: PyTorch 1.13.0a0 (Debian 12 python3-torch), NumPy 1.24.2, CPU,
one thread. The versions actually used are also written at the top of the
manifest tests/data/golden/cases.txt. The script is deterministic (fixed
seeds, one thread): running it again with the same versions reproduces the
files bit for bit.

It (re)writes tests/data/golden/ (next to this script):
  <id>_input.npy  (N, C, Hin, Win)      random normal
  <id>_grid.npy   (N, Hout, Wout, 2)    (x, y), see "grids" below
  <id>_grad.npy   (N, C, Hout, Wout)    random normal upstream gradient
  <id>_out.npy    torch.ops.aten.grid_sampler_2d(input, grid, mode, pad, ac)
  <id>_dx.npy     } torch.ops.aten.grid_sampler_2d_backward(
  <id>_dgrid.npy  }     grad, input, grid, mode, pad, ac, [True, True])
  cases.txt       one line per case: "id mode padding align_corners dtype"
                  (mode: bilinear|nearest|bicubic, padding: zeros|border|
                  reflection, align_corners: 0|1, dtype: f32|f64); lines
                  starting with '#' are comments.
All arrays are little-endian, C order, of the case's dtype (float32/float64);
every tensor of a case has that dtype and torch computed in it.

Cases: every interpolation x padding x align_corners x dtype combination
(36) gets the shapes below (5 cases each, 180 in all):
  rand  N=2 C=3 Hin=5 Win=7  -> Hout=4 Wout=6   random grid in [-1.6, 1.6]
                                               with some exact values mixed in
  lat   N=1 C=2 Hin=4 Win=8  -> Hout=6 Wout=8   (align_corners=0)
        N=1 C=2 Hin=5 Win=9  -> Hout=6 Wout=8   (align_corners=1)
        grid exactly on the half-pixel lattice: the unnormalised coordinates
        are integers (pixel centres) and half-integers (ties for nearest,
        band edges for reflection), from -2 to size+1 where |x| <= ~1.6.
        The sizes make size (ac=0) or size-1 (ac=1) a power of two, so
        x = (2*i+1)/W - 1 (ac=0) and x = 2*i/(W-1) - 1 (ac=1) are dyadic and
        exact in float32, and PyTorch's unnormalisation of them is exact.
  h1    N=2 C=2 Hin=1 Win=6  -> Hout=3 Wout=4   Hin = 1
  w1    N=1 C=3 Hin=6 Win=1  -> Hout=4 Wout=3   Win = 1
  p1    N=2 C=2 Hin=1 Win=1  -> Hout=3 Wout=3   Hin = Win = 1
Grids are always finite (PyTorch 1.13's CPU backward can crash on NaN).
"""

import os
import platform
import sys

import numpy as np
import torch

SEED = 20240611
MODES = {"bilinear": 0, "nearest": 1, "bicubic": 2}
PADDINGS = {"zeros": 0, "border": 1, "reflection": 2}
DTYPES = {"f32": (np.float32, torch.float32), "f64": (np.float64, torch.float64)}
# A few exact values mixed into the random grids: edges, centre, outside.
EXACT = np.array([-1.5, -1.25, -1.0, -0.5, -0.25, 0.0, 0.25, 0.5, 1.0, 1.25, 1.5])

OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")


def lattice_coords(size, align_corners):
    """Normalised coords whose unnormalised value is k/2 for k/2 in [-2, size+1]
    (clipped to |x| <= 1.6). Exact in float32 when the divisor is 2^m."""
    span = (size - 1) if align_corners else size
    assert span & (span - 1) == 0, "size (or size-1) must be a power of two"
    vals = []
    for k in range(-4, 2 * (size + 1) + 1):
        u = k / 2.0  # unnormalised coordinate
        if align_corners:
            x = 2.0 * u / span - 1.0
        else:
            x = (2.0 * u + 1.0) / span - 1.0
        if abs(x) <= 1.6:
            vals.append(x)
    return np.array(vals, dtype=np.float64)


def random_grid(rng, n, hout, wout):
    g = rng.uniform(-1.6, 1.6, size=(n, hout, wout, 2))
    # Replace about a quarter of the coordinates by exact values.
    mask = rng.random(size=g.shape) < 0.25
    g[mask] = rng.choice(EXACT, size=int(mask.sum()))
    return g


def lattice_grid(rng, n, hout, wout, hin, win, align_corners):
    xs = lattice_coords(win, align_corners)
    ys = lattice_coords(hin, align_corners)
    g = np.empty((n, hout, wout, 2))
    g[..., 0] = rng.choice(xs, size=(n, hout, wout))
    g[..., 1] = rng.choice(ys, size=(n, hout, wout))
    # Make sure every x value and every y value appears at least once.
    flat = g.reshape(-1, 2)
    flat[: len(xs), 0] = xs
    flat[: len(ys), 1] = ys[::-1]
    return g


def size1_grid(rng, n, hout, wout, hin, win, align_corners):
    g = random_grid(rng, n, hout, wout)
    # For size 1, align_corners=0: ix = x/2, so x = +-1 are ties (+-0.5).
    flat = g.reshape(-1, 2)
    flat[:4] = [[-1.0, 1.0], [1.0, -1.0], [0.0, 0.5], [-0.5, 0.0]]
    return g


def shapes_for(align_corners):
    # name, N, C, Hin, Win, Hout, Wout, grid maker
    lat_hw = (5, 9) if align_corners else (4, 8)
    return [
        ("rand", 2, 3, 5, 7, 4, 6, "random"),
        ("lat", 1, 2, lat_hw[0], lat_hw[1], 6, 8, "lattice"),
        ("h1", 2, 2, 1, 6, 3, 4, "size1"),
        ("w1", 1, 3, 6, 1, 4, 3, "size1"),
        ("p1", 2, 2, 1, 1, 3, 3, "size1"),
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
        "# Golden cases for tests/golden_test.cpp, made by tests/data/make_golden.py",
        "# torch %s, numpy %s, python %s, %s" % (torch.__version__, np.__version__,
                                                 platform.python_version(), platform.machine()),
        "# seed %d; forward: torch.ops.aten.grid_sampler_2d; backward:" % SEED,
        "# torch.ops.aten.grid_sampler_2d_backward(grad, input, grid, mode, padding, align_corners, [True, True])",
        "# id mode padding align_corners dtype",
    ]
    count = 0
    for mode, mode_i in MODES.items():
        for pad, pad_i in PADDINGS.items():
            for ac in (0, 1):
                for dname, (np_dt, t_dt) in DTYPES.items():
                    for (sname, n, c, hin, win, hout, wout, kind) in shapes_for(ac):
                        cid = "%s_%s_ac%d_%s_%s" % (mode, pad, ac, dname, sname)
                        inp = rng.standard_normal((n, c, hin, win))
                        grad = rng.standard_normal((n, c, hout, wout))
                        if kind == "random":
                            grid = random_grid(rng, n, hout, wout)
                        elif kind == "lattice":
                            grid = lattice_grid(rng, n, hout, wout, hin, win, ac)
                        else:
                            grid = size1_grid(rng, n, hout, wout, hin, win, ac)
                        inp = inp.astype(np_dt)
                        grad = grad.astype(np_dt)
                        grid = grid.astype(np_dt)
                        assert np.all(np.isfinite(grid))
                        ti = torch.from_numpy(inp)
                        tg = torch.from_numpy(grid)
                        tgr = torch.from_numpy(grad)
                        assert ti.dtype == t_dt
                        out = torch.ops.aten.grid_sampler_2d(ti, tg, mode_i, pad_i, bool(ac))
                        ref = torch.nn.functional.grid_sample(
                            ti, tg, mode=mode, padding_mode=pad, align_corners=bool(ac))
                        assert torch.equal(out, ref)
                        dx, dgrid = torch.ops.aten.grid_sampler_2d_backward(
                            tgr, ti, tg, mode_i, pad_i, bool(ac), [True, True])
                        base = os.path.join(OUT_DIR, cid)
                        save(base + "_input.npy", inp, np_dt)
                        save(base + "_grid.npy", grid, np_dt)
                        save(base + "_grad.npy", grad, np_dt)
                        save(base + "_out.npy", out.numpy(), np_dt)
                        save(base + "_dx.npy", dx.numpy(), np_dt)
                        save(base + "_dgrid.npy", dgrid.numpy(), np_dt)
                        lines.append("%s %s %s %d %s" % (cid, mode, pad, ac, dname))
                        count += 1
    with open(os.path.join(OUT_DIR, "cases.txt"), "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %d cases to %s" % (count, OUT_DIR), file=sys.stderr)


if __name__ == "__main__":
    main()
