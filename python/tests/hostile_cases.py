"""Hostile calls of the Python API, run in a child process by test_hostile.py.

Usage: python hostile_cases.py CASE... (every case when none is named).
Prints a JSON line when a case starts and one with its outcome, so that the
parent can tell which case took the process down if one does. A case passes
when the call raises the expected exception with the library's message, or
returns the right values: against torch.nn.functional.grid_sample in float64
where torch is available, analytically where the arrays are too large for it.
"""

import json
import os
import re
import sys
import traceback

import numpy as np

import gridsampler

CASES = {}  # name -> (function, environment it needs, needs torch)


def case(name, env=None, torch=False):
    def register(fn):
        assert name not in CASES, name
        CASES[name] = (fn, env or {}, torch)
        return fn
    return register


class Skip(Exception):
    pass


def need_torch():
    try:
        import torch
    except ImportError:
        if os.environ.get("GRIDSAMPLER_REQUIRE_TORCH") == "1":
            raise
        raise Skip("torch is not installed")
    return torch


def raises(exc, message, fn, *args, **kwargs):
    """`fn` raises exactly `exc` whose message contains `message` (a plain string)."""
    try:
        fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 (what came back is the point)
        assert type(e) is exc, f"raised {type(e).__name__}: {e} (expected {exc.__name__})"
        assert message in str(e), f"message {str(e)!r} lacks {message!r}"
        return
    raise AssertionError(f"returned normally; expected {exc.__name__}: {message}")


# ---------------------------------------------------------------------------
# Data and references.

def problem(dtype=np.float32, shape=(2, 3, 5, 7, 4, 6), seed=0, spread=1.15):
    n, c, hi, wi, ho, wo = shape
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, hi, wi)).astype(dtype)
    g = ((rng.random((n, ho, wo, 2)) * 2 - 1) * spread).astype(dtype)
    w = rng.standard_normal((n, c, ho, wo)).astype(dtype)
    return x, g, w


TOL = {"float64": 1e-12, "float32": 2e-5, "float16": 4 * 2.0**-10, "bfloat16": 4 * 2.0**-7}


def as_f64(a):
    """A float64 NumPy copy of an array or tensor (bfloat16 included)."""
    if type(a).__module__.startswith("torch"):
        return a.detach().double().numpy()
    return np.array(a, dtype=np.float64)


def close(got, want, dtype_name, what):
    got, want = as_f64(got), as_f64(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    if want.size == 0:
        return
    assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaNs differ"
    err = np.nanmax(np.abs(got - want)) if not np.isnan(want).all() else 0.0
    scale = max(1.0, float(np.nanmax(np.abs(want))) if not np.isnan(want).all() else 1.0)
    assert err <= TOL[dtype_name] * scale, f"{what}: max error {err:.3g} > {TOL[dtype_name]:.3g} * {scale:.3g}"


def torch_reference(x, g, w, mode="bilinear", padding="zeros", align=False):
    """F.grid_sample's output and the gradients of sum(out * w), in float64."""
    torch = need_torch()
    xt = torch.from_numpy(as_f64(x)).requires_grad_()
    gt = torch.from_numpy(as_f64(g)).requires_grad_()
    out = torch.nn.functional.grid_sample(xt, gt, mode, padding, align)
    (out * torch.from_numpy(as_f64(w))).sum().backward()
    return out.detach(), xt.grad, gt.grad


def check_numpy_call(x, g, w, mode="bilinear", padding="zeros", align=False, **kwargs):
    """grid_sample and grid_sample_backward on NumPy (x, g, w) match torch."""
    name = np.dtype(x.dtype).name
    out = gridsampler.grid_sample(x, g, mode, padding, align, **kwargs)
    dx, dgrid = gridsampler.grid_sample_backward(w, x, g, mode, padding, align, **kwargs)
    ref = torch_reference(x, g, w, mode, padding, align)
    for got, want, what in zip((out, dx, dgrid), ref, ("out", "dx", "dgrid")):
        close(got, want, name, what)


# ---------------------------------------------------------------------------
# Wrong types and ranks.

X, G, W = problem()


@case("none_input")
def _():
    raises(ValueError, "input: expected 4 dimensions, got 0", gridsampler.grid_sample, None, G)


@case("none_grid")
def _():
    raises(ValueError, "grid: expected 4 dimensions, got 0", gridsampler.grid_sample, X, None)


@case("none_grad")
def _():
    raises(ValueError, "grad: expected 4 dimensions, got 0", gridsampler.grid_sample_backward, None, X, G)


@case("string_input")
def _():
    raises(ValueError, "input: expected 4 dimensions, got 0", gridsampler.grid_sample, "image", G)


@case("object_without_dlpack")
def _():
    raises(ValueError, "input: expected 4 dimensions, got 0", gridsampler.grid_sample, object(), G)


@case("shape_only_object")
def _():
    class Shaped:  # looks like an array, holds nothing
        shape = (1, 1, 2, 2)
    raises(TypeError, "input: cannot read", gridsampler.grid_sample, Shaped(), G[:1])


@case("dlpack_that_raises")
def _():
    class Broken:
        shape, dtype = (1, 1, 2, 2), np.float32

        def __dlpack__(self, *args, **kwargs):
            raise RuntimeError("no capsule today")

        def __dlpack_device__(self):
            return (1, 0)
    raises(TypeError, "input: cannot read", gridsampler.grid_sample, Broken(), G[:1])


@case("dlpack_that_returns_garbage")
def _():
    class Liar:
        shape, dtype = (1, 1, 2, 2), np.float32

        def __dlpack__(self, *args, **kwargs):
            return "not a capsule"

        def __dlpack_device__(self):
            return (1, 0)
    raises(TypeError, "input: cannot read", gridsampler.grid_sample, Liar(), G[:1])


@case("nested_lists_4d")
def _():
    x = X[:1, :1].tolist()  # float64 from lists
    g = np.asarray(G[:1], dtype=np.float64).tolist()
    out = gridsampler.grid_sample(x, g)
    close(out, torch_reference(np.asarray(x), np.asarray(g), np.zeros((1, 1, 4, 6)))[0], "float64", "out")


@case("ragged_nested_lists")
def _():
    raises(ValueError, "input: ", gridsampler.grid_sample, [[[[1.0, 2.0], [3.0]]]], G[:1])


@case("lists_of_strings")
def _():
    raises(TypeError, "input: cannot read", gridsampler.grid_sample, [[[["a", "b"]]]], G[:1])


@case("rank_3_input")
def _():
    raises(ValueError, "input: expected 4 dimensions, got 3", gridsampler.grid_sample, X[0], G)


@case("rank_5_input")
def _():
    raises(ValueError, "input: expected 4 dimensions, got 5", gridsampler.grid_sample, X[..., None], G)


@case("rank_1_grid")
def _():
    raises(ValueError, "grid: expected 4 dimensions, got 1", gridsampler.grid_sample, X, G.ravel())


@case("rank_0_grad")
def _():
    raises(ValueError, "grad: expected 4 dimensions, got 0", gridsampler.grid_sample_backward,
           np.float32(1), X, G)


# ---------------------------------------------------------------------------
# Dtypes.

for _dt in ("int8", "int32", "int64", "uint8", "uint16", "bool", "complex64", "complex128"):
    @case(f"dtype_{_dt}")
    def _(dt=_dt):
        x, g = X.astype(dt), G.astype(dt)
        raises(TypeError, f"input: dtype {dt} is not supported", gridsampler.grid_sample, x, g)
        raises(TypeError, f"input: dtype {dt} is not supported", gridsampler.grid_sample_backward,
               W.astype(dt), x, g)


@case("dtype_object")
def _():
    raises(TypeError, "input: cannot read", gridsampler.grid_sample, X.astype(object), G)


@case("dtype_mixed_float")
def _():
    raises(TypeError, "grid: dtype float64 differs from input's float32", gridsampler.grid_sample,
           X, G.astype(np.float64))
    raises(TypeError, "grad: dtype float16 differs from input's float32",
           gridsampler.grid_sample_backward, W.astype(np.float16), X, G)


@case("dtype_int_grid")
def _():
    raises(TypeError, "grid: dtype int32 is not supported", gridsampler.grid_sample, X,
           G.astype(np.int32))


@case("dtype_float16_values")
def _():
    check_numpy_call(*problem(np.float16), "bicubic", "reflection", True)


@case("dtype_float64_values")
def _():
    check_numpy_call(*problem(np.float64), "nearest", "border", False)


# ---------------------------------------------------------------------------
# Shapes, modes and options.

@case("grid_last_dim_3")
def _():
    raises(ValueError, "grid: last dimension must be 2, got 3", gridsampler.grid_sample, X,
           np.zeros((2, 4, 6, 3), np.float32))


@case("batch_mismatch")
def _():
    raises(ValueError, "grid: batch size 1 does not match input's 2", gridsampler.grid_sample, X, G[:1])


@case("zero_height_input")
def _():
    raises(ValueError, "input: height and width must be positive, got H=0, W=7",
           gridsampler.grid_sample, X[:, :, :0], G)


@case("grad_shape_mismatch")
def _():
    raises(ValueError, "grad: shape (2, 3, 4, 5) must be (2, 3, 4, 6)", gridsampler.grid_sample_backward,
           W[..., :5], X, G)


@case("empty_batch_channels_and_output")
def _():
    for x, g in ((X[:0], G[:0]), (X[:, :0], G), (X, G[:, :0])):
        out = gridsampler.grid_sample(x, g)
        assert out.shape == (x.shape[0], x.shape[1], g.shape[1], g.shape[2]) and out.size == 0
        dx, dgrid = gridsampler.grid_sample_backward(np.zeros(out.shape, np.float32), x, g)
        assert dx.shape == x.shape and not dx.any() and dgrid.shape == g.shape and not dgrid.any()


@case("unknown_modes")
def _():
    for mode in ("area", "", "Bilinear"):
        raises(ValueError, f"mode: unknown value {mode!r}", gridsampler.grid_sample, X, G, mode)
    for padding in ("circular", "ZEROS"):
        raises(ValueError, f"padding_mode: unknown value {padding!r}", gridsampler.grid_sample, X, G,
               "bilinear", padding)
    raises(ValueError, "mode: unknown value None", gridsampler.grid_sample, X, G, None)
    raises(ValueError, "padding_mode: unknown value 1", gridsampler.grid_sample_backward, W, X, G,
           "bilinear", 1)


@case("output_mask_none")
def _():
    assert gridsampler.grid_sample_backward(W, X, G, output_mask=(False, False)) == (None, None)


# ---------------------------------------------------------------------------
# Thread counts.

def _max():
    return gridsampler.max_threads()


@case("threads_valid")
def _():
    x, g, w = problem(np.float32, (2, 20, 9, 11, 13, 17), seed=4)
    base = gridsampler.grid_sample(x, g, "bicubic", "border", num_threads=1)
    for t in (0, 2, 3, _max(), True, np.int64(2)):
        assert np.array_equal(gridsampler.grid_sample(x, g, "bicubic", "border", num_threads=t), base), t
    check_numpy_call(x, g, w, "bicubic", "border", num_threads=_max())


@case("threads_negative")
def _():
    for t in (-1, -(2**31)):
        raises(ValueError, f"num_threads: must be 0 (all) or positive, got {t}", gridsampler.grid_sample,
               X, G, num_threads=t)
    for t in (-(2**31) - 1, -(10**30)):
        raises(ValueError, f"num_threads: must be 0 (all) or positive, got {t}",
               gridsampler.grid_sample_backward, W, X, G, num_threads=t)


@case("threads_huge")
def _():
    for t in (_max() + 1, 10**9, 2**31 - 1, 2**31, 10**30):
        message = f"num_threads: at most {_max()} on this machine, got {t}"
        raises(ValueError, message, gridsampler.grid_sample, X, G, num_threads=t)
        raises(ValueError, message, gridsampler.grid_sample_backward, W, X, G, num_threads=t)


@case("threads_not_integers")
def _():
    for t, kind in ((1.5, "float"), ("2", "str"), (None, "NoneType"), (np.float64(2), "float64"),
                    ([2], "list")):
        raises(TypeError, f"num_threads: expected an integer, got {kind}", gridsampler.grid_sample, X, G,
               num_threads=t)


@case("omp_num_threads_huge", env={"OMP_NUM_THREADS": "100000"})
def _():
    # OpenMP's default of 10^5 threads is capped (it made libgomp crash).
    x, g, w = problem(np.float32, (2, 20, 9, 11, 13, 17), seed=5)
    for fn, args in ((gridsampler.grid_sample, (x, g)), (gridsampler.grid_sample_backward, (w, x, g))):
        default = fn(*args, "bilinear", "reflection")
        one = fn(*args, "bilinear", "reflection", num_threads=1)
        for a, b in zip(default if isinstance(default, tuple) else (default,),
                        one if isinstance(one, tuple) else (one,)):
            assert np.array_equal(a, b)
    check_numpy_call(x, g, w, "bilinear", "reflection")


@case("omp_thread_limit", env={"OMP_THREAD_LIMIT": "3"})
def _():
    assert _max() == 3, _max()
    raises(ValueError, "num_threads: at most 3 on this machine, got 4", gridsampler.grid_sample, X, G,
           num_threads=4)
    assert np.array_equal(gridsampler.grid_sample(X, G, num_threads=3), gridsampler.grid_sample(X, G))


# ---------------------------------------------------------------------------
# Memory: read-only, broadcast and huge virtual arrays.

@case("read_only_arrays")
def _():
    x, g, w = problem(np.float64, seed=6)
    for a in (x, g, w):
        a.flags.writeable = False
    check_numpy_call(x, g, w, "bilinear", "border", True)


@case("broadcast_arrays")
def _():
    x, g, w = problem(np.float32, seed=7)
    xb = np.broadcast_to(x[:1, :, :1, :], x.shape)  # zero strides in N and H
    gb = np.broadcast_to(g[:1], g.shape)
    wb = np.broadcast_to(w[:, :1], w.shape)
    check_numpy_call(xb, gb, wb, "bicubic", "zeros", False)


@case("broadcast_output_directly")
def _():
    # The extension itself refuses an output whose elements share memory.
    from gridsampler import _gridsampler as _C
    out = np.broadcast_to(np.zeros((1, 1, 1, 1), np.float32), (2, 3, 4, 6))
    raises(TypeError, "", _C.forward, X, G, out, "bilinear", "zeros", False)
    writable_zero_strides = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (2, 3, 4, 6),
                                                            (0, 0, 0, 0))
    raises(ValueError, "output: strides make two elements share memory", _C.forward, X, G,
           writable_zero_strides, "bilinear", "zeros", False)


@case("huge_virtual_image")
def _():
    # A 2^31 x 2^31 image of 3s: 2^62 elements read through zero strides.
    x = np.broadcast_to(np.float32(3), (1, 1, 2**31, 2**31))
    g = np.asarray([[[[0.25, -0.5], [-0.75, 0.5], [0.999, 0.0], [3.0, 0.0]]]], np.float32)
    out = gridsampler.grid_sample(x, g, "nearest", "zeros", True)
    assert out.ravel().tolist() == [3.0, 3.0, 3.0, 0.0], out
    out = gridsampler.grid_sample(x, g, "bilinear", "border", False)
    assert np.abs(out - 3.0).max() <= 3 * 2e-6, out
    # Only dgrid (dx would hold the image's 2^62 elements): nearest has no
    # gradient along the grid, bilinear a finite one.
    go = np.ones((1, 1, 1, 4), np.float32)
    none, dgrid = gridsampler.grid_sample_backward(go, x, g, "nearest", output_mask=(False, True))
    assert none is None and np.array_equal(dgrid, np.zeros_like(g))
    _, dgrid = gridsampler.grid_sample_backward(go, x, g, "bilinear", output_mask=(False, True))
    assert np.isfinite(dgrid).all()


@case("huge_virtual_grid_empty_output")
def _():
    g = np.broadcast_to(np.zeros((), np.float32), (1, 2**31, 2**31, 2))
    out = gridsampler.grid_sample(X[:1, :0], g)  # C = 0: 2^62 pixels, nothing to write
    assert out.shape == (1, 0, 2**31, 2**31)


@case("dimension_beyond_2_40")
def _():
    x = np.broadcast_to(np.zeros((), np.float32), (1, 1, 2**41, 1))
    raises(ValueError, "input: dimension 2 is 2199023255552, more than the supported 2^40",
           gridsampler.grid_sample, x, np.zeros((1, 1, 1, 2), np.float32))


@case("strides_beyond_2_63_bytes")
def _():
    # Strides that no buffer backs: refused before anything is read.
    x = np.lib.stride_tricks.as_strided(np.zeros(1), (1, 1, 3, 2), (0, 0, 2**62, 8))
    raises(ValueError, "input: strides address more than 2^63 bytes", gridsampler.grid_sample, x,
           np.zeros((1, 1, 1, 2)))


# ---------------------------------------------------------------------------
# Non-finite and huge coordinates.

SPECIALS = np.asarray([np.nan, np.inf, -np.inf, 1e30, -1e30, 0.5], np.float32)


def _special_grid(dtype):
    sx, sy = np.meshgrid(SPECIALS, SPECIALS, indexing="ij")
    return np.stack([sx, sy], -1).reshape(1, 6, 6, 2).astype(dtype)


@case("non_finite_grids")
def _():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 3, 4, 5))
    g = _special_grid(np.float64)
    w = rng.standard_normal((1, 3, 6, 6))
    finite = np.isfinite(g).all(-1)
    for mode in gridsampler.MODES:
        for padding in gridsampler.PADDING_MODES:
            for align in (False, True):
                what = f"{mode} {padding} {align}"
                out = gridsampler.grid_sample(x, g, mode, padding, align)
                dx, dgrid = gridsampler.grid_sample_backward(w, x, g, mode, padding, align)
                # Values are finite (docs: non-finite coordinates sample a
                # padding pixel or nothing), gradients of such coordinates 0.
                for r, name in ((out, "out"), (dx, "dx"), (dgrid, "dgrid")):
                    assert np.isfinite(r).all(), f"{what}: {name} not finite"
                assert not dgrid[~finite].any(), what
                # Where both coordinates are finite, torch's values.
                ref_out, _, ref_dgrid = torch_reference(x, np.where(np.isfinite(g), g, 0), w, mode,
                                                        padding, align)
                close(out[..., finite], ref_out.numpy()[..., finite], "float64", what + " out")
                close(dgrid[finite], ref_dgrid.numpy()[finite], "float64", what + " dgrid")
                # dx is the adjoint of the forward: <out, w> = <x, dx>.
                lhs, rhs = float((out * w).sum()), float((x * dx).sum())
                assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs)), (what, lhs, rhs)


@case("non_finite_input_values")
def _():
    x, g, w = problem(np.float32, seed=9)
    x[0, 0, 1, 1], x[1, 2, 0, 3], x[0, 1, 4, 6] = np.nan, np.inf, -np.inf
    check_numpy_call(x, g, w, "bilinear", "zeros", False)


# ---------------------------------------------------------------------------
# gridsampler.torch.grid_sample with tensors that require grad.

def _gt():
    torch = need_torch()
    import gridsampler.torch as gt
    return torch, gt


def _leaf(torch, a, dtype=None):
    t = torch.from_numpy(np.ascontiguousarray(a))
    return (t.to(dtype) if dtype is not None else t).requires_grad_()


def check_torch_call(x, g, mode="bilinear", padding="zeros", align=False, leaves=None):
    """gt.grid_sample forward and autograd match F.grid_sample on the same leaves."""
    torch, gt = _gt()
    leaves = leaves if leaves is not None else (x, g)
    dtype_name = str(x.dtype).replace("torch.", "")
    results = []
    for fn in (gt.grid_sample, torch.nn.functional.grid_sample):
        for leaf in leaves:
            leaf.grad = None
        if fn is gt.grid_sample:
            out = fn(x, g, mode, padding, align)
        else:
            out = fn(x.double(), g.double(), mode, padding, align)
        w = torch.linspace(-1, 1, out.numel(), dtype=torch.float64).reshape(out.shape)
        (out.double() * w).sum().backward()
        results.append([out.detach()] + [leaf.grad.clone() if leaf.grad is not None else None
                                         for leaf in leaves])
    for i, (got, want) in enumerate(zip(*results)):
        if want is None:
            assert got is None
        else:
            close(got, want, dtype_name, f"result {i}")


@case("torch_wrong_types", torch=True)
def _():
    torch, gt = _gt()
    g = torch.zeros(2, 4, 6, 2, requires_grad=True)
    raises(TypeError, "input: expected a torch.Tensor, got NoneType", gt.grid_sample, None, g,
           align_corners=False)
    raises(TypeError, "input: expected a torch.Tensor, got ndarray", gt.grid_sample, X, g,
           align_corners=False)
    raises(TypeError, "grid: expected a torch.Tensor, got list", gt.grid_sample,
           torch.zeros(2, 3, 5, 7, requires_grad=True), G.tolist(), align_corners=False)


@case("torch_ranks_and_shapes", torch=True)
def _():
    torch, gt = _gt()
    x = torch.zeros(2, 3, 5, 7, requires_grad=True)
    g = torch.zeros(2, 4, 6, 2, requires_grad=True)
    raises(ValueError, "input: expected 4 dimensions, got 5", gt.grid_sample, x[..., None], g,
           align_corners=False)
    raises(ValueError, "grid: expected 4 dimensions, got 3", gt.grid_sample, x, g[0], align_corners=False)
    raises(ValueError, "grid: last dimension must be 2, got 3", gt.grid_sample, x,
           torch.zeros(2, 4, 6, 3, requires_grad=True), align_corners=False)
    raises(ValueError, "grid: batch size 1 does not match input's 2", gt.grid_sample, x, g[:1],
           align_corners=False)
    raises(ValueError, "mode: unknown value 'area'", gt.grid_sample, x, g, "area", align_corners=False)


@case("torch_dtypes", torch=True)
def _():
    torch, gt = _gt()
    x = torch.zeros(2, 3, 5, 7, requires_grad=True)
    g = torch.zeros(2, 4, 6, 2, requires_grad=True)
    raises(TypeError, "grid: dtype float64 differs from input's float32", gt.grid_sample, x,
           g.double().detach().requires_grad_(), align_corners=False)
    for dt, name in ((torch.complex64, "complex64"), (torch.int32, "int32"), (torch.bool, "bool")):
        xd, gd = x.detach().to(dt), g.detach().to(dt)
        if dt.is_complex:
            xd.requires_grad_()
        raises(TypeError, f"input: dtype {name} is not supported", gt.grid_sample, xd, gd,
               align_corners=False)


@case("torch_values_low_precision", torch=True)
def _():
    torch, _ = _gt()
    for dtype in (torch.float16, torch.bfloat16):
        x, g, _w = problem(np.float64, seed=10)
        check_torch_call(_leaf(torch, x, dtype), _leaf(torch, g, dtype), "bicubic", "reflection", True)


@case("torch_expanded_leaves", torch=True)
def _():
    torch, _ = _gt()
    x0 = _leaf(torch, problem(np.float64, seed=11)[0][:1, :, :1])  # (1, 3, 1, 7)
    g0 = _leaf(torch, problem(np.float64, seed=12)[1][:1])          # (1, 4, 6, 2)
    check_torch_call(x0.expand(2, 3, 5, 7), g0.expand(2, 4, 6, 2), "bilinear", "border", False,
                     leaves=(x0, g0))


@case("torch_huge_virtual_image", torch=True)
def _():
    torch, gt = _gt()
    x = torch.full((1, 1, 1, 1), 3.0).expand(1, 2, 2**31, 2**31)  # no grad: dx would be 2^63 values
    g = torch.tensor([[[[0.25, -0.5], [-1.0, 1.0]]]], requires_grad=True)
    out = gt.grid_sample(x, g, "nearest", "zeros", True)
    assert torch.equal(out, torch.full((1, 2, 1, 2), 3.0))
    out.sum().backward()
    assert torch.equal(g.grad, torch.zeros_like(g))


@case("torch_non_finite_grid", torch=True)
def _():
    torch, gt = _gt()
    x = torch.randn(1, 3, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(13),
                    requires_grad=True)
    g = torch.from_numpy(_special_grid(np.float64)).requires_grad_()
    for mode in ("bilinear", "bicubic"):
        for padding in ("zeros", "border", "reflection"):
            x.grad = g.grad = None
            out = gt.grid_sample(x, g, mode, padding, align_corners=False)
            out.sum().backward()
            assert torch.isfinite(out).all() and torch.isfinite(x.grad).all(), (mode, padding)
            assert not g.grad[~torch.isfinite(g).all(-1)].any(), (mode, padding)


@case("torch_set_num_threads_huge", torch=True)
def _():
    torch, _ = _gt()
    saved = torch.get_num_threads()
    torch.set_num_threads(4 * gridsampler.max_threads())  # capped, as OMP_NUM_THREADS is
    try:
        x, g, _w = problem(np.float64, seed=14)
        check_torch_call(_leaf(torch, x), _leaf(torch, g), "bilinear", "zeros", False)
    finally:
        torch.set_num_threads(saved)


@case("torch_empty_batch_requires_grad", torch=True)
def _():
    torch, gt = _gt()
    x = torch.zeros(0, 3, 5, 7, requires_grad=True)
    g = torch.zeros(0, 4, 6, 2, requires_grad=True)
    out = gt.grid_sample(x, g, align_corners=False)
    assert out.shape == (0, 3, 4, 6)
    out.sum().backward()
    assert x.grad.shape == x.shape and g.grad.shape == g.shape


# ---------------------------------------------------------------------------

def main(names):
    for name in names or list(CASES):
        fn, _env, _torch = CASES[name]
        print(json.dumps({"case": name, "started": True}), flush=True)
        outcome = {"case": name, "ok": True}
        try:
            fn()
        except Skip as e:
            outcome = {"case": name, "skip": str(e)}
        except Exception as e:  # noqa: BLE001
            tb = traceback.format_exc(limit=-3)
            outcome = {"case": name, "ok": False, "why": f"{type(e).__name__}: {e}\n{tb}"}
        print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
