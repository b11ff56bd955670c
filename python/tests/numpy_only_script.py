"""Runs gridsampler on NumPy arrays only, in a process where importing torch fails.

Usage: python numpy_only_script.py OUT.npz. Writes every result, so that the
caller can compare them with PyTorch; exits non-zero on any failure.
"""

import importlib.abc
import itertools
import sys


class _NoTorch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"numpy-only test: something imported {name}")
        return None


sys.meta_path.insert(0, _NoTorch())

import numpy as np  # noqa: E402

import gridsampler  # noqa: E402

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")


def layouts(a):
    """The values of `a` in several memory layouts NumPy can express."""
    yield "C", np.ascontiguousarray(a)
    yield "F", np.asfortranarray(a)
    big = np.full((a.shape[0], a.shape[1] + 1, 2 * a.shape[2], a.shape[3] + 2), np.nan,
                  dtype=a.dtype)
    view = big[:, 1:, ::2, 1:-1]
    view[...] = a
    yield "sliced", view
    rev = np.ascontiguousarray(a[:, :, ::-1, ::-1])[:, :, ::-1, ::-1]  # negative strides
    assert rev.strides[2] < 0
    yield "negative", rev
    ro = np.ascontiguousarray(a)
    ro.flags.writeable = False
    yield "readonly", ro


def main(out_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 5, 7))
    g = (rng.random((2, 4, 6, 2)) * 2 - 1) * 1.15
    w = rng.standard_normal((2, 3, 4, 6))
    results = {"x": x, "g": g, "w": w}
    for dtype in (np.float64, np.float32, np.float16):
        xd, gd, wd = x.astype(dtype), g.astype(dtype), w.astype(dtype)
        for mode, padding, align in itertools.product(MODES, PADDINGS, (False, True)):
            key = f"{np.dtype(dtype).name}-{mode}-{padding}-{int(align)}"
            base = None
            for (lx, xl), (_, gl), (_, wl) in zip(layouts(xd), layouts(gd), layouts(wd)):
                out = gridsampler.grid_sample(xl, gl, mode, padding, align)
                dx, dgrid = gridsampler.grid_sample_backward(wl, xl, gl, mode, padding, align)
                got = (out, dx, dgrid)
                for r in got:
                    assert type(r) is np.ndarray and r.dtype == dtype, (key, lx, type(r), r.dtype)
                if base is None:
                    base = got
                else:  # layout-independent, bit for bit
                    for r, b in zip(got, base):
                        assert np.array_equal(r, b), (key, lx)
            results[key + "-out"], results[key + "-dx"], results[key + "-dgrid"] = base
            dx_only, none = gridsampler.grid_sample_backward(
                wd, xd, gd, mode, padding, align, output_mask=(True, False))
            assert none is None and np.array_equal(dx_only, base[1]), key
            none, dgrid_only = gridsampler.grid_sample_backward(
                wd, xd, gd, mode, padding, align, output_mask=(False, True))
            assert none is None and np.array_equal(dgrid_only, base[2]), key
    np.savez(out_path, **results)
    assert "torch" not in sys.modules, "torch was imported"
    print("numpy-only: ok,", len(results), "arrays")


if __name__ == "__main__":
    main(sys.argv[1])
