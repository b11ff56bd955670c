"""Second order: gridsampler's double backward against PyTorch's, through the
drop-in's autograd (create_graph=True), gradgradcheck, the NumPy-level
function, 16-bit dtypes against float64, layouts and thread counts, and the
third order's error."""

import io
import itertools

import numpy as np
import pytest

torch = pytest.importorskip("torch")
import torch.nn.functional as F  # noqa: E402

import gridsampler  # noqa: E402
import gridsampler.torch as gst  # noqa: E402
from conftest import op_logs  # noqa: E402

MODES = ("bilinear", "nearest", "bicubic")
PADS = ("zeros", "border", "reflection")


def _lattice(n, h, w, align, dtype):
    """Grid points exactly on input pixel centres (and half-way between), where
    floor and round sit on their edges."""
    ys = torch.linspace(-1, 1, h, dtype=dtype) if align else (torch.arange(h, dtype=dtype) * 2 + 1) / h - 1
    xs = torch.linspace(-1, 1, w, dtype=dtype) if align else (torch.arange(w, dtype=dtype) * 2 + 1) / w - 1
    gy, gx = torch.meshgrid(ys, xs, indexing="ij")
    return torch.stack([gx, gy], dim=-1).expand(n, h, w, 2).contiguous()


def _second_order(sample, x, g, go, gg_dx, gg_dgrid, mode, pad, align):
    """Gradients of <gg_dx, dx> + <gg_dgrid, dgrid> in (grad, input, grid)
    through autograd's double backward of `sample`."""
    x = x.detach().requires_grad_()
    g = g.detach().requires_grad_()
    go = go.detach().requires_grad_()
    out = sample(x, g, mode=mode, padding_mode=pad, align_corners=align)
    dx, dgrid = torch.autograd.grad(out, (x, g), go, create_graph=True)
    loss = (dx * gg_dx).sum() + (dgrid * gg_dgrid).sum()
    res = torch.autograd.grad(loss, (go, x, g), allow_unused=True)
    return [torch.zeros_like(t) if r is None else r.detach() for r, t in zip(res, (go, x, g))]


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("mode,pad,align", list(itertools.product(MODES, PADS, (False, True))))
@pytest.mark.parametrize("grid_kind", ["random", "lattice"])
def test_matches_pytorch_double_backward(mode, pad, align, dtype, grid_kind):
    gen = torch.Generator().manual_seed(7)
    n, c, h, w = 2, 3, 6, 7
    x = torch.randn(n, c, h, w, generator=gen, dtype=dtype)
    if grid_kind == "random":
        g = torch.rand(n, 5, 4, 2, generator=gen, dtype=dtype) * 2.4 - 1.2
    else:
        g = _lattice(n, h, w, align, dtype)
    go = torch.randn(n, c, g.shape[1], g.shape[2], generator=gen, dtype=dtype)
    gg_dx = torch.randn(x.shape, generator=gen, dtype=dtype)
    gg_dgrid = torch.randn(g.shape, generator=gen, dtype=dtype)
    ours = _second_order(gst.grid_sample, x, g, go, gg_dx, gg_dgrid, mode, pad, align)
    theirs = _second_order(F.grid_sample, x, g, go, gg_dx, gg_dgrid, mode, pad, align)
    rel = 1e-10 if dtype == torch.float64 else 1e-4
    for name, a, b in zip(("d_grad", "d_input", "d_grid"), ours, theirs):
        scale = max(1.0, b.abs().max().item())
        err = (a - b).abs().max().item()
        assert err <= rel * scale, f"{name}: max error {err} (scale {scale})"


@pytest.mark.parametrize("mode", ["bilinear", "bicubic"])
@pytest.mark.parametrize("pad", PADS)
@pytest.mark.parametrize("align", [False, True])
def test_gradgradcheck(mode, pad, align):
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(1, 2, 5, 4, generator=gen, dtype=torch.float64, requires_grad=True)
    g = (torch.rand(1, 3, 3, 2, generator=gen, dtype=torch.float64) * 2.2 - 1.1).requires_grad_()

    def f(x, g):
        return gst.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=align)

    assert torch.autograd.gradgradcheck(f, (x, g), eps=1e-6, atol=1e-5, rtol=1e-4)


def test_numpy_function_matches_the_drop_in_and_masks():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 8, 9))
    g = rng.uniform(-1.1, 1.1, (2, 4, 5, 2))
    go = rng.standard_normal((2, 3, 4, 5))
    ex = rng.standard_normal(x.shape)
    eg = rng.standard_normal(g.shape)
    d_grad, d_input, d_grid = gridsampler.grid_sample_double_backward(
        ex, eg, go, x, g, "bicubic", "reflection", False)
    want = _second_order(gst.grid_sample, *(torch.from_numpy(a) for a in (x, g, go, ex, eg)),
                         "bicubic", "reflection", False)
    for a, b in zip((d_grad, d_input, d_grid), want):
        np.testing.assert_array_equal(a, b.numpy())
    # Masks and absent incoming gradients.
    only_grid = gridsampler.grid_sample_double_backward(
        ex, eg, go, x, g, "bicubic", "reflection", False, output_mask=(False, False, True))
    assert only_grid[0] is None and only_grid[1] is None
    np.testing.assert_array_equal(only_grid[2], d_grid)
    no_eg = gridsampler.grid_sample_double_backward(ex, None, go, x, g, "bilinear")
    zero_eg = gridsampler.grid_sample_double_backward(ex, np.zeros_like(eg), go, x, g, "bilinear")
    for a, b in zip(no_eg, zero_eg):
        np.testing.assert_allclose(a, b, atol=1e-14)
    assert not no_eg[1].any()  # without gg_dgrid, d_input is zero


@pytest.mark.parametrize("dtype,eps", [(torch.float16, 2.0 ** -11), (torch.bfloat16, 2.0 ** -8)])
def test_16_bit_against_float64_on_the_same_values(dtype, eps):
    gen = torch.Generator().manual_seed(5)
    ts = [torch.randn(2, 3, 7, 6, generator=gen), torch.rand(2, 4, 5, 2, generator=gen) * 2.2 - 1.1,
          torch.randn(2, 3, 4, 5, generator=gen), torch.randn(2, 3, 7, 6, generator=gen),
          torch.randn(2, 4, 5, 2, generator=gen)]
    low = [t.to(dtype) for t in ts]
    x, g, go, ex, eg = low
    got = gridsampler.grid_sample_double_backward(ex, eg, go, x, g, "bilinear", "border", True)
    x, g, go, ex, eg = (t.double() for t in low)
    want = gridsampler.grid_sample_double_backward(ex, eg, go, x, g, "bilinear", "border", True)
    for a, b in zip(got, want):
        assert a.dtype == dtype
        scale = max(1.0, b.abs().max().item())
        # float32 arithmetic, one rounding to the 16-bit type.
        assert (a.double() - b).abs().max().item() <= 2 * eps * scale


def test_layouts_and_thread_counts_give_the_same_bits():
    gen = torch.Generator().manual_seed(9)
    x = torch.randn(1, 5, 40, 44, generator=gen)
    g = torch.rand(1, 96, 96, 2, generator=gen) * 2.2 - 1.1
    go = torch.randn(1, 5, 96, 96, generator=gen)
    ex, eg = torch.randn(x.shape, generator=gen), torch.randn(g.shape, generator=gen)
    base = gridsampler.grid_sample_double_backward(ex, eg, go, x, g, "bicubic", "zeros", False,
                                                   num_threads=1)
    for threads in (2, 3):
        again = gridsampler.grid_sample_double_backward(ex, eg, go, x, g, "bicubic", "zeros", False,
                                                        num_threads=threads)
        for a, b in zip(again, base):
            assert torch.equal(a, b)
    cl = [t.contiguous(memory_format=torch.channels_last) for t in (ex, go, x)]
    again = gridsampler.grid_sample_double_backward(cl[0], eg, cl[1], cl[2], g, "bicubic", "zeros",
                                                    False, num_threads=1)
    for a, b in zip(again, base):
        assert torch.equal(a, b)


@pytest.mark.parametrize("mode", MODES)
def test_penalty_on_dx_alone_leaves_the_input_unused_like_pytorch(mode):
    """A loss on dx alone (R1): dx does not depend on the input, so the
    input gets no gradient (None, as PyTorch's formula gives, not a tensor of
    zeros), while the grid's matches PyTorch's."""
    gen = torch.Generator().manual_seed(3)
    x0 = torch.randn(2, 3, 8, 9, generator=gen, dtype=torch.float64)
    g0 = torch.rand(2, 5, 6, 2, generator=gen, dtype=torch.float64) * 2.2 - 1.1
    w = torch.randn(2, 3, 5, 6, generator=gen, dtype=torch.float64)
    results = []
    for sample in (gst.grid_sample, F.grid_sample):
        x, g = x0.clone().requires_grad_(), g0.clone().requires_grad_()
        out = sample(x, g, mode=mode, padding_mode="reflection", align_corners=False)
        (dx,) = torch.autograd.grad((out * w).sum(), x, create_graph=True)
        loss = (dx ** 2).sum()
        with pytest.raises(RuntimeError, match="not have been used in the graph"):
            torch.autograd.grad(loss, x, retain_graph=True)
        d_input, d_grid = torch.autograd.grad(loss, (x, g), allow_unused=True)
        assert d_input is None
        results.append(d_grid)
    ours, theirs = results
    assert ours is not None and theirs is not None
    assert torch.allclose(ours, theirs, rtol=0, atol=1e-10 * max(1.0, theirs.abs().max().item()))


def test_third_order_says_it_is_not_supported():
    x = torch.randn(1, 1, 4, 4, dtype=torch.float64, requires_grad=True)
    g = (torch.rand(1, 2, 2, 2, dtype=torch.float64) - 0.5).requires_grad_()
    out = gst.grid_sample(x, g, align_corners=False)
    (dgrid,) = torch.autograd.grad(out.sum(), g, create_graph=True)
    (ddx,) = torch.autograd.grad((dgrid ** 2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="third-order gradients of grid_sample are not supported"):
        ddx.sum().backward()


def test_double_backward_operator_compiles():
    """The second-order operator has a fake implementation: it traces into a
    full graph and gives the eager bits."""
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 9, 8, generator=gen)
    g = torch.rand(2, 5, 6, 2, generator=gen) * 2.2 - 1.1
    go = torch.randn(2, 3, 5, 6, generator=gen)
    ex, eg = torch.randn(x.shape, generator=gen), torch.randn(g.shape, generator=gen)

    def step(ex, eg, go, x, g):
        return torch.ops.gridsampler.grid_sampler_2d_double_backward(
            ex, eg, go, x, g, "bilinear", "reflection", True, [True, True, True])

    compiled = torch.compile(step, backend="aot_eager", fullgraph=True)
    for a, b in zip(compiled(ex, eg, go, x, g), step(ex, eg, go, x, g)):
        assert torch.equal(a, b)


def test_compiled_graphs_refuse_double_backward_as_pytorchs_do():
    """AOTAutograd does not differentiate a compiled backward again (PyTorch's
    limit, the same for a compiled F.grid_sample): a gradient penalty through
    a compiled sampler gets PyTorch's error, not a wrong number."""
    x = torch.randn(1, 2, 6, 6, requires_grad=True)
    g = (torch.rand(1, 4, 4, 2) * 2 - 1).requires_grad_()
    messages = []
    for sample in (F.grid_sample, gst.grid_sample):
        compiled = torch.compile(sample, backend="aot_eager")
        (dgrid,) = torch.autograd.grad(compiled(x, g, align_corners=False).sum(), g, create_graph=True)
        with pytest.raises(RuntimeError) as info:
            torch.autograd.grad((dgrid ** 2).sum(), x)
        messages.append(str(info.value))
    assert messages[0] == messages[1]
    assert "does not currently support double backward" in messages[0]


def test_eikonal_example_trains_like_pytorch():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "examples" / "second_order" / "eikonal_planes.py"
    spec = importlib.util.spec_from_file_location("eikonal_planes", path)
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    ours, planes_ours = example.train(gst.grid_sample, 4, 4, 16, 512)
    theirs, planes_theirs = example.train(F.grid_sample, 4, 4, 16, 512)
    assert ours[-1] < ours[0]
    np.testing.assert_allclose(ours, theirs, rtol=1e-5)
    assert (planes_ours - planes_theirs).abs().max().item() < 1e-5


def _path_of(out):
    """Which path made `out`: the direct autograd.Functions or the operators."""
    name = out.grad_fn.name()
    if name.startswith("_Sample"):
        return "direct"
    assert "gridsampler" in name, name
    return "operator"


@pytest.mark.parametrize("rank", [4, 5])
@pytest.mark.parametrize("mode,pad,align", [("bilinear", "reflection", False),
                                            ("bicubic", "zeros", True),
                                            ("nearest", "border", False)])
def test_direct_calls_and_operators_give_the_same_bits(monkeypatch, rank, mode, pad, align):
    """Eager calls on plain tensors skip torch.library's layer (direct
    autograd.Functions); the operators' path must give the same bits through
    the forward, the backward and the double backward (a loss on dx and dgrid,
    so every output of every level is used)."""
    if rank == 5 and mode == "bicubic":
        pytest.skip("PyTorch has no tricubic")
    gen = torch.Generator().manual_seed(11)
    spatial = (5, 6, 7)[3 - (rank - 2):]
    x0 = torch.randn(2, 3, *spatial, generator=gen, dtype=torch.float64)
    g0 = torch.rand(2, *spatial[::-1][:rank - 2], rank - 2, generator=gen, dtype=torch.float64) * 2.2 - 1.1
    results = {}
    for direct in (True, False):
        monkeypatch.setattr(gst, "_direct_calls", direct)
        x, g = x0.clone().requires_grad_(), g0.clone().requires_grad_()
        out = gst.grid_sample(x, g, mode=mode, padding_mode=pad, align_corners=align)
        dx, dgrid = torch.autograd.grad((out * out.detach()).sum(), (x, g), create_graph=True)
        assert _path_of(out) == ("direct" if direct else "operator")
        assert _path_of(dx if mode != "nearest" else dgrid) == _path_of(out)
        loss = (dx ** 2).sum() + (dgrid ** 2).sum()
        d = torch.autograd.grad(loss, (x, g), allow_unused=True)
        results[direct] = (out.detach(), dx.detach(), dgrid.detach(), *d)
    for a, b in zip(results[True], results[False]):
        assert (a is None) == (b is None)
        if a is not None:
            assert torch.equal(a, b)


@pytest.mark.parametrize("direct", [True, False])
def test_gradients_the_pass_does_not_use_are_not_computed(monkeypatch, direct):
    """An R1-style step: the loss's gradient with respect to the images only
    (autograd.grad(..., x)) while the grid comes from a warp whose parameters
    require grad. That pass uses no dgrid, and the engine says so: the first
    backward is asked for dx alone (as PyTorch's own formula is), the double
    backward of the penalty for what theta needs; the gradients equal
    PyTorch's. A plain .backward() still gets every gradient."""
    monkeypatch.setattr(gst, "_direct_calls", direct)
    masks = {"backward": [], "double": []}
    first, second = gst._backward_call, gst._double_backward_call

    def backward_call(*args):
        masks["backward"].append(list(args[-1]))
        return first(*args)

    def double_backward_call(*args):
        masks["double"].append(list(args[-1]))
        return second(*args)

    monkeypatch.setattr(gst, "_backward_call", backward_call)
    monkeypatch.setattr(gst, "_double_backward_call", double_backward_call)
    gen = torch.Generator().manual_seed(3)
    images = torch.randn(2, 3, 6, 7, generator=gen, dtype=torch.float64)
    w = torch.randn(2, 3, 5, 4, generator=gen, dtype=torch.float64)
    angle = torch.tensor([0.1, -0.2], dtype=torch.float64)
    theta0 = torch.stack([torch.stack([angle.cos(), -angle.sin(), 0.1 * angle], 1),
                          torch.stack([angle.sin(), angle.cos(), -0.1 * angle], 1)], 1)
    results = {}
    for name, sample in (("gs", gst.grid_sample), ("torch", F.grid_sample)):
        theta = theta0.clone().requires_grad_()
        x = images.clone().requires_grad_()
        grid = F.affine_grid(theta, (2, 3, 5, 4), align_corners=False)
        out = sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
        (dx,) = torch.autograd.grad((out * w).sum(), x, create_graph=True)
        (dx ** 2).sum().backward()
        results[name] = (dx.detach(), theta.grad)
    for a, b in zip(results["gs"], results["torch"]):
        assert torch.allclose(a, b, rtol=1e-10, atol=1e-12)
    assert masks["backward"] == [[True, False]]
    # d_grad: the grad (w) requires none; d_input: dx does not depend on the
    # input; d_grid for theta.
    assert masks["double"] == [[False, False, True]]
    masks["backward"].clear()
    x = images.clone().requires_grad_()
    theta = theta0.clone().requires_grad_()
    grid = F.affine_grid(theta, (2, 3, 5, 4), align_corners=False)
    (gst.grid_sample(x, grid, padding_mode="reflection", align_corners=False) * w).sum().backward()
    assert masks["backward"] == [[True, True]]
    assert x.grad is not None and theta.grad is not None


def test_dispatch_modes_and_tracing_see_the_operators():
    """What must see one operator per call gets the operators: a dispatch mode
    (also when it is active only in the backward), a function mode and
    torch.jit.trace."""
    Log, Functions = op_logs()

    gen = torch.Generator().manual_seed(5)
    x = torch.randn(1, 2, 5, 6, generator=gen, dtype=torch.float64, requires_grad=True)
    g = (torch.rand(1, 3, 4, 2, generator=gen, dtype=torch.float64) * 2 - 1).requires_grad_()
    with Log() as log:
        out = gst.grid_sample(x, g, align_corners=False)
    assert "gridsampler.grid_sampler_2d.default" in log.ops
    with Functions() as log:
        gst.grid_sample(x, g, align_corners=False)
    assert "gridsampler.grid_sampler_2d.default" in log.ops
    out = gst.grid_sample(x, g, align_corners=False)
    assert _path_of(out) == "direct"
    assert _path_of(gst.grid_sample(torch.nn.Parameter(x.detach()), g, align_corners=False)) == "direct"
    with Log() as log:
        (dgrid,) = torch.autograd.grad(out.sum(), g, create_graph=True)
    assert "gridsampler.grid_sampler_2d_backward.default" in log.ops
    with Log() as log:
        torch.autograd.grad((dgrid ** 2).sum(), x)
    assert "gridsampler.grid_sampler_2d_double_backward.default" in log.ops

    # A trace records the operator (a direct call would be a Python
    # function that cannot be saved): saved, loaded and run on other values,
    # it computes them.
    traced = torch.jit.trace(lambda a, b: gst.grid_sample(a, b, align_corners=False),
                             (x.detach(), g.detach()), check_trace=False)
    saved = io.BytesIO()
    torch.jit.save(traced, saved)
    saved.seek(0)
    traced = torch.jit.load(saved)
    x2, g2 = torch.randn_like(x), torch.rand_like(g) * 2 - 1
    assert torch.allclose(traced(x2, g2), F.grid_sample(x2, g2, align_corners=False),
                          rtol=0, atol=1e-12)

