"""gridsampler on NumPy (no torch in the process), DLPack inputs, errors of the plain API."""

import itertools
import os
import subprocess
import sys

import numpy as np
import pytest

import gridsampler
from conftest import MODES, PADDINGS

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def numpy_only_results(tmp_path_factory):
    """Runs numpy_only_script.py in a fresh interpreter where importing torch fails."""
    out = tmp_path_factory.mktemp("numpy_only") / "results.npz"
    proc = subprocess.run([sys.executable, os.path.join(HERE, "numpy_only_script.py"), str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "numpy-only: ok" in proc.stdout
    return dict(np.load(out))


def test_numpy_only_process_never_imports_torch(numpy_only_results):
    # Every mode x padding x align x dtype ran, in five layouts, with torch blocked.
    assert len(numpy_only_results) == 3 + 3 * 18 * 3


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_numpy_results_match_torch(torch, numpy_only_results, dtype):
    r = numpy_only_results
    F = torch.nn.functional
    tol = {"float64": 1e-12, "float32": 2e-5, "float16": 4 * 2.0**-10}[dtype]
    for mode, padding, align in itertools.product(MODES, PADDINGS, (False, True)):
        key = f"{dtype}-{mode}-{padding}-{int(align)}"
        # float64 reference on the values the run saw (rounded to its dtype).
        x, g, w = (torch.from_numpy(r[k].astype(dtype).astype(np.float64)).requires_grad_()
                   for k in ("x", "g", "w"))
        out = F.grid_sample(x, g, mode, padding, align)
        (out * w).sum().backward()
        for name, ref in (("out", out), ("dx", x.grad), ("dgrid", g.grad)):
            ref = ref.detach().numpy()
            got = r[f"{key}-{name}"].astype(np.float64)
            err = np.abs(got - ref).max()
            assert err <= tol * max(1.0, np.abs(ref).max()), (key, name, err)


def test_numpy_values_simple_case():
    """No torch needed: an identity warp with align_corners=True returns the input."""
    x = np.arange(2 * 3 * 4 * 5, dtype=np.float64).reshape(2, 3, 4, 5)
    ys, xs = np.meshgrid(np.linspace(-1, 1, 4), np.linspace(-1, 1, 5), indexing="ij")
    grid = np.broadcast_to(np.stack([xs, ys], axis=-1), (2, 4, 5, 2))
    for mode in MODES:
        np.testing.assert_allclose(gridsampler.grid_sample(x, grid, mode, "zeros", True), x,
                                   atol=1e-12)
    # dx of an identity warp is the upstream gradient itself.
    w = np.random.default_rng(0).standard_normal(x.shape)
    dx, _ = gridsampler.grid_sample_backward(w, x, grid, "bilinear", "zeros", True)
    np.testing.assert_allclose(dx, w, atol=1e-12)


def test_accepts_buffer_protocol_and_lists():
    x = np.ones((1, 1, 2, 2), dtype=np.float32)
    g = [[[[0.0, 0.0]]]]
    out = gridsampler.grid_sample(memoryview(x), np.asarray(g, dtype=np.float32))
    assert isinstance(out, np.ndarray) and out.shape == (1, 1, 1, 1) and out[0, 0, 0, 0] == 1
    out = gridsampler.grid_sample(x.astype(np.float64).tolist(), g)  # nested lists: float64
    assert out.dtype == np.float64 and out[0, 0, 0, 0] == 1


def test_torch_inputs_give_torch_outputs(torch):
    x = torch.randn(2, 3, 5, 7, dtype=torch.bfloat16)
    g = torch.rand(2, 4, 6, 2, dtype=torch.bfloat16) * 2 - 1
    out = gridsampler.grid_sample(x.requires_grad_(), g, "bicubic", "border", True)
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    assert not out.requires_grad  # the plain API does not record autograd
    ref = torch.nn.functional.grid_sample(x.detach().double(), g.double(), "bicubic", "border", True)
    assert (out.double() - ref).abs().max() <= 4 * 2.0**-7 * max(1.0, ref.abs().max())
    dx, dgrid = gridsampler.grid_sample_backward(torch.ones_like(out), x, g, "bicubic", "border",
                                                 True, output_mask=(False, True))
    assert dx is None and isinstance(dgrid, torch.Tensor) and dgrid.shape == g.shape


def test_torch_and_numpy_share_memory_without_copies(torch):
    """A torch view in channels-last layout is read in place (no copy): the
    result follows a write through the other framework's view."""
    x = torch.zeros(1, 2, 3, 4).contiguous(memory_format=torch.channels_last)
    g = torch.zeros(1, 1, 1, 2)
    x_np = x.numpy()  # shares memory
    # grid (0, 0) with align_corners=True samples (y, x) = (1, 1.5): half of pixels (1, 1) and (1, 2).
    x_np[0, :, 1, 1] = [5.0, 7.0]
    x_np[0, :, 1, 2] = [5.0, 7.0]
    out = gridsampler.grid_sample(x, g, "bilinear", "zeros", True)
    assert out.flatten().tolist() == [5.0, 7.0]


def test_jax_arrays(tmp_path):
    jnp = pytest.importorskip("jax.numpy")
    x = jnp.asarray(np.random.default_rng(0).standard_normal((1, 2, 3, 4)), dtype=jnp.float32)
    g = jnp.zeros((1, 2, 2, 2), dtype=jnp.float32)
    out = gridsampler.grid_sample(x, g, "bilinear", "border", False)
    assert type(out).__module__.startswith("jax")
    dx, dgrid = gridsampler.grid_sample_backward(jnp.ones_like(out), x, g)
    assert dx.shape == x.shape and dgrid.shape == g.shape
    np.testing.assert_allclose(np.asarray(out), gridsampler.grid_sample(np.asarray(x),
                               np.asarray(g), "bilinear", "border", False))


def _arrays(**changes):
    a = {"x": np.zeros((2, 3, 5, 7), np.float32), "g": np.zeros((2, 4, 6, 2), np.float32),
         "w": np.zeros((2, 3, 4, 6), np.float32)}
    a.update(changes)
    return a


@pytest.mark.parametrize(
    "arrays,kwargs,exc,message",
    [
        (_arrays(g=np.zeros((2, 4, 6, 3), np.float32)), {}, ValueError,
         "grid: last dimension must be 2, got 3"),
        (_arrays(g=np.zeros((3, 4, 6, 2), np.float32)), {}, ValueError,
         "grid: batch size 3 does not match input's 2"),
        (_arrays(g=np.zeros((2, 4, 6, 2))), {}, TypeError,
         "grid: dtype float64 differs from input's float32"),
        (_arrays(w=np.zeros((2, 3, 4, 6))), {}, TypeError,
         "grad: dtype float64 differs from input's float32"),
        (_arrays(w=np.zeros((2, 3, 4, 5), np.float32)), {}, ValueError,
         r"grad: shape \(2, 3, 4, 5\) must be \(2, 3, 4, 6\)"),
        (_arrays(x=np.zeros((2, 3, 5, 7), np.int32), g=np.zeros((2, 4, 6, 2), np.int32)), {},
         TypeError, "input: dtype int32 is not supported"),
        (_arrays(x=np.zeros((2, 3, 0, 7), np.float32)), {}, ValueError,
         "input: height and width must be positive, got H=0, W=7"),
        (_arrays(x=np.zeros((2, 3, 5), np.float32)), {}, ValueError,
         r"input: expected 4 dimensions \(an image\) or 5 \(a volume\), got 3"),
        (_arrays(), {"mode": "area"}, ValueError, "mode: unknown value 'area'"),
        (_arrays(), {"padding_mode": "circular"}, ValueError,
         "padding_mode: unknown value 'circular'"),
    ],
)
def test_errors(arrays, kwargs, exc, message):
    if not message.startswith("grad:"):  # forward has no grad
        with pytest.raises(exc, match=message):
            gridsampler.grid_sample(arrays["x"], arrays["g"], **kwargs)
    with pytest.raises(exc, match=message):
        gridsampler.grid_sample_backward(arrays["w"], arrays["x"], arrays["g"], **kwargs)


@pytest.mark.parametrize("code,exc", [(1, ValueError), (2, ValueError), (3, RuntimeError),
                                      (99, RuntimeError)])
def test_exception_type_follows_status_code(code, exc):
    """The library's StatusCode (1 invalid argument, 2 null pointer, 3 internal;
    99 one the bindings do not know) picks the type; the message, here one that
    reads like a dtype problem, is passed on as it is and picks nothing."""
    from gridsampler import _gridsampler as _C

    message = "grid: dtype float64 differs from input's float32"
    with pytest.raises(exc) as info:
        _C._raise_for_status(code, message)
    assert type(info.value) is exc and str(info.value) == message
    assert _C._raise_for_status(0, "") is None  # ok


def test_exception_types_of_direct_extension_calls():
    """The extension itself, without the Python layer's checks: a dtype
    mismatch is a TypeError, the library's kInvalidArgument a ValueError."""
    from gridsampler import _gridsampler as _C

    x = np.zeros((1, 2, 3, 4), np.float32)
    g = np.zeros((1, 2, 2, 2), np.float32)
    w = np.zeros((1, 2, 2, 2), np.float32)
    opts = ("bilinear", "zeros", False)
    with pytest.raises(TypeError, match="output: dtype float64 differs from input's float32"):
        _C.forward(x, g, np.zeros((1, 2, 2, 2)), *opts)
    with pytest.raises(TypeError, match="dgrid: dtype float16 differs from input's float32"):
        _C.backward(w, x, g, None, np.zeros((1, 2, 2, 2), np.float16), *opts)
    with pytest.raises(ValueError, match="dx: memory overlaps input"):
        _C.backward(w, x, g, x, None, *opts)


def test_import_does_not_import_torch():
    code = "import sys, gridsampler; assert 'torch' not in sys.modules; print('ok')"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr


def test_numpy_bfloat16_ml_dtypes(torch):
    """ml_dtypes' bfloat16 (JAX's NumPy bfloat16) in and out; jax arrays too."""
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 5, 7)).astype(bf16)
    g = ((rng.random((2, 4, 6, 2)) * 2 - 1) * 1.1).astype(bf16)
    out = gridsampler.grid_sample(x, g, "bicubic", "reflection", False)
    assert out.dtype == bf16
    dx, dgrid = gridsampler.grid_sample_backward(out, x, g, "bicubic", "reflection", False)
    assert dx.dtype == bf16 and dgrid.dtype == bf16
    # Bit-identical to the torch bfloat16 path.
    xt, gt_ = (torch.from_numpy(a.view(np.uint16).astype(np.int16)).view(torch.bfloat16)
               for a in (x, g))
    out_t = gridsampler.grid_sample(xt, gt_, "bicubic", "reflection", False)
    assert np.array_equal(out.view(np.uint16), out_t.view(torch.int16).numpy().view(np.uint16))
    with pytest.raises(TypeError, match="grid: dtype uint16 is not supported"):
        gridsampler.grid_sample(x, g.view(np.uint16))
    jnp = pytest.importorskip("jax.numpy")
    out_j = gridsampler.grid_sample(jnp.asarray(x), jnp.asarray(g), "bicubic", "reflection", False)
    assert out_j.dtype == jnp.bfloat16
    assert np.array_equal(np.asarray(out_j).view(np.uint16), out.view(np.uint16))


def test_unreadable_argument_error():
    x = np.zeros((1, 1, 2, 2), dtype=">f4")  # big-endian: not readable in place
    with pytest.raises(TypeError, match="input: cannot read"):
        gridsampler.grid_sample(x, np.zeros((1, 1, 1, 2), dtype=np.float32))


class _Sub(np.ndarray):
    """An ndarray subclass: not a plain NumPy array, so it takes the general
    path (_Frame) rather than the plain-array shortcut."""


@pytest.mark.parametrize("rank", [4, 5])
def test_plain_arrays_and_general_path_agree(rank):
    rng = np.random.default_rng(7)
    spatial_in, spatial_out = ((5, 6), (4, 3)) if rank == 4 else ((3, 4, 5), (2, 3, 2))
    for dtype in (np.float16, np.float32, np.float64):
        x = rng.standard_normal((2, 3, *spatial_in)).astype(dtype)
        g = ((rng.random((2, *spatial_out, rank - 2)) * 2 - 1) * 1.2).astype(dtype)
        w = rng.standard_normal((2, 3, *spatial_out)).astype(dtype)
        for mode in ("bilinear", "nearest", "bicubic"):
            out = gridsampler.grid_sample(x, g, mode, "reflection", True)
            out_sub = gridsampler.grid_sample(x.view(_Sub), g.view(_Sub), mode, "reflection", True)
            assert out.dtype == dtype and type(out) is np.ndarray
            assert np.array_equal(out, np.asarray(out_sub))
            for mask in ((True, True), [True, False], (False, True)):
                plain = gridsampler.grid_sample_backward(w, x, g, mode, "reflection", True, mask)
                general = gridsampler.grid_sample_backward(w.view(_Sub), x.view(_Sub), g.view(_Sub),
                                                           mode, "reflection", True, mask)
                for a, b, wanted in zip(plain, general, mask):
                    assert (a is None) == (not wanted) and (b is None) == (not wanted)
                    if wanted:
                        assert a.dtype == dtype and np.array_equal(a, np.asarray(b))
    # Errors are the general path's, whichever path a call starts on.
    with pytest.raises(TypeError):
        gridsampler.grid_sample(x, g.astype(np.float32 if dtype != np.float32 else np.float64))
    with pytest.raises(ValueError, match="output_mask|unpack"):
        gridsampler.grid_sample_backward(w, x, g, output_mask=(True, True, True))


def test_num_threads_same_bits():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 40, 33, 37)).astype(np.float32)
    g = ((rng.random((2, 31, 29, 2)) * 2 - 1) * 1.1).astype(np.float32)
    w = rng.standard_normal((2, 40, 31, 29)).astype(np.float32)
    runs = [(gridsampler.grid_sample(x, g, "bicubic", "border", True, num_threads=t),
             *gridsampler.grid_sample_backward(w, x, g, "bicubic", "border", True, num_threads=t))
            for t in (1, 2, 0)]
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            assert np.array_equal(a, b)
    with pytest.raises(ValueError, match="num_threads: must be 0"):
        gridsampler.grid_sample(x, g, num_threads=-1)
