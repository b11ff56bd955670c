"""Real clients, unchanged: kornia's warp_affine / warp_perspective and MONAI's
Warp (2-D) with the switch on and off give the same values and gradients, and
the switch was taken.

kornia and MONAI are installed by scripts/ci-python.sh (pinned, --no-deps);
elsewhere the tests are skipped when they are missing, unless
GRIDSAMPLER_REQUIRE_TORCH=1 (CI), where a missing client is an error.
"""

import importlib
import os

import pytest

from conftest import MODES, PADDINGS

TOL = {"float64": 1e-10, "float32": 1e-5}  # of the largest magnitude of the reference


def client(name):
    if os.environ.get("GRIDSAMPLER_REQUIRE_TORCH") == "1":
        return importlib.import_module(name)
    return pytest.importorskip(name)


def close(torch, ours, ref, dtype_name, what):
    assert ours.shape == ref.shape and ours.dtype == ref.dtype, what
    scale = float(ref.abs().max()) if ref.numel() else 0.0
    err = float((ours - ref).abs().max()) if ref.numel() else 0.0
    assert err <= TOL[dtype_name] * max(scale, 1e-300), \
        f"{what}: max difference {err:.3g} > {TOL[dtype_name]:.0e} * {scale:.3g}"


class SamplerLog:
    """Records what aten::grid_sampler_2d and its backward return (the
    input and grid gradients themselves, whatever the client does around them)."""

    def __init__(self, torch):
        from torch.utils._python_dispatch import TorchDispatchMode

        log = self

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                if func is torch.ops.aten.grid_sampler_2d.default:
                    log.forward.append(out.clone())
                elif func is torch.ops.aten.grid_sampler_2d_backward.default:
                    log.dx.append(None if out[0] is None else out[0].clone())
                    log.dgrid.append(out[1].clone())
                return out

        self.mode = Mode()
        self.forward, self.dx, self.dgrid = [], [], []


def run_both(torch, gt, fn, leaves, dtype_name):
    """fn(*leaves) -> output; runs it off and on, compares the output, the
    gradients of the leaves and what the sampler operators returned."""
    gen = torch.Generator().manual_seed(40)
    results = {}
    for on in (False, True):
        xs = [t.detach().clone().requires_grad_() for t in leaves]
        log = SamplerLog(torch)
        with gt.switch(on), log.mode:
            gt.switch_stats(reset=True)
            out = fn(*xs)
            w = torch.randn(out.shape, generator=gen.manual_seed(41), dtype=out.dtype)
            grads = torch.autograd.grad(out, xs, w)
            stats = gt.switch_stats()
        results[on] = (out.detach(), grads, log, stats)
    (out0, grads0, log0, _), (out1, grads1, log1, stats1) = results[False], results[True]
    # The switch computed every grid_sample of the client, forward and backward.
    assert stats1["grid_sampler_2d"] == len(log1.forward) >= 1
    assert stats1["grid_sampler_2d_backward"] == len(log1.dgrid) >= 1
    assert stats1["handed_on"] == 0
    close(torch, out1, out0, dtype_name, "output")
    for i, (a, b) in enumerate(zip(grads1, grads0)):
        close(torch, a, b, dtype_name, f"gradient of argument {i}")
    for a, b in zip(log1.dgrid, log0.dgrid):
        close(torch, a, b, dtype_name, "grid gradient")
    for a, b in zip(log1.dx, log0.dx):
        close(torch, a, b, dtype_name, "input gradient")


def image(torch, dtype, shape, seed):
    gen = torch.Generator().manual_seed(seed)
    return torch.rand(shape, generator=gen, dtype=torch.float64).to(dtype)


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", MODES)
def test_kornia_warp_affine(torch, gt, mode, padding, dtype_name):
    transform = client("kornia.geometry.transform")
    dtype = getattr(torch, dtype_name)
    src = image(torch, dtype, (2, 3, 13, 17), seed=42)
    # A rotation by ~20 degrees with scale and shift, per batch entry.
    m = torch.tensor([[[0.94, -0.34, 2.5], [0.34, 0.94, -1.5]],
                      [[1.1, 0.2, -3.0], [-0.15, 0.9, 1.0]]], dtype=dtype)
    run_both(torch, gt, lambda s, m: transform.warp_affine(
        s, m, (11, 19), mode=mode, padding_mode=padding, align_corners=(padding != "border")),
        (src, m), dtype_name)


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
@pytest.mark.parametrize("mode", MODES)
def test_kornia_warp_perspective(torch, gt, mode, dtype_name):
    transform = client("kornia.geometry.transform")
    dtype = getattr(torch, dtype_name)
    src = image(torch, dtype, (2, 2, 16, 12), seed=43)
    m = torch.tensor([[[1.0, 0.1, 1.0], [-0.05, 0.95, 2.0], [0.002, 0.001, 1.0]],
                      [[0.9, -0.2, 3.0], [0.1, 1.05, -1.0], [-0.003, 0.002, 1.0]]], dtype=dtype)
    run_both(torch, gt, lambda s, m: transform.warp_perspective(
        s, m, (14, 10), mode=mode, padding_mode="reflection", align_corners=True),
        (src, m), dtype_name)


@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
@pytest.mark.parametrize("padding", PADDINGS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.filterwarnings("ignore:monai.networks.blocks.Warp. Using PyTorch native grid_sample")
def test_monai_warp_2d(torch, gt, mode, padding, dtype_name):
    blocks = client("monai.networks.blocks")
    dtype = getattr(torch, dtype_name)
    img = image(torch, dtype, (2, 3, 15, 14), seed=44)
    ddf = (image(torch, dtype, (2, 2, 15, 14), seed=45) - 0.5) * 6  # displacements in pixels
    warp = blocks.Warp(mode=mode, padding_mode=padding)
    run_both(torch, gt, warp, (img, ddf), dtype_name)
