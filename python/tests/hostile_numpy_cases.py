"""Hostile calls of the plain API (sample, grid_sample_backward)."""

import numpy as np

import gridsampler
from hostile_support import (case, check_numpy_call, close, problem, raises, special_grid,
                             torch_reference)

sample, backward = gridsampler.grid_sample, gridsampler.grid_sample_backward

# ---------------------------------------------------------------------------
# Wrong types and ranks.

X, G, W = problem()
BAD_RANK = "input: expected 4 dimensions (an image) or 5 (a volume)"


@case("none_input")
def _():
    raises(ValueError, f"{BAD_RANK}, got 0", sample, None, G)


@case("none_grid")
def _():
    raises(ValueError, "grid: expected 4 dimensions, got 0", sample, X, None)


@case("none_grad")
def _():
    raises(ValueError, "grad: expected 4 dimensions, got 0", backward, None, X, G)


@case("string_input")
def _():
    raises(ValueError, f"{BAD_RANK}, got 0", sample, "image", G)


@case("object_without_dlpack")
def _():
    raises(ValueError, f"{BAD_RANK}, got 0", sample, object(), G)


@case("shape_only_object")
def _():
    class Shaped:  # looks like an array, holds nothing
        shape = (1, 1, 2, 2)
    raises(TypeError, "input: cannot read", sample, Shaped(), G[:1])


@case("dlpack_that_raises")
def _():
    class Broken:
        shape, dtype = (1, 1, 2, 2), np.float32

        def __dlpack__(self, *args, **kwargs):
            raise RuntimeError("no capsule today")

        def __dlpack_device__(self):
            return (1, 0)
    raises(TypeError, "input: cannot read", sample, Broken(), G[:1])


@case("dlpack_that_returns_garbage")
def _():
    class Liar:
        shape, dtype = (1, 1, 2, 2), np.float32

        def __dlpack__(self, *args, **kwargs):
            return "not a capsule"

        def __dlpack_device__(self):
            return (1, 0)
    raises(TypeError, "input: cannot read", sample, Liar(), G[:1])


@case("nested_lists_4d")
def _():
    x = X[:1, :1].tolist()  # float64 from lists
    g = np.asarray(G[:1], dtype=np.float64).tolist()
    out = sample(x, g)
    ref = torch_reference(np.asarray(x), np.asarray(g), np.zeros((1, 1, 4, 6)))[0]
    close(out, ref, "float64", "out")


@case("ragged_nested_lists")
def _():
    raises(ValueError, "input: ", sample, [[[[1.0, 2.0], [3.0]]]], G[:1])


@case("lists_of_strings")
def _():
    raises(TypeError, "input: cannot read", sample, [[[["a", "b"]]]], G[:1])


@case("rank_3_input")
def _():
    raises(ValueError, f"{BAD_RANK}, got 3", sample, X[0], G)


@case("rank_5_input")
def _():
    # A 5-D input is a volume: then the grid must be 5-D too.
    raises(ValueError, "grid: expected 5 dimensions, got 4 (input is 5-D: a volume)", sample,
           X[..., None], G)


@case("rank_1_grid")
def _():
    raises(ValueError, "grid: expected 4 dimensions, got 1", sample, X, G.ravel())


@case("rank_0_grad")
def _():
    raises(ValueError, "grad: expected 4 dimensions, got 0", backward,
           np.float32(1), X, G)


# ---------------------------------------------------------------------------
# Dtypes.

for _dt in ("int8", "int32", "int64", "uint8", "uint16", "bool", "complex64", "complex128"):
    @case(f"dtype_{_dt}")
    def _(dt=_dt):
        x, g = X.astype(dt), G.astype(dt)
        raises(TypeError, f"input: dtype {dt} is not supported", sample, x, g)
        raises(TypeError, f"grad: dtype {dt} is not supported", backward,
               W.astype(dt), x, g)


@case("dtype_object")
def _():
    raises(TypeError, "input: cannot read", sample, X.astype(object), G)


@case("dtype_mixed_float")
def _():
    raises(TypeError, "grid: dtype float64 differs from input's float32", sample,
           X, G.astype(np.float64))
    raises(TypeError, "grad: dtype float16 differs from input's float32",
           backward, W.astype(np.float16), X, G)


@case("dtype_int_grid")
def _():
    raises(TypeError, "grid: dtype int32 is not supported", sample, X,
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
    raises(ValueError, "grid: last dimension must be 2, got 3", sample, X,
           np.zeros((2, 4, 6, 3), np.float32))


@case("batch_mismatch")
def _():
    raises(ValueError, "grid: batch size 1 does not match input's 2", sample, X, G[:1])


@case("zero_height_input")
def _():
    raises(ValueError, "input: height and width must be positive, got H=0, W=7",
           sample, X[:, :, :0], G)


@case("grad_shape_mismatch")
def _():
    raises(ValueError, "grad: shape (2, 3, 4, 5) must be (2, 3, 4, 6)", backward,
           W[..., :5], X, G)


@case("empty_batch_channels_and_output")
def _():
    for x, g in ((X[:0], G[:0]), (X[:, :0], G), (X, G[:, :0])):
        out = sample(x, g)
        assert out.shape == (x.shape[0], x.shape[1], g.shape[1], g.shape[2]) and out.size == 0
        dx, dgrid = backward(np.zeros(out.shape, np.float32), x, g)
        assert dx.shape == x.shape and not dx.any() and dgrid.shape == g.shape and not dgrid.any()


@case("unknown_modes")
def _():
    for mode in ("area", "", "Bilinear"):
        raises(ValueError, f"mode: unknown value {mode!r}", sample, X, G, mode)
    for padding in ("circular", "ZEROS"):
        raises(ValueError, f"padding_mode: unknown value {padding!r}", sample, X, G,
               "bilinear", padding)
    raises(ValueError, "mode: unknown value None", sample, X, G, None)
    raises(ValueError, "padding_mode: unknown value 1", backward, W, X, G,
           "bilinear", 1)


@case("output_mask_none")
def _():
    assert backward(W, X, G, output_mask=(False, False)) == (None, None)


# ---------------------------------------------------------------------------
# Thread counts.

def _max():
    return gridsampler.max_threads()


@case("threads_valid")
def _():
    x, g, w = problem(np.float32, (2, 20, 9, 11, 13, 17), seed=4)
    base = sample(x, g, "bicubic", "border", num_threads=1)
    for t in (0, 2, 3, _max(), True, np.int64(2)):
        assert np.array_equal(sample(x, g, "bicubic", "border", num_threads=t), base), t
    check_numpy_call(x, g, w, "bicubic", "border", num_threads=_max())


@case("threads_negative")
def _():
    for t in (-1, -(2**31)):
        raises(ValueError, f"num_threads: must be 0 (all) or positive, got {t}", sample,
               X, G, num_threads=t)
    for t in (-(2**31) - 1, -(10**30)):
        raises(ValueError, f"num_threads: must be 0 (all) or positive, got {t}",
               backward, W, X, G, num_threads=t)


@case("threads_huge")
def _():
    for t in (_max() + 1, 10**9, 2**31 - 1, 2**31, 10**30):
        message = f"num_threads: at most {_max()} on this machine, got {t}"
        raises(ValueError, message, sample, X, G, num_threads=t)
        raises(ValueError, message, backward, W, X, G, num_threads=t)


@case("threads_not_integers")
def _():
    for t, kind in ((1.5, "float"), ("2", "str"), (None, "NoneType"), (np.float64(2), "float64"),
                    ([2], "list")):
        raises(TypeError, f"num_threads: expected an integer, got {kind}", sample, X, G,
               num_threads=t)


@case("omp_num_threads_huge", env={"OMP_NUM_THREADS": "100000"})
def _():
    # OpenMP's default of 10^5 threads is capped (it made libgomp crash).
    x, g, w = problem(np.float32, (2, 20, 9, 11, 13, 17), seed=5)
    for fn, args in ((sample, (x, g)), (backward, (w, x, g))):
        default = fn(*args, "bilinear", "reflection")
        one = fn(*args, "bilinear", "reflection", num_threads=1)
        for a, b in zip(default if isinstance(default, tuple) else (default,),
                        one if isinstance(one, tuple) else (one,)):
            assert np.array_equal(a, b)
    check_numpy_call(x, g, w, "bilinear", "reflection")


@case("omp_thread_limit", env={"OMP_THREAD_LIMIT": "3"})
def _():
    assert _max() == 3, _max()
    raises(ValueError, "num_threads: at most 3 on this machine, got 4", sample, X, G,
           num_threads=4)
    assert np.array_equal(sample(X, G, num_threads=3), sample(X, G))


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
    raises(TypeError, "incompatible function arguments", _C.forward, X, G, out, "bilinear", "zeros",
           False)
    writable_zero_strides = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (2, 3, 4, 6),
                                                            (0, 0, 0, 0))
    raises(ValueError, "output: strides make two elements share memory", _C.forward, X, G,
           writable_zero_strides, "bilinear", "zeros", False)


@case("huge_virtual_image")
def _():
    # A 2^30 x 2^30 image of 3s (2^60 elements, the most NumPy allows in
    # float32) read through zero strides.
    x = np.broadcast_to(np.float32(3), (1, 1, 2**30, 2**30))
    g = np.asarray([[[[0.25, -0.5], [-0.75, 0.5], [0.999, 0.0], [3.0, 0.0]]]], np.float32)
    out = sample(x, g, "nearest", "zeros", True)
    assert out.ravel().tolist() == [3.0, 3.0, 3.0, 0.0], out
    # Bilinear at the points inside. (Border clamps (3, 0) to x = W - 1 =
    # 2^30 - 1, which float32 rounds to 2^30, outside the image.)
    for padding in ("zeros", "border"):
        out = sample(x, g[:, :, :3], "bilinear", padding, False)
        assert out.ravel().tolist() == [3.0, 3.0, 3.0], (padding, out)
    # Only dgrid (dx would hold the image's 2^62 elements): nearest has no
    # gradient along the grid, bilinear a finite one.
    go = np.ones((1, 1, 1, 4), np.float32)
    none, dgrid = backward(go, x, g, "nearest", output_mask=(False, True))
    assert none is None and np.array_equal(dgrid, np.zeros_like(g))
    _, dgrid = backward(go, x, g, "bilinear", output_mask=(False, True))
    assert np.isfinite(dgrid).all()


@case("huge_virtual_grid_empty_output")
def _():
    g = np.lib.stride_tricks.as_strided(np.zeros(1, np.float32), (1, 2**30, 2**29, 2), (0, 0, 0, 0))
    out = sample(X[:1, :0], g)  # C = 0: 2^59 pixels, nothing to write
    assert out.shape == (1, 0, 2**30, 2**29)


@case("dimension_beyond_2_40")
def _():
    x = np.broadcast_to(np.zeros((), np.float32), (1, 1, 2**41, 1))
    raises(ValueError, "input: dimension 2 is 2199023255552, more than the supported 2^40",
           sample, x, np.zeros((1, 1, 1, 2), np.float32))


@case("strides_beyond_2_63_bytes")
def _():
    # Strides that no buffer backs: refused before anything is read.
    x = np.lib.stride_tricks.as_strided(np.zeros(1), (1, 1, 3, 2), (0, 0, 2**62, 8))
    raises(ValueError, "input: strides address more than 2^63 bytes", sample, x,
           np.zeros((1, 1, 1, 2)))


# ---------------------------------------------------------------------------
# Non-finite and huge coordinates.

@case("non_finite_grids")
def _():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 3, 4, 5))
    g = special_grid(np.float64)
    w = rng.standard_normal((1, 3, 6, 6))
    finite = np.isfinite(g).all(-1)[0]  # points with both coordinates finite
    # PyTorch counts reflections of a huge coordinate in an int, which
    # overflows (undefined); the library counts them in floating point.
    moderate = finite & (np.abs(g) < 1e6).all(-1)[0]
    for mode in gridsampler.MODES:
        for padding in gridsampler.PADDING_MODES:
            comparable = moderate if padding == "reflection" else finite
            for align in (False, True):
                what = f"{mode} {padding} {align}"
                out = sample(x, g, mode, padding, align)
                dx, dgrid = backward(w, x, g, mode, padding, align)
                # Values are finite (docs: non-finite coordinates sample a
                # padding pixel or nothing), gradients of such coordinates 0.
                for r, name in ((out, "out"), (dx, "dx"), (dgrid, "dgrid")):
                    assert np.isfinite(r).all(), f"{what}: {name} not finite"
                assert not dgrid[~np.isfinite(g)].any(), what
                # Where both coordinates are finite, torch's values.
                ref_out, _, ref_dgrid = torch_reference(x, np.where(np.isfinite(g), g, 0), w, mode,
                                                        padding, align)
                c = comparable
                close(out[0][:, c], ref_out.numpy()[0][:, c], "float64", what + " out")
                close(dgrid[0][c], ref_dgrid.numpy()[0][c], "float64", what + " dgrid")
                # dx is the adjoint of the forward: <out, w> = <x, dx>.
                lhs, rhs = float((out * w).sum()), float((x * dx).sum())
                assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs)), (what, lhs, rhs)


@case("non_finite_input_values")
def _():
    x, g, w = problem(np.float32, seed=9)
    x[0, 0, 1, 1], x[1, 2, 0, 3], x[0, 1, 4, 6] = np.nan, np.inf, -np.inf
    check_numpy_call(x, g, w, "bilinear", "zeros", False)
