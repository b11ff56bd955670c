"""gridsampler.torch.grid_sample against torch.nn.functional.grid_sample and its autograd."""

import itertools
import warnings

import pytest

from conftest import MODES, PADDINGS, op_logs

CASES = list(itertools.product(MODES, PADDINGS, (False, True)))
CASE_IDS = [f"{m}-{p}-{'align' if a else 'noalign'}" for m, p, a in CASES]
LAYOUTS = ("contiguous", "channels_last", "sliced")

N, C, HIN, WIN, HOUT, WOUT = 2, 3, 5, 7, 4, 6


def make_problem(torch, dtype, seed=0, shape=(N, C, HIN, WIN, HOUT, WOUT), spread=1.15):
    """input, grid (partly out of [-1, 1]) and an upstream gradient, in float64."""
    n, c, hin, win, hout, wout = shape
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(n, c, hin, win, generator=gen, dtype=torch.float64)
    g = (torch.rand(n, hout, wout, 2, generator=gen, dtype=torch.float64) * 2 - 1) * spread
    w = torch.randn(n, c, hout, wout, generator=gen, dtype=torch.float64)
    return x.to(dtype), g.to(dtype), w.to(dtype)


def with_layout(torch, t, layout):
    """The values of `t` in another memory layout (a leaf that can require grad)."""
    if layout == "contiguous":
        return t.contiguous()
    if layout == "channels_last":
        if t.shape[-1] == 2:  # a grid: x and y planes, (N, 2, H, W) in memory
            return t.permute(0, 3, 1, 2).contiguous().permute(0, 2, 3, 1)
        return t.contiguous(memory_format=torch.channels_last)
    if layout == "sliced":  # every dimension strided, with an offset
        n, c, h, w = t.shape
        big = torch.full((2 * n, c + 1, 2 * h + 1, 3 * w), float("nan"), dtype=t.dtype)
        view = big[::2, 1:, 1::2, 2::3]
        view.copy_(t)
        assert not view.is_contiguous()
        return view
    raise ValueError(layout)


def run(op, torch, x, g, w, mode, padding, align):
    """Output and the gradients of sum(out * w) with respect to x and g."""
    x = x.detach().requires_grad_()
    g = g.detach().requires_grad_()
    out = op(x, g, mode=mode, padding_mode=padding, align_corners=align)
    (out * w).sum().backward()
    return out.detach(), x.grad, g.grad


def assert_near(ours, ref, tol, what):
    scale = max(1.0, float(ref.abs().max())) if ref.numel() else 1.0
    err = float((ours.double() - ref.double()).abs().max()) if ref.numel() else 0.0
    assert ours.shape == ref.shape, what
    assert err <= tol * scale, f"{what}: max error {err:.3g} > {tol:.3g} * {scale:.3g}"


TOL = {"float64": 1e-12, "float32": 2e-5}


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
@pytest.mark.parametrize("mode,padding,align", CASES, ids=CASE_IDS)
def test_matches_torch(torch, gt, mode, padding, align, dtype_name, layout):
    dtype = getattr(torch, dtype_name)
    F = torch.nn.functional
    x, g, w = make_problem(torch, dtype)
    ref = run(F.grid_sample, torch, x, g, w, mode, padding, align)
    ours = run(gt.grid_sample, torch, with_layout(torch, x, layout), with_layout(torch, g, layout),
               w, mode, padding, align)
    for name, o, r in zip(("output", "dx", "dgrid"), ours, ref):
        assert o.dtype == dtype
        assert_near(o, r, TOL[dtype_name], name)
    if layout != "contiguous":  # the library promises layout-independent bits
        base = run(gt.grid_sample, torch, x, g, w, mode, padding, align)
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
    ref = run(F.grid_sample, torch, x.double(), g.double(), w.double(), mode, padding, align)
    layout = "channels_last" if dtype_name == "float16" else "sliced"
    ours = run(gt.grid_sample, torch, with_layout(torch, x, layout), with_layout(torch, g, layout),
               w, mode, padding, align)
    eps = torch.finfo(dtype).eps
    for name, o, r in zip(("output", "dx", "dgrid"), ours, ref):
        assert o.dtype == dtype
        assert_near(o, r, 4 * eps, name)


@pytest.mark.parametrize("mode,padding,align", CASES, ids=CASE_IDS)
def test_gradcheck_float64(torch, gt, mode, padding, align):
    x, g, _ = make_problem(torch, torch.float64, seed=2, shape=(1, 2, 4, 5, 3, 3), spread=1.1)
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
            if "gridsampler.grid_sampler_2d_backward" in str(func):
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
    # The backward op leaves out (returns empty) what its mask leaves out.
    dx, dgrid = torch.ops.gridsampler.grid_sampler_2d_backward(
        w, x.detach(), g.detach(), "bicubic", "border", False, list(mask))
    assert dx.shape == (x.shape if mask[0] else (0,))
    assert dgrid.shape == (g.shape if mask[1] else (0,))


def test_no_grad_needed(torch, gt):
    x, g, _ = make_problem(torch, torch.float32)
    out = gt.grid_sample(x, g, align_corners=False)
    assert not out.requires_grad and out.grad_fn is None
    torch.testing.assert_close(out, torch.nn.functional.grid_sample(x, g, align_corners=False))
    # Without gradients to record (plain tensors, or grad mode off) the call
    # skips the autograd.Function: the same bits as a recorded call.
    xr, gr = x.clone().requires_grad_(), g.clone().requires_grad_()
    recorded = gt.grid_sample(xr, gr, "bicubic", "reflection", True)
    assert recorded.grad_fn is not None
    with torch.no_grad():
        off = gt.grid_sample(xr, gr, "bicubic", "reflection", True)
    with torch.inference_mode():
        inference = gt.grid_sample(x, g, "bicubic", "reflection", True)
    plain = gt.grid_sample(x, g, "bicubic", "reflection", True)
    for t in (off, inference, plain):
        assert not t.requires_grad and t.grad_fn is None
        assert torch.equal(t, recorded.detach())


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


@pytest.mark.parametrize("shape", [(0, 3, 5, 7, 4, 6), (2, 0, 5, 7, 4, 6), (2, 3, 5, 7, 0, 6)])
def test_empty_problems(torch, gt, shape):
    x, g, w = make_problem(torch, torch.float32, shape=shape)
    ours = run(gt.grid_sample, torch, x, g, w, "bilinear", "zeros", False)
    ref = run(torch.nn.functional.grid_sample, torch, x, g, w, "bilinear", "zeros", False)
    for o, r in zip(ours, ref):
        assert o.shape == r.shape
        torch.testing.assert_close(o, r)


def test_align_corners_none_warns_like_torch(torch, gt):
    x, g, _ = make_problem(torch, torch.float32)
    with pytest.warns(UserWarning, match="align_corners=False"):
        out = gt.grid_sample(x, g)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.testing.assert_close(out, torch.nn.functional.grid_sample(x, g))


@pytest.mark.parametrize("mode", MODES)
def test_opcheck(torch, gt, mode):
    x, g, w = make_problem(torch, torch.float64, seed=5, shape=(2, 2, 4, 5, 3, 3))
    for padding, align in (("zeros", False), ("reflection", True)):
        torch.library.opcheck(torch.ops.gridsampler.grid_sampler_2d.default,
                              (x.requires_grad_(), g.requires_grad_(), mode, padding, align))
        for mask in ([True, True], [True, False], [False, True]):
            torch.library.opcheck(
                torch.ops.gridsampler.grid_sampler_2d_backward.default,
                (w, x.detach(), g.detach(), mode, padding, align, mask))


def test_torch_compile_inductor(torch, gt):
    """A compiled training-style function (forward and backward) with the op in its graph."""
    torch._dynamo.reset()
    x, g, w = make_problem(torch, torch.float32, seed=6)

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
    """The fake implementation gives symbolic shapes: one graph serves two sizes."""
    from torch._dynamo.testing import CompileCounterWithBackend

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")

    def f(x, g):
        return gt.grid_sample(x, g, "bilinear", "zeros", False).square().mean()

    compiled = torch.compile(f, backend=counter, fullgraph=True, dynamic=True)
    # All sizes distinct (and != 2, the last grid dim): duck sizing would tie equal ones.
    for shape in ((3, 4, 5, 6, 7, 8), (5, 6, 7, 8, 9, 10)):
        x, g, _ = make_problem(torch, torch.float64, shape=shape)
        xs, gs = x.clone().requires_grad_(), g.clone().requires_grad_()
        compiled(xs, gs).backward()
        xr, gr = x.clone().requires_grad_(), g.clone().requires_grad_()
        torch.nn.functional.grid_sample(xr, gr, "bilinear", "zeros", False).square().mean().backward()
        assert_near(xs.grad, xr.grad, 1e-12, "dx")
        assert_near(gs.grad, gr.grad, 1e-12, "dgrid")
    assert counter.frame_count == 1


def test_torch_export(torch, gt):
    class Warp(torch.nn.Module):
        def forward(self, x, g):
            return gt.grid_sample(x, g, "nearest", "reflection", False)

    x, g, _ = make_problem(torch, torch.float32, seed=7)
    ep = torch.export.export(Warp(), (x, g))
    assert "gridsampler.grid_sampler_2d" in str(ep.graph)
    torch.testing.assert_close(ep.module()(x, g), Warp()(x, g))
    torch.testing.assert_close(
        ep.module()(x, g), torch.nn.functional.grid_sample(x, g, "nearest", "reflection", False))


def test_training_step_same_loss_and_gradients(torch, gt):
    """A training step (predict a flow, warp, loss, backward, SGD) with the drop-in
    gives the loss, gradients and updated weights of F.grid_sample."""
    F = torch.nn.functional

    def make_model():
        torch.manual_seed(0)
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.Tanh(),
            torch.nn.Conv2d(8, 2, 3, padding=1)).double()

    gen = torch.Generator().manual_seed(8)
    image = torch.randn(2, 3, 16, 16, generator=gen, dtype=torch.float64)
    target = torch.randn(2, 3, 16, 16, generator=gen, dtype=torch.float64)
    theta = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], dtype=torch.float64).expand(2, 2, 3)
    base = F.affine_grid(theta, (2, 3, 16, 16), align_corners=False)

    def step(sample):
        model = make_model()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        flow = model(image).permute(0, 2, 3, 1)
        warped = sample(image, base + 0.1 * flow, mode="bilinear", padding_mode="border",
                        align_corners=False)
        loss = F.mse_loss(warped, target)
        opt.zero_grad()
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        opt.step()
        return loss.detach(), grads, [p.detach() for p in model.parameters()]

    loss_ref, grads_ref, params_ref = step(F.grid_sample)
    loss, grads, params = step(gt.grid_sample)
    torch.testing.assert_close(loss, loss_ref, rtol=1e-12, atol=1e-12)
    for a, b in zip(grads + params, grads_ref + params_ref):
        torch.testing.assert_close(a, b, rtol=1e-10, atol=1e-12)


BAD_CALLS = {
    # name: (input shape, grid shape, dtypes, kwargs)
    "grid_last_dim": ((2, 3, 5, 7), (2, 4, 6, 3), None, {}),
    "batch": ((2, 3, 5, 7), (3, 4, 6, 2), None, {}),
    "dtype_mix": ((2, 3, 5, 7), (2, 4, 6, 2), ("float32", "float64"), {}),
    "int_dtype": ((2, 3, 5, 7), (2, 4, 6, 2), ("int64", "int64"), {}),
    "empty_hw": ((2, 3, 0, 7), (2, 4, 6, 2), None, {}),
    "mode": ((2, 3, 5, 7), (2, 4, 6, 2), None, {"mode": "trilinear"}),
    "padding": ((2, 3, 5, 7), (2, 4, 6, 2), None, {"padding_mode": "wrap"}),
    "mode_not_str": ((2, 3, 5, 7), (2, 4, 6, 2), None, {"mode": 0}),
    "five_d_input": ((2, 3, 5, 7, 1), (2, 4, 6, 2), None, {}),
    "grid_3d": ((2, 3, 5, 7), (2, 4, 2), None, {}),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_errors_are_pytorchs(torch, gt, case):
    """Arguments F.grid_sample rejects: the same exception type and message."""
    in_shape, grid_shape, dtypes, extra = BAD_CALLS[case]
    in_dtype, grid_dtype = (getattr(torch, d) for d in (dtypes or ("float32", "float32")))
    x = torch.zeros(in_shape, dtype=in_dtype)
    g = torch.zeros(grid_shape, dtype=grid_dtype)
    kwargs = {"mode": "bilinear", "padding_mode": "zeros", "align_corners": False, **extra}
    with pytest.raises(Exception) as ref:
        torch.nn.functional.grid_sample(x, g, **kwargs)
    with pytest.raises(Exception) as ours:
        gt.grid_sample(x, g, **kwargs)
    assert type(ours.value) is type(ref.value)
    assert str(ours.value) == str(ref.value)


def test_other_devices_are_pytorchs(torch, gt):
    """A tensor on another device (meta here; CUDA and MPS take the same path)
    goes to F.grid_sample and so to PyTorch's kernel for that device."""
    LogOps, _ = op_logs()

    x = torch.empty(2, 3, 5, 7, device="meta", requires_grad=True)
    g = torch.empty(2, 4, 6, 2, device="meta", requires_grad=True)
    with LogOps() as log:
        out = gt.grid_sample(x, g, "bicubic", "border", True)
        dx, dg = torch.autograd.grad(out, (x, g), torch.empty_like(out))
    assert out.device.type == "meta" and out.shape == (2, 3, 4, 6)
    assert dx.shape == x.shape and dg.shape == g.shape
    assert "aten.grid_sampler_2d.default" in log.ops
    assert "aten.grid_sampler_2d_backward.default" in log.ops
    assert not any(op.startswith("gridsampler.") for op in log.ops)
    # A CPU call of the same shapes takes the custom operator instead.
    x, g = torch.zeros(2, 3, 5, 7), torch.zeros(2, 4, 6, 2)
    with LogOps() as log:
        gt.grid_sample(x, g, "bicubic", "border", True)
    assert log.ops == ["gridsampler.grid_sampler_2d.default"]


@pytest.mark.parametrize("dtypes", [("bfloat16", "bfloat16"), ("float16", "float32"),
                                    ("float64", "float64"), ("float32", "float32")])
def test_autocast_result_dtype(torch, gt, dtypes):
    """Under torch.autocast("cpu"), PyTorch runs grid_sample in float32 (float64
    stays): the drop-in gives the same dtype, and its values."""
    x, g, _ = make_problem(torch, torch.float64, seed=12)
    x, g = x.to(getattr(torch, dtypes[0])), g.to(getattr(torch, dtypes[1]))
    F = torch.nn.functional
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = F.grid_sample(x, g, "bilinear", "zeros", False)
        ours = gt.grid_sample(x, g, "bilinear", "zeros", False)
        direct = torch.ops.gridsampler.grid_sampler_2d(x, g, "bilinear", "zeros", False) \
            if x.dtype == g.dtype else ours
    assert ref.dtype == (torch.float64 if dtypes[0] == "float64" else torch.float32)
    assert ours.dtype == ref.dtype and direct.dtype == ref.dtype
    assert_near(ours, ref, TOL["float64" if ref.dtype == torch.float64 else "float32"], "output")
    assert torch.equal(direct, ours)


def test_misaligned_data(torch, gt):
    """PyTorch takes a tensor whose data is off its element alignment (here a
    float32 view one byte into a buffer); so does the drop-in, with F.grid_sample's values."""
    x, g, w = make_problem(torch, torch.float32, seed=13)
    raw = torch.zeros(x.numel() * 4 + 1, dtype=torch.uint8)
    xm = torch.frombuffer(raw.numpy().data, dtype=torch.float32, count=x.numel(), offset=1)
    xm = xm.view(x.shape)
    xm.copy_(x)
    assert xm.data_ptr() % 4 != 0
    ours = gt.grid_sample(xm, g, "bilinear", "reflection", False)
    ref = torch.nn.functional.grid_sample(x, g, "bilinear", "reflection", False)
    assert torch.equal(ours, gt.grid_sample(x, g, "bilinear", "reflection", False))
    assert_near(ours, ref, TOL["float32"], "output")


def test_eager_check_agrees_with_takes(torch, gt):
    """grid_sample's check for plain eager tensors (_switch.plain_rank, which
    reads fewer attributes) accepts exactly the calls _switch.takes accepts,
    over ranks, dtypes, devices, layouts and shapes that each break one rule."""
    from gridsampler import _switch

    def tensors(rank, dtype=torch.float32, device="cpu", n=(2, 2), spatial=3, last=None,
                empty_axis=None):
        shape = [n[0], 3] + [spatial] * (rank - 2)
        gshape = [n[1]] + [4] * (rank - 2) + [rank - 2 if last is None else last]
        if empty_axis is not None:
            shape[empty_axis] = 0
        return (torch.zeros(shape, dtype=dtype, device=device),
                torch.zeros(gshape, dtype=dtype, device=device))

    pairs = []
    for rank in (3, 4, 5, 6):
        pairs.append(tensors(rank))
        for dtype in (torch.float16, torch.bfloat16, torch.float64, torch.int32,
                      torch.complex64, torch.bool):
            pairs.append(tensors(rank, dtype))
        pairs.append(tensors(rank, device="meta"))
        pairs.append(tensors(rank, n=(2, 1)))
        pairs.append(tensors(rank, n=(0, 0)))
        for last in (1, 2, 3):
            pairs.append(tensors(rank, last=last))
        for axis in range(rank):
            pairs.append(tensors(rank, empty_axis=axis))
    x, g = tensors(4)
    pairs += [(x, g.double()), (x.double(), g), (x, g[0]), (x[0], g),
              (x.to_sparse(), g), (x, g.to_sparse()), (x.permute(0, 2, 3, 1), g),
              (torch.nn.Parameter(x), torch.nn.Parameter(g)), (x, g.transpose(1, 2))]
    accepted = 0
    for x, g in pairs:
        rank = x.dim()
        expected = rank if rank in (4, 5) and _switch.takes(
            x, g, 0, 0, check_alignment=False, rank=rank) else 0
        assert _switch.plain_rank(x, g) == expected, (x.shape, x.dtype, x.device, g.shape)
        accepted += expected != 0
    assert accepted >= 10  # the sweep has calls of both kinds
