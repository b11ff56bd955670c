"""Volumes (5-D grid_sample): the NumPy-level functions, the drop-in's custom
operators gridsampler::grid_sampler_3d / _backward, their native second
order (gridsampler::grid_sampler_3d_double_backward), and the switch on aten::grid_sampler_3d / _backward, all against
PyTorch 2.15's own 5-D kernel (torch.nn.functional.grid_sample)."""

import importlib
import itertools
import os
import re

import numpy as np
import pytest

import gridsampler
from conftest import MODES, PADDINGS, op_logs

CASES = list(itertools.product(MODES, PADDINGS, (False, True)))
CASE_IDS = [f"{m}-{p}-{'align' if a else 'noalign'}" for m, p, a in CASES]
LAYOUTS = ("contiguous", "channels_last_3d", "sliced", "transposed")

# N, C, Din, Hin, Win, Dout, Hout, Wout: all distinct, so a swapped axis shows.
SHAPE = (2, 3, 4, 5, 6, 3, 4, 5)
# Of the largest magnitude of the reference (at least 1).
TOL = {"float64": 1e-12, "float32": 2e-5}


def make_problem(torch, dtype, seed=0, shape=SHAPE, spread=1.15):
    """input, grid (partly out of [-1, 1]) and an upstream gradient."""
    n, c, di, hi, wi, do, ho, wo = shape
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, di, hi, wi, generator=gen, dtype=torch.float64)
    g = (torch.rand(n, do, ho, wo, 3, generator=gen, dtype=torch.float64) * 2 - 1) * spread
    w = torch.randn(n, c, do, ho, wo, generator=gen, dtype=torch.float64)
    return x.to(dtype), g.to(dtype), w.to(dtype)


def with_layout(torch, t, layout):
    """The values of `t` in another memory layout (a leaf that can require grad)."""
    if layout == "contiguous":
        return t.contiguous()
    if layout == "channels_last_3d":
        if t.shape[-1] == 3:  # a grid: x, y and z volumes, (N, 3, D, H, W) in memory
            return t.permute(0, 4, 1, 2, 3).contiguous().permute(0, 2, 3, 4, 1)
        return t.contiguous(memory_format=torch.channels_last_3d)
    if layout == "sliced":  # every dimension strided, with an offset
        n, c, d, h, w = t.shape
        big = torch.full((2 * n, c + 1, d + 2, 2 * h + 1, 3 * w), float("nan"), dtype=t.dtype)
        view = big[::2, 1:, 1:-1, 1::2, 2::3]
        view.copy_(t)
        assert not view.is_contiguous()
        return view
    if layout == "transposed":  # axes stored in reverse order (positive strides)
        return t.permute(4, 3, 2, 1, 0).contiguous().permute(4, 3, 2, 1, 0)
    raise ValueError(layout)


def run(op, x, g, w, mode, padding, align):
    """Output and the gradients of sum(out * w) with respect to x and g."""
    x = x.detach().requires_grad_()
    g = g.detach().requires_grad_()
    out = op(x, g, mode=mode, padding_mode=padding, align_corners=align)
    (out * w).sum().backward()
    return out.detach(), x.grad, g.grad


def assert_near(ours, ref, tol, what):
    assert tuple(ours.shape) == tuple(ref.shape), what
    if ref.numel() == 0:
        return
    ours, ref = ours.double(), ref.double()
    scale = max(1.0, float(ref.abs().max()))
    err = float((ours - ref).abs().max())
    assert err <= tol * scale, f"{what}: max error {err:.3g} > {tol:.3g} * {scale:.3g}"


# ---------------------------------------------------------------------------
# The drop-in (custom operators) against F.grid_sample.

@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
@pytest.mark.parametrize("mode,padding,align", CASES, ids=CASE_IDS)
def test_matches_torch(torch, gt, mode, padding, align, dtype_name, layout):
    dtype = getattr(torch, dtype_name)
    F = torch.nn.functional
    x, g, w = make_problem(torch, dtype)
    ref = run(F.grid_sample, x, g, w, mode, padding, align)
    ours = run(gt.grid_sample, with_layout(torch, x, layout), with_layout(torch, g, layout),
               w, mode, padding, align)
    for name, o, r in zip(("output", "dx", "dgrid"), ours, ref):
        assert o.dtype == dtype
        assert_near(o, r, TOL[dtype_name], name)
    if layout != "contiguous":  # the library promises layout-independent bits
        base = run(gt.grid_sample, x, g, w, mode, padding, align)
        for o, b in zip(ours, base):
            assert torch.equal(o, b)


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
@pytest.mark.parametrize("mode,padding,align", CASES, ids=CASE_IDS)
def test_low_precision_against_float64(torch, gt, mode, padding, align, dtype_name):
    """float16/bfloat16 against PyTorch in float64 on the same (rounded) values:
    computed in float32 and rounded once, so within a few units of the dtype's rounding."""
    dtype = getattr(torch, dtype_name)
    F = torch.nn.functional
    x, g, w = make_problem(torch, dtype, seed=1)
    ref = run(F.grid_sample, x.double(), g.double(), w.double(), mode, padding, align)
    layout = "channels_last_3d" if dtype_name == "float16" else "sliced"
    ours = run(gt.grid_sample, with_layout(torch, x, layout), with_layout(torch, g, layout),
               w, mode, padding, align)
    eps = torch.finfo(dtype).eps
    for name, o, r in zip(("output", "dx", "dgrid"), ours, ref):
        assert o.dtype == dtype
        assert_near(o, r, 4 * eps, name)


@pytest.mark.parametrize("mode,padding,align", CASES, ids=CASE_IDS)
def test_gradcheck_float64(torch, gt, mode, padding, align):
    x, g, _ = make_problem(torch, torch.float64, seed=2, shape=(1, 2, 3, 4, 3, 2, 2, 3),
                           spread=1.1)
    x.requires_grad_()
    g.requires_grad_()
    assert torch.autograd.gradcheck(
        lambda x, g: gt.grid_sample(x, g, mode, padding, align), (x, g), eps=1e-6, atol=1e-7)


@pytest.mark.parametrize("mask", [(True, False), (False, True)])
def test_only_needed_gradients(torch, gt, mask):
    """Only the inputs that require grad get a gradient, and the backward op is
    asked for only those (output_mask)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class LogMasks(TorchDispatchMode):
        masks = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if "gridsampler.grid_sampler_3d_backward" in str(func):
                self.masks.append(tuple(args[6]))
            return func(*args, **(kwargs or {}))

    x, g, w = make_problem(torch, torch.float64, seed=3)
    F = torch.nn.functional
    x.requires_grad_(mask[0])
    g.requires_grad_(mask[1])
    out = gt.grid_sample(x, g, "bicubic", "border", False)
    with LogMasks():
        (out * w).sum().backward()
    assert LogMasks.masks == [mask]
    xr = x.detach().requires_grad_(mask[0])
    gr = g.detach().requires_grad_(mask[1])
    (F.grid_sample(xr, gr, "bicubic", "border", False) * w).sum().backward()
    assert (x.grad is not None) == mask[0] and (g.grad is not None) == mask[1]
    for ours, ref in ((x.grad, xr.grad), (g.grad, gr.grad)):
        if ref is not None:
            assert_near(ours, ref, 1e-12, "grad")
    dx, dgrid = torch.ops.gridsampler.grid_sampler_3d_backward(
        w, x.detach(), g.detach(), "bicubic", "border", False, list(mask))
    assert dx.shape == (x.shape if mask[0] else (0,))
    assert dgrid.shape == (g.shape if mask[1] else (0,))


def test_expanded_upstream_gradient(torch, gt):
    """loss = out.sum() hands backward a gradient with all strides 0."""
    x, g, _ = make_problem(torch, torch.float64, seed=4)
    F = torch.nn.functional
    xs, gs = x.clone().requires_grad_(), g.clone().requires_grad_()
    gt.grid_sample(xs, gs, "bilinear", "reflection", True).sum().backward()
    xr, gr = x.clone().requires_grad_(), g.clone().requires_grad_()
    F.grid_sample(xr, gr, "bilinear", "reflection", True).sum().backward()
    assert_near(xs.grad, xr.grad, 1e-12, "dx")
    assert_near(gs.grad, gr.grad, 1e-12, "dgrid")


@pytest.mark.parametrize("shape", [(0, 3, 4, 5, 6, 3, 4, 5), (2, 0, 4, 5, 6, 3, 4, 5),
                                   (2, 3, 4, 5, 6, 0, 4, 5), (2, 3, 4, 5, 6, 3, 4, 0)])
def test_empty_problems(torch, gt, shape):
    x, g, w = make_problem(torch, torch.float32, shape=shape)
    ours = run(gt.grid_sample, x, g, w, "bilinear", "zeros", False)
    ref = run(torch.nn.functional.grid_sample, x, g, w, "bilinear", "zeros", False)
    for o, r in zip(ours, ref):
        assert o.shape == r.shape
        torch.testing.assert_close(o, r)


def test_size_one_dimensions(torch, gt):
    """Din = Hin = 1 (a plane stored as a volume) and a one-voxel output."""
    F = torch.nn.functional
    for shape in ((1, 2, 1, 1, 5, 1, 1, 1), (2, 1, 1, 4, 1, 2, 1, 3)):
        x, g, w = make_problem(torch, torch.float64, seed=5, shape=shape)
        for mode, padding, align in (("bilinear", "border", True), ("bicubic", "reflection", False),
                                     ("nearest", "zeros", False)):
            ours = run(gt.grid_sample, x, g, w, mode, padding, align)
            ref = run(F.grid_sample, x, g, w, mode, padding, align)
            for name, o, r in zip(("output", "dx", "dgrid"), ours, ref):
                assert_near(o, r, 1e-12, f"{shape} {mode} {name}")


def test_uses_the_custom_operator(torch, gt):
    """A 5-D CPU call runs gridsampler::grid_sampler_3d (and only it), not aten's."""
    LogOps, _ = op_logs()

    x, g, w = make_problem(torch, torch.float32, seed=6)
    x.requires_grad_()
    with LogOps() as log:
        out = gt.grid_sample(x, g, "bilinear", "zeros", False)
        torch.autograd.grad(out, x, w)
    assert log.ops == ["gridsampler.grid_sampler_3d.default",
                       "gridsampler.grid_sampler_3d_backward.default"]


@pytest.mark.parametrize("mode", MODES)
def test_opcheck(torch, gt, mode):
    x, g, w = make_problem(torch, torch.float64, seed=7, shape=(2, 2, 3, 4, 3, 2, 3, 2))
    for padding, align in (("zeros", False), ("reflection", True)):
        torch.library.opcheck(torch.ops.gridsampler.grid_sampler_3d.default,
                              (x.requires_grad_(), g.requires_grad_(), mode, padding, align))
        for mask in ([True, True], [True, False], [False, True]):
            torch.library.opcheck(
                torch.ops.gridsampler.grid_sampler_3d_backward.default,
                (w, x.detach(), g.detach(), mode, padding, align, mask))
        gg_dx, gg_dgrid = torch.randn_like(x), torch.randn_like(g)
        for mask in ([True, True, True], [False, True, False]):
            # The double backward has no autograd formula of its own (a third
            # order raises), so the autograd checks are left out.
            torch.library.opcheck(
                torch.ops.gridsampler.grid_sampler_3d_double_backward.default,
                (gg_dx.detach(), gg_dgrid.detach(), w, x.detach(), g.detach(), mode, padding,
                 align, mask),
                test_utils=("test_schema", "test_faketensor", "test_aot_dispatch_static"))


def test_torch_compile_inductor(torch, gt):
    """A compiled training-style function (forward and backward) with the op in its graph."""
    torch._dynamo.reset()
    x, g, w = make_problem(torch, torch.float32, seed=8)

    # Around the op, elementwise work that inductor's code and eager round
    # alike (a tanh can differ by an ulp between them, which bicubic's dgrid
    # magnifies past assert_close's float32 bound), so the gradients match.
    def f(x, g, w):
        out = gt.grid_sample(x * 2.0, g * 0.9, "bicubic", "border", True)
        return (out * w).sum()

    compiled = torch.compile(f, fullgraph=True)
    xs, gs = x.clone().requires_grad_(), g.clone().requires_grad_()
    loss = compiled(xs, gs, w)
    loss.backward()
    xe, ge = x.clone().requires_grad_(), g.clone().requires_grad_()
    f(xe, ge, w).backward()
    torch.testing.assert_close(loss, f(x, g, w))
    torch.testing.assert_close(xs.grad, xe.grad)
    torch.testing.assert_close(gs.grad, ge.grad)


def test_torch_compile_dynamic_shapes(torch, gt):
    """The fake implementation gives symbolic 5-D shapes: one graph serves two sizes."""
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")

    def f(x, g):
        return gt.grid_sample(x, g, "bilinear", "zeros", False).square().mean()

    compiled = torch.compile(f, backend=counter, fullgraph=True, dynamic=True)
    # All sizes distinct (and != 3, the last grid dim): duck sizing would tie equal ones.
    for shape in ((4, 5, 6, 7, 8, 9, 10, 11), (5, 6, 7, 8, 9, 10, 11, 12)):
        x, g, _ = make_problem(torch, torch.float64, shape=shape)
        xs, gs = x.clone().requires_grad_(), g.clone().requires_grad_()
        compiled(xs, gs).backward()
        xr, gr = x.clone().requires_grad_(), g.clone().requires_grad_()
        ref = torch.nn.functional.grid_sample(xr, gr, "bilinear", "zeros", False)
        ref.square().mean().backward()
        assert_near(xs.grad, xr.grad, 1e-12, "dx")
        assert_near(gs.grad, gr.grad, 1e-12, "dgrid")
    assert counter.frame_count == 1


def test_torch_export(torch, gt):
    class Warp(torch.nn.Module):
        def forward(self, x, g):
            return gt.grid_sample(x, g, "nearest", "reflection", False)

    x, g, _ = make_problem(torch, torch.float32, seed=9)
    ep = torch.export.export(Warp(), (x, g))
    assert "gridsampler.grid_sampler_3d" in str(ep.graph)
    torch.testing.assert_close(ep.module()(x, g), Warp()(x, g))
    torch.testing.assert_close(
        ep.module()(x, g), torch.nn.functional.grid_sample(x, g, "nearest", "reflection", False))


@pytest.mark.parametrize("dtypes", [("bfloat16", "bfloat16"), ("float16", "float32"),
                                    ("float64", "float64")])
def test_autocast_result_dtype(torch, gt, dtypes):
    """Under torch.autocast("cpu"), PyTorch runs grid_sample in float32 (float64
    stays): the drop-in gives the same dtype on volumes too, and its values."""
    x, g, _ = make_problem(torch, torch.float64, seed=10)
    x, g = x.to(getattr(torch, dtypes[0])), g.to(getattr(torch, dtypes[1]))
    F = torch.nn.functional
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = F.grid_sample(x, g, "bilinear", "zeros", False)
        ours = gt.grid_sample(x, g, "bilinear", "zeros", False)
    assert ours.dtype == ref.dtype
    assert_near(ours, ref, TOL["float64" if ref.dtype == torch.float64 else "float32"], "output")


def test_training_step_same_loss_and_gradients(torch, gt):
    """A registration-style step (a conv net predicts a displacement field, the
    volume is warped, MSE, backward) gives F.grid_sample's loss and gradients."""
    F = torch.nn.functional

    def make_model():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv3d(2, 4, 3, padding=1), torch.nn.Tanh(),
            torch.nn.Conv3d(4, 3, 3, padding=1)).double()

    gen = torch.Generator().manual_seed(11)
    moving = torch.randn(2, 1, 6, 7, 8, generator=gen, dtype=torch.float64)
    fixed = torch.randn(2, 1, 6, 7, 8, generator=gen, dtype=torch.float64)
    theta = torch.eye(3, 4, dtype=torch.float64).expand(2, 3, 4)
    base = F.affine_grid(theta, (2, 1, 6, 7, 8), align_corners=False)

    def step(sample):
        model = make_model()
        flow = model(torch.cat([moving, fixed], 1)).permute(0, 2, 3, 4, 1)
        warped = sample(moving, base + 0.1 * flow, mode="bilinear", padding_mode="border",
                        align_corners=False)
        loss = F.mse_loss(warped, fixed)
        loss.backward()
        return loss.detach(), [p.grad.clone() for p in model.parameters()]

    loss_ref, grads_ref = step(F.grid_sample)
    loss, grads = step(gt.grid_sample)
    torch.testing.assert_close(loss, loss_ref, rtol=1e-12, atol=1e-12)
    for a, b in zip(grads, grads_ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


# ---------------------------------------------------------------------------
# Second order on volumes: the native double backward against PyTorch's formula.

def second_order(torch, sample, x, g, go, gg_dx, gg_dgrid, mode, padding, align):
    """Gradients of <gg_dx, dx> + <gg_dgrid, dgrid> in (grad, input, grid)
    through autograd's double backward of `sample`."""
    x = x.detach().requires_grad_()
    g = g.detach().requires_grad_()
    go = go.detach().requires_grad_()
    out = sample(x, g, mode=mode, padding_mode=padding, align_corners=align)
    dx, dgrid = torch.autograd.grad(out, (x, g), go, create_graph=True)
    loss = (dx * gg_dx).sum() + (dgrid * gg_dgrid).sum()
    res = torch.autograd.grad(loss, (go, x, g), allow_unused=True)
    return [torch.zeros_like(t) if r is None else r.detach() for r, t in zip(res, (go, x, g))]


def second_order_problem(torch, dtype, seed=12):
    x, g, go = make_problem(torch, dtype, seed=seed, shape=(2, 2, 3, 4, 5, 2, 3, 4), spread=1.2)
    gen = torch.Generator().manual_seed(seed + 1)
    gg_dx = torch.randn(x.shape, generator=gen, dtype=dtype)
    gg_dgrid = torch.randn(g.shape, generator=gen, dtype=dtype)
    return x, g, go, gg_dx, gg_dgrid


@pytest.mark.parametrize("mode,padding,align", CASES, ids=CASE_IDS)
def test_second_order_matches_torch(torch, gt, mode, padding, align):
    """create_graph=True through the drop-in gives PyTorch's double backward."""
    F = torch.nn.functional
    args = second_order_problem(torch, torch.float64)
    ours = second_order(torch, gt.grid_sample, *args, mode, padding, align)
    theirs = second_order(torch, F.grid_sample, *args, mode, padding, align)
    for name, a, b in zip(("d_grad", "d_input", "d_grid"), ours, theirs):
        assert_near(a, b, 1e-10, name)


@pytest.mark.parametrize("mode", MODES)
def test_gradgradcheck(torch, gt, mode):
    x, g, _ = make_problem(torch, torch.float64, seed=13, shape=(1, 2, 3, 3, 4, 2, 2, 2),
                           spread=1.1)
    x.requires_grad_()
    g.requires_grad_()
    for padding, align in (("zeros", False), ("border", True), ("reflection", False)):
        assert torch.autograd.gradgradcheck(
            lambda x, g: gt.grid_sample(x, g, mode, padding, align), (x, g), eps=1e-6,
            atol=1e-6)


def test_second_order_with_a_dependent_upstream_gradient(torch, gt):
    """loss = out^2: the upstream gradient of the first order depends on the
    grid itself. The second order through the drop-in is F.grid_sample's
    (the native formula returns partial derivatives; autograd adds the rest);
    a third order says it is not supported."""
    F = torch.nn.functional
    x0, g0, _ = make_problem(torch, torch.float64, seed=26, shape=(1, 2, 3, 4, 5, 2, 3, 4))
    results = []
    for sample in (gt.grid_sample, F.grid_sample):
        x, g = x0.clone().requires_grad_(), g0.clone().requires_grad_()
        out = sample(x, g, "bicubic", "border", False)
        dx, dg = torch.autograd.grad(out.square().sum(), (x, g), create_graph=True)
        second = torch.autograd.grad(dg.square().sum() + (dx * x).sum(), (x, g), create_graph=True)
        results.append(second)
        if sample is gt.grid_sample:
            with pytest.raises(RuntimeError, match="third-order gradients of grid_sample are not"):
                torch.autograd.grad(second[1].square().sum(), (x, g))
    for name, a, b in zip(("ddx", "ddg"), *results):
        assert_near(a.detach(), b.detach(), 1e-9, name)


def test_double_backward_op_on_float32(torch, gt):
    """The native 3-D double backward in float32 against PyTorch's formula in
    float64 on the same inputs (1e-4 of the largest magnitude, the 2-D bound)."""
    F = torch.nn.functional
    args64 = second_order_problem(torch, torch.float64, seed=31)
    args32 = [a.float() for a in args64]
    for mode, padding, align in (("bilinear", "zeros", False), ("bicubic", "reflection", True),
                                 ("bilinear", "border", True)):
        ours = second_order(torch, gt.grid_sample, *args32, mode, padding, align)
        theirs = second_order(torch, F.grid_sample, *args64, mode, padding, align)
        for name, a, b in zip(("d_grad", "d_input", "d_grid"), ours, theirs):
            assert_near(a.double(), b, 1e-4, f"{mode} {padding} {align} {name}")


def test_numpy_double_backward_matches_torch(torch):
    """gridsampler.grid_sample_double_backward on 5-D NumPy arrays: PyTorch's
    double backward of the 5-D F.grid_sample, and the output mask."""
    import gridsampler
    F = torch.nn.functional
    x, g, go, gg_dx, gg_dgrid = second_order_problem(torch, torch.float64, seed=33)
    theirs = second_order(torch, F.grid_sample, x, g, go, gg_dx, gg_dgrid, "bilinear",
                          "reflection", False)
    ours = gridsampler.grid_sample_double_backward(
        gg_dx.numpy(), gg_dgrid.numpy(), go.numpy(), x.numpy(), g.numpy(), "bilinear",
        "reflection", False)
    for name, a, b in zip(("d_grad", "d_input", "d_grid"), ours, theirs):
        assert isinstance(a, np.ndarray) and a.shape == tuple(b.shape)
        assert_near(torch.from_numpy(a), b, 1e-10, name)
    masked = gridsampler.grid_sample_double_backward(
        None, gg_dgrid.numpy(), go.numpy(), x.numpy(), g.numpy(), "bilinear", "reflection",
        False, output_mask=(False, True, False))
    assert masked[0] is None and masked[2] is None
    only_dgrid = second_order(torch, F.grid_sample, x, g, go, torch.zeros_like(gg_dx), gg_dgrid,
                              "bilinear", "reflection", False)
    assert_near(torch.from_numpy(masked[1]), only_dgrid[1], 1e-10, "d_input, gg_dx absent")


def test_second_order_one_input_at_a_time(torch, gt):
    """A gradient penalty on dgrid alone (only the grid requires grad) and on
    dx alone (only the input): the native formula takes the masks."""
    F = torch.nn.functional
    x, g, w = make_problem(torch, torch.float64, seed=14)
    for need_x, need_g in ((False, True), (True, False)):
        results = []
        for sample in (gt.grid_sample, F.grid_sample):
            xs = x.detach().requires_grad_(need_x)
            gs = g.detach().requires_grad_(need_g)
            leaf = xs if need_x else gs
            out = sample(xs, gs, "bicubic", "border", False)
            (d,) = torch.autograd.grad((out * w).sum(), leaf, create_graph=True)
            (dd,) = torch.autograd.grad(d.square().sum(), leaf, allow_unused=True)
            results.append(torch.zeros_like(leaf) if dd is None else dd)
        assert_near(results[0], results[1], 1e-10, f"need_x={need_x}")


# ---------------------------------------------------------------------------
# The NumPy-level functions on 5-D arrays.

def test_numpy_matches_torch(torch):
    F = torch.nn.functional
    x, g, w = make_problem(torch, torch.float64, seed=15)
    ref = run(F.grid_sample, x, g, w, "bicubic", "reflection", True)
    xn, gn, wn = x.numpy(), g.numpy(), w.numpy()
    out = gridsampler.grid_sample(xn, gn, "bicubic", "reflection", True)
    dx, dgrid = gridsampler.grid_sample_backward(wn, xn, gn, "bicubic", "reflection", True)
    for name, o, r in zip(("output", "dx", "dgrid"), (out, dx, dgrid), ref):
        assert isinstance(o, np.ndarray) and o.dtype == np.float64
        assert_near(torch.from_numpy(o), r, 1e-12, name)
    # Channels-last (NDHWC) and negative strides are read in place: same bits.
    xl = np.ascontiguousarray(xn.transpose(0, 2, 3, 4, 1)).transpose(0, 4, 1, 2, 3)
    assert np.array_equal(gridsampler.grid_sample(xl, gn, "bicubic", "reflection", True), out)
    xr = np.ascontiguousarray(xn[:, :, ::-1])[:, :, ::-1]
    assert xr.strides[2] < 0
    assert np.array_equal(gridsampler.grid_sample(xr, gn, "bicubic", "reflection", True), out)
    only_dgrid = gridsampler.grid_sample_backward(wn, xn, gn, "bicubic", "reflection", True,
                                                  output_mask=(False, True))
    assert only_dgrid[0] is None and np.array_equal(only_dgrid[1], dgrid)


def test_float32_numpy_torch_and_jax_agree(torch):
    """Every framework the 2-D functions accept: NumPy, torch and JAX arrays in,
    arrays of the same kind out, the same bits."""
    x, g, w = make_problem(torch, torch.float32, seed=16)
    out_t = gridsampler.grid_sample(x, g, "bilinear", "border", False)
    assert isinstance(out_t, torch.Tensor) and out_t.shape == (2, 3, 3, 4, 5)
    out_n = gridsampler.grid_sample(x.numpy(), g.numpy(), "bilinear", "border", False)
    assert np.array_equal(out_t.numpy(), out_n)
    dx_t, dgrid_t = gridsampler.grid_sample_backward(w, x, g, "bilinear", "border", False)
    assert isinstance(dx_t, torch.Tensor) and dgrid_t.shape == g.shape
    jnp = pytest.importorskip("jax.numpy")
    out_j = gridsampler.grid_sample(jnp.asarray(x.numpy()), jnp.asarray(g.numpy()),
                                    "bilinear", "border", False)
    assert type(out_j).__module__.startswith("jax")
    assert np.array_equal(np.asarray(out_j), out_n)
    dx_j, dgrid_j = gridsampler.grid_sample_backward(
        jnp.asarray(w.numpy()), jnp.asarray(x.numpy()), jnp.asarray(g.numpy()),
        "bilinear", "border", False)
    assert np.array_equal(np.asarray(dx_j), dx_t.numpy())
    assert np.array_equal(np.asarray(dgrid_j), dgrid_t.numpy())


def test_numpy_bfloat16_ml_dtypes(torch):
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf16 = ml_dtypes.bfloat16
    x, g, _ = make_problem(torch, torch.bfloat16, seed=17)
    xn = x.view(torch.int16).numpy().view(np.uint16).view(bf16)
    gn = g.view(torch.int16).numpy().view(np.uint16).view(bf16)
    out = gridsampler.grid_sample(xn, gn, "nearest", "zeros", False)
    assert out.dtype == bf16
    out_t = gridsampler.grid_sample(x, g, "nearest", "zeros", False)
    assert np.array_equal(out.view(np.uint16), out_t.view(torch.int16).numpy().view(np.uint16))


X5 = np.zeros((2, 3, 4, 5, 6), np.float32)
G5 = np.zeros((2, 3, 4, 5, 3), np.float32)
W5 = np.zeros((2, 3, 3, 4, 5), np.float32)


@pytest.mark.parametrize(
    "arrays,kwargs,exc,message",
    [
        ((X5, G5[..., :2], W5), {}, ValueError, "grid: last dimension must be 3, got 2"),
        ((X5, G5[:1], W5), {}, ValueError, "grid: batch size 1 does not match input's 2"),
        ((X5, G5[0], W5), {}, ValueError,
         "grid: expected 5 dimensions, got 4 (input is 5-D: a volume)"),
        ((X5[..., 0], G5, W5), {}, ValueError, "grid: expected 4 dimensions, got 5"),
        ((X5[0, 0], G5, W5), {}, ValueError,
         "input: expected 4 dimensions (an image) or 5 (a volume), got 3"),
        ((X5, G5.astype(np.float64), W5), {}, TypeError,
         "grid: dtype float64 differs from input's float32"),
        ((X5, G5, W5.astype(np.float64)), {}, TypeError,
         "grad: dtype float64 differs from input's float32"),
        ((X5, G5, W5[..., :4]), {}, ValueError,
         "grad: shape (2, 3, 3, 4, 4) must be (2, 3, 3, 4, 5)"),
        ((X5, G5, W5[0]), {}, ValueError, "grad: expected 5 dimensions, got 4"),
        ((X5[:, :, :0], G5, W5), {}, ValueError,
         "input: depth, height and width must be positive, got D=0, H=5, W=6"),
        ((X5.astype(np.int32), G5.astype(np.int32), W5), {}, TypeError,
         "input: dtype int32 is not supported"),
        ((X5, G5, W5), {"mode": "trilinear"}, ValueError, "mode: unknown value 'trilinear'"),
        ((X5, G5, W5), {"num_threads": -1}, ValueError,
         "num_threads: must be 0 (all) or positive, got -1"),
    ],
)
def test_numpy_errors(arrays, kwargs, exc, message):
    """Each rejection with its type and message (the library's where it decides)."""
    x, g, w = arrays
    if not message.startswith("grad:"):  # forward has no grad
        with pytest.raises(exc, match=re.escape(message)):
            gridsampler.grid_sample(x, g, **kwargs)
    with pytest.raises(exc, match=re.escape(message)):
        gridsampler.grid_sample_backward(w, x, g, **kwargs)


@pytest.mark.parametrize("mode", ["bilinear", "nearest"])
def test_volume_of_two_to_the_36_voxels(mode):
    """A ramp along W broadcast to 2^12 x 2^12 x 2^12 voxels (stride 0 along D
    and H, no memory): voxel counts and indices past 32 bits, values and
    coordinate gradients as the ramp gives them analytically."""
    size = 2**12
    x = np.broadcast_to(np.arange(size, dtype=np.float32), (1, 1, size, size, size))
    g = np.array([[1.0, 1.0, 1.0], [-1.0, -1.0, -1.0], [0.9991, 0.9999, 0.99],
                  [0.3001, -0.7, 0.99999]], np.float32).reshape(1, 1, 2, 2, 3)
    out = gridsampler.grid_sample(x, g, mode, "border", True)
    ix = (g[..., 0].astype(np.float64) + 1) / 2 * (size - 1)  # align_corners: the W index
    want = ix if mode == "bilinear" else np.rint(ix)
    np.testing.assert_allclose(out[:, 0], want, rtol=0, atol=1e-3)
    dx, dgrid = gridsampler.grid_sample_backward(np.ones_like(out), x, g, mode, "border", True,
                                                 output_mask=(False, True))
    assert dx is None and dgrid.shape == g.shape
    # d out / d x = (W - 1) / 2 inside the ramp (0 at the clipped border and
    # for nearest); the ramp is flat along y and z, up to float32 rounding of
    # sums of products as large as value x (size - 1) / 2 ~ 2^23.
    inside = np.abs(g[..., 0]) < 1
    slope = np.where(inside, (size - 1) / 2, 0.0) if mode == "bilinear" else 0.0
    np.testing.assert_allclose(dgrid[..., 0], np.broadcast_to(slope, g.shape[:-1]), rtol=1e-6)
    bound = 4 * np.finfo(np.float32).eps * size * (size - 1) / 2
    assert np.abs(dgrid[..., 1:]).max() <= bound, dgrid


def test_num_threads_same_bits(torch):
    x, g, w = make_problem(torch, torch.float32, seed=18, shape=(2, 4, 6, 7, 8, 5, 6, 7))
    xn, gn, wn = x.numpy(), g.numpy(), w.numpy()
    base = gridsampler.grid_sample_backward(wn, xn, gn, "bilinear", "zeros", False, num_threads=1)
    out1 = gridsampler.grid_sample(xn, gn, "bilinear", "zeros", False, num_threads=1)
    for threads in (2, 3, 7):
        dx, dgrid = gridsampler.grid_sample_backward(wn, xn, gn, "bilinear", "zeros", False,
                                                     num_threads=threads)
        assert np.array_equal(dx, base[0]) and np.array_equal(dgrid, base[1])
        assert np.array_equal(gridsampler.grid_sample(xn, gn, "bilinear", "zeros", False,
                                                      num_threads=threads), out1)


# ---------------------------------------------------------------------------
# Hostile values: the 2-D rules per component, as PyTorch computes them.

@pytest.mark.parametrize("mode,padding,align", CASES, ids=CASE_IDS)
def test_non_finite_and_huge_coordinates(torch, gt, mode, padding, align):
    """NaN, +-Inf and 1e30 in single components of the grid: the library's
    rules (design.md section 2) per component. Results are finite, the
    coordinate gradient of a non-finite component is 0, dx is the adjoint of
    the forward, and points whose components are all finite (and, with
    reflection, moderate: PyTorch counts reflections in an int) get
    F.grid_sample's values."""
    F = torch.nn.functional
    x, g, w = make_problem(torch, torch.float64, seed=19, shape=(1, 2, 3, 4, 5, 4, 3, 4))
    specials = (float("nan"), float("inf"), float("-inf"), 1e30, -1e30, 1.0, -1.0)
    flat = g.view(-1, 3)
    for i, v in enumerate(specials * 3):
        flat[i, i % 3] = v
    flat[len(specials) * 3, :] = float("nan")
    out, dx, dgrid = run(gt.grid_sample, x, g, w, mode, padding, align)
    for name, r in (("output", out), ("dx", dx), ("dgrid", dgrid)):
        assert torch.isfinite(r).all(), f"{name} not finite"
    assert not dgrid[~torch.isfinite(g)].any()
    lhs, rhs = float((out * w).sum()), float((x * dx).sum())
    assert abs(lhs - rhs) <= 1e-9 * max(1.0, abs(lhs)), (lhs, rhs)
    finite = torch.isfinite(g).all(-1)[0]
    if padding == "reflection":
        finite &= (g.abs() < 1e6).all(-1)[0]
    ref_out, _, ref_dgrid = run(F.grid_sample, x, torch.where(torch.isfinite(g), g, 0), w, mode,
                                padding, align)
    assert finite.sum() > 12
    assert_near(out[0][:, finite], ref_out[0][:, finite], 1e-12, "output")
    assert_near(dgrid[0][finite], ref_dgrid[0][finite], 1e-12, "dgrid")


def test_drop_in_errors_are_pytorchs(torch, gt):
    """5-D calls PyTorch rejects are handed to F.grid_sample: its exception and message."""
    F = torch.nn.functional
    x = torch.zeros(2, 3, 4, 5, 6)
    bad = {
        "grid_last_dim": (x, torch.zeros(2, 3, 4, 5, 2)),
        "grid_rank": (x, torch.zeros(2, 3, 4, 3)),
        "batch": (x, torch.zeros(3, 3, 4, 5, 3)),
        "dtype_mix": (x, torch.zeros(2, 3, 4, 5, 3, dtype=torch.float64)),
        "empty_depth": (torch.zeros(2, 3, 0, 5, 6), torch.zeros(2, 3, 4, 5, 3)),
    }
    for name, (xi, gi) in bad.items():
        with pytest.raises(Exception) as ref:
            F.grid_sample(xi, gi, "bilinear", "zeros", False)
        with pytest.raises(Exception) as ours:
            gt.grid_sample(xi, gi, "bilinear", "zeros", False)
        assert (type(ours.value), str(ours.value)) == (type(ref.value), str(ref.value)), name


def test_operator_errors(torch, gt):
    """The operators called directly: clear messages for wrong ranks."""
    x = torch.zeros(2, 3, 4, 5, 6)
    with pytest.raises(ValueError, match="input: expected 5 dimensions, got 4"):
        torch.ops.gridsampler.grid_sampler_3d(x[0], torch.zeros(2, 3, 4, 5, 3), "bilinear",
                                              "zeros", False)
    with pytest.raises(ValueError, match="grid: last dimension must be 3, got 2"):
        torch.ops.gridsampler.grid_sampler_3d(x, torch.zeros(2, 3, 4, 5, 2), "bilinear",
                                              "zeros", False)
    with pytest.raises(ValueError, match="mode: unknown value 'area'"):
        torch.ops.gridsampler.grid_sampler_3d(x, torch.zeros(2, 3, 4, 5, 3), "area",
                                              "zeros", False)


# ---------------------------------------------------------------------------
# The switch on aten::grid_sampler_3d and its backward.

@pytest.mark.parametrize("dtype_name", ["float32", "float64", "bfloat16"])
@pytest.mark.parametrize("mode,padding,align", CASES, ids=CASE_IDS)
def test_switch_parity_and_counts(torch, gt, mode, padding, align, dtype_name):
    """F.grid_sample on 5-D with the switch on: gridsampler's bits (the drop-in's),
    PyTorch's values within the dtype's tolerance, counted by switch_stats."""
    dtype = getattr(torch, dtype_name)
    F = torch.nn.functional
    x, g, w = make_problem(torch, dtype, seed=20)
    ref = run(F.grid_sample, x, g, w, mode, padding, align)
    drop_in = run(gt.grid_sample, x, g, w, mode, padding, align)
    gt.switch_stats(reset=True)
    with gt.switch():
        on = run(F.grid_sample, x, g, w, mode, padding, align)
    stats = gt.switch_stats()
    assert stats["grid_sampler_3d"] == 1 and stats["grid_sampler_3d_backward"] == 1, stats
    assert stats["handed_on"] == 0 and stats["grid_sampler_2d"] == 0, stats
    tol = TOL.get(dtype_name, 4 * torch.finfo(dtype).eps)
    ref64 = run(F.grid_sample, x.double(), g.double(), w.double(), mode, padding, align) \
        if dtype_name == "bfloat16" else ref
    for name, o, d, r in zip(("output", "dx", "dgrid"), on, drop_in, ref64):
        assert o.dtype == dtype
        assert torch.equal(o, d), name
        assert_near(o, r, tol, name)


def test_switch_channels_last_3d_and_mask(torch, gt):
    """NDHWC input, and only the grid requiring grad (output_mask [False, True])."""
    F = torch.nn.functional
    x, g, w = make_problem(torch, torch.float32, seed=21)
    xl = with_layout(torch, x, "channels_last_3d")
    gs = g.clone().requires_grad_()
    gt.switch_stats(reset=True)
    with gt.switch():
        out = F.grid_sample(xl, gs, "bilinear", "border", True)
        (dgrid,) = torch.autograd.grad(out, gs, w)
    assert gt.switch_stats()["grid_sampler_3d_backward"] == 1
    gr = g.clone().requires_grad_()
    ref = F.grid_sample(x, gr, "bilinear", "border", True)
    (dgrid_ref,) = torch.autograd.grad(ref, gr, w)
    assert_near(out.detach(), ref.detach(), TOL["float32"], "output")
    assert_near(dgrid, dgrid_ref, TOL["float32"], "dgrid")


@pytest.mark.parametrize("mode,padding,align", CASES, ids=CASE_IDS)
def test_switch_second_order_is_native(torch, gt, mode, padding, align):
    """Second order of F.grid_sample on 5-D with the switch on: gridsampler's
    native double backward as the derivative of aten::grid_sampler_3d_backward
    (counted), equal to PyTorch's formula within float64 rounding; with both
    incoming gradients, and with dgrid unused (gg_dx alone)."""
    F = torch.nn.functional
    args = second_order_problem(torch, torch.float64, seed=41)
    x, g, go, gg_dx, gg_dgrid = args
    for incoming in ((gg_dx, gg_dgrid), (gg_dx, None)):
        def penalty(x, g):
            x = x.detach().requires_grad_()
            g = g.detach().requires_grad_()
            out = F.grid_sample(x, g, mode=mode, padding_mode=padding, align_corners=align)
            dx, dgrid = torch.autograd.grad(out, (x, g), go, create_graph=True)
            loss = (dx * incoming[0]).sum()
            if incoming[1] is not None:
                loss = loss + (dgrid * incoming[1]).sum()
            res = torch.autograd.grad(loss, (x, g), allow_unused=True)
            return [torch.zeros_like(t) if r is None else r for r, t in zip(res, (x, g))]
        theirs = penalty(x, g)
        gt.switch_stats(reset=True)
        with gt.switch():
            ours = penalty(x, g)
        stats = gt.switch_stats()
        assert stats["grid_sampler_3d_backward"] == 1 and stats["double_backward"] == 1, stats
        assert stats["handed_on"] == 0, stats
        for name, a, b in zip(("d/dx", "d/dgrid"), ours, theirs):
            assert_near(a, b, 1e-10, name)


def test_switch_hands_on_what_it_does_not_take(torch, gt):
    """Calls PyTorch rejects keep PyTorch's message; counted as handed on."""
    F = torch.nn.functional
    x = torch.zeros(2, 3, 4, 5, 6)
    cases = [(x, torch.zeros(2, 3, 4, 5, 2)), (x, torch.zeros(3, 3, 4, 5, 3)),
             (torch.zeros(2, 3, 0, 5, 6), torch.zeros(2, 3, 4, 5, 3))]
    for xi, gi in cases:
        with pytest.raises(Exception) as ref:
            F.grid_sample(xi, gi, "bilinear", "zeros", False)
        gt.switch_stats(reset=True)
        with gt.switch():
            with pytest.raises(Exception) as ours:
                F.grid_sample(xi, gi, "bilinear", "zeros", False)
        assert (type(ours.value), str(ours.value)) == (type(ref.value), str(ref.value))
        assert gt.switch_stats()["grid_sampler_3d"] == 0


@pytest.mark.parametrize("mode,padding,align", CASES, ids=CASE_IDS)
def test_switch_second_order(torch, gt, mode, padding, align):
    """PyTorch's own double-backward formula for grid_sampler_3d_backward,
    with the switch's first-order kernels underneath: PyTorch's numbers."""
    F = torch.nn.functional
    args = second_order_problem(torch, torch.float64, seed=22)
    theirs = second_order(torch, F.grid_sample, *args, mode, padding, align)
    gt.switch_stats(reset=True)
    with gt.switch():
        ours = second_order(torch, F.grid_sample, *args, mode, padding, align)
    stats = gt.switch_stats()
    assert stats["grid_sampler_3d"] >= 1 and stats["grid_sampler_3d_backward"] >= 1, stats
    assert stats["handed_on"] == 0, stats
    for name, a, b in zip(("d_grad", "d_input", "d_grid"), ours, theirs):
        assert_near(a, b, 1e-10, name)


def test_switch_gradgradcheck(torch, gt):
    x, g, _ = make_problem(torch, torch.float64, seed=23, shape=(1, 2, 3, 3, 4, 2, 2, 2),
                           spread=1.1)
    x.requires_grad_()
    g.requires_grad_()
    F = torch.nn.functional
    with gt.switch():
        for mode, padding in (("bilinear", "zeros"), ("bicubic", "reflection")):
            assert torch.autograd.gradgradcheck(
                lambda x, g: F.grid_sample(x, g, mode, padding, True), (x, g), eps=1e-6,
                atol=1e-6)


@pytest.mark.parametrize("backend", ["inductor", "aot_eager"])
def test_switch_under_torch_compile(torch, gt, backend):
    """Inductor keeps aten.grid_sampler_3d (it decomposes only the 2-D
    forward), so a compiled 5-D step runs both operators on the switch."""
    F = torch.nn.functional
    x, g, w = make_problem(torch, torch.float32, seed=25)

    def f(x, g):
        return (F.grid_sample(x, g, "bilinear", "border", True) * w).sum()

    ref = run(lambda x, g, **kw: F.grid_sample(x, g, **kw), x, g, w, "bilinear", "border", True)
    torch._dynamo.reset()
    compiled = torch.compile(f, backend=backend, fullgraph=True)
    xs, gs = x.clone().requires_grad_(), g.clone().requires_grad_()
    gt.switch_stats(reset=True)
    with gt.switch():
        compiled(xs, gs).backward()
    stats = gt.switch_stats()
    assert stats["grid_sampler_3d"] == 1 and stats["grid_sampler_3d_backward"] == 1, stats
    assert_near(xs.grad, ref[1], TOL["float32"], "dx")
    assert_near(gs.grad, ref[2], TOL["float32"], "dgrid")


@pytest.mark.filterwarnings("ignore:monai.networks.blocks.Warp. Using PyTorch native grid_sample")
@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
def test_monai_warp_3d(torch, gt, mode):
    """MONAI's Warp block (VoxelMorph-style registration) on a small volume,
    unchanged, with the switch on: MONAI's numbers and gradients."""
    if os.environ.get("GRIDSAMPLER_REQUIRE_TORCH") == "1":
        blocks = importlib.import_module("monai.networks.blocks")
    else:
        blocks = pytest.importorskip("monai.networks.blocks")
    gen = torch.Generator().manual_seed(24)
    img = torch.randn(2, 2, 6, 7, 8, generator=gen, dtype=torch.float64)
    ddf = torch.randn(2, 3, 6, 7, 8, generator=gen, dtype=torch.float64) * 2  # voxels
    warp = blocks.Warp(mode=mode, padding_mode="border")

    def step():
        i, d = img.clone().requires_grad_(), ddf.clone().requires_grad_()
        out = warp(i, d)
        (out.square().sum()).backward()
        return out.detach(), i.grad, d.grad

    ref = step()
    gt.switch_stats(reset=True)
    with gt.switch():
        ours = step()
    stats = gt.switch_stats()
    assert stats["grid_sampler_3d"] == 1 and stats["grid_sampler_3d_backward"] == 1, stats
    for name, o, r in zip(("output", "d_image", "d_ddf"), ours, ref):
        assert_near(o, r, 1e-10, name)
