"""Hostile calls of gridsampler.torch.grid_sample, with tensors that require grad."""

import numpy as np

import gridsampler
from hostile_support import case, close, need_torch, problem, raises, special_grid

X, G, _ = problem()


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


def same_as_pytorch(fn, *args, **kwargs):
    """The drop-in hands every call it does not take to F.grid_sample: it
    raises exactly what F.grid_sample raises for the same arguments."""
    import torch.nn.functional as F

    def outcome(f):
        try:
            f(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 (what came back is the point)
            return type(e), str(e)
        return None

    theirs = outcome(F.grid_sample)
    assert theirs is not None, "F.grid_sample accepted the call"
    assert outcome(fn) == theirs


@case("torch_wrong_types")
def _():
    torch, gt = _gt()
    g = torch.zeros(2, 4, 6, 2, requires_grad=True)
    same_as_pytorch(gt.grid_sample, None, g,
           align_corners=False)
    same_as_pytorch(gt.grid_sample, X, g,
           align_corners=False)
    same_as_pytorch(gt.grid_sample,
           torch.zeros(2, 3, 5, 7, requires_grad=True), G.tolist(), align_corners=False)


@case("torch_ranks_and_shapes")
def _():
    torch, gt = _gt()
    x = torch.zeros(2, 3, 5, 7, requires_grad=True)
    g = torch.zeros(2, 4, 6, 2, requires_grad=True)
    same_as_pytorch(gt.grid_sample, x[..., None], g,
           align_corners=False)
    same_as_pytorch(gt.grid_sample, x, g[0],
           align_corners=False)
    same_as_pytorch(gt.grid_sample, x,
           torch.zeros(2, 4, 6, 3, requires_grad=True), align_corners=False)
    same_as_pytorch(gt.grid_sample, x, g[:1],
           align_corners=False)
    same_as_pytorch(gt.grid_sample, x, g, "area",
           align_corners=False)


@case("torch_dtypes")
def _():
    torch, gt = _gt()
    x = torch.zeros(2, 3, 5, 7, requires_grad=True)
    g = torch.zeros(2, 4, 6, 2, requires_grad=True)
    same_as_pytorch(gt.grid_sample, x,
           g.double().detach().requires_grad_(), align_corners=False)
    for dt, name in ((torch.complex64, "complex64"), (torch.int32, "int32"), (torch.bool, "bool")):
        xd, gd = x.detach().to(dt), g.detach().to(dt)
        if dt.is_complex:
            xd.requires_grad_()
        same_as_pytorch(gt.grid_sample, xd, gd,
               align_corners=False)


@case("torch_values_low_precision")
def _():
    torch, _ = _gt()
    for dtype in (torch.float16, torch.bfloat16):
        x, g, _w = problem(np.float64, seed=10)
        check_torch_call(_leaf(torch, x, dtype), _leaf(torch, g, dtype), "bicubic", "reflection",
                         True)


@case("torch_expanded_leaves")
def _():
    torch, _ = _gt()
    x0 = _leaf(torch, problem(np.float64, seed=11)[0][:1, :, :1])  # (1, 3, 1, 7)
    g0 = _leaf(torch, problem(np.float64, seed=12)[1][:1])          # (1, 4, 6, 2)
    check_torch_call(x0.expand(2, 3, 5, 7), g0.expand(2, 4, 6, 2), "bilinear", "border", False,
                     leaves=(x0, g0))


@case("torch_huge_virtual_image")
def _():
    torch, gt = _gt()
    x = torch.full((1, 1, 1, 1), 3.0).expand(1, 2, 2**30, 2**30)  # no grad: dx would be 2^61 values
    g = torch.tensor([[[[0.25, -0.5], [-0.75, 0.5]]]], requires_grad=True)
    out = gt.grid_sample(x, g, "nearest", "zeros", True)
    assert torch.equal(out, torch.full((1, 2, 1, 2), 3.0))
    out.sum().backward()
    assert torch.equal(g.grad, torch.zeros_like(g))


@case("torch_non_finite_grid")
def _():
    torch, gt = _gt()
    x = torch.randn(1, 3, 4, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(13),
                    requires_grad=True)
    g = torch.from_numpy(special_grid(np.float64)).requires_grad_()
    for mode in ("bilinear", "bicubic"):
        for padding in ("zeros", "border", "reflection"):
            x.grad = g.grad = None
            out = gt.grid_sample(x, g, mode, padding, align_corners=False)
            out.sum().backward()
            assert torch.isfinite(out).all() and torch.isfinite(x.grad).all(), (mode, padding)
            assert not g.grad[~torch.isfinite(g)].any(), (mode, padding)


@case("torch_set_num_threads_huge")
def _():
    torch, _ = _gt()
    saved = torch.get_num_threads()
    torch.set_num_threads(4 * gridsampler.max_threads())  # capped, as OMP_NUM_THREADS is
    try:
        x, g, _w = problem(np.float64, seed=14)
        check_torch_call(_leaf(torch, x), _leaf(torch, g), "bilinear", "zeros", False)
    finally:
        torch.set_num_threads(saved)


@case("torch_empty_batch_requires_grad")
def _():
    torch, gt = _gt()
    x = torch.zeros(0, 3, 5, 7, requires_grad=True)
    g = torch.zeros(0, 4, 6, 2, requires_grad=True)
    out = gt.grid_sample(x, g, align_corners=False)
    assert out.shape == (0, 3, 4, 6)
    out.sum().backward()
    assert x.grad.shape == x.shape and g.grad.shape == g.shape
