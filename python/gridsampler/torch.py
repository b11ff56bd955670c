"""PyTorch drop-in: ``gridsampler.torch.grid_sample`` for ``torch.nn.functional.grid_sample``.

Same signature and results as ``F.grid_sample`` on 4-D CPU tensors,
differentiable with respect to ``input`` and ``grid`` through gridsampler's
GridSampler2DGrad (only the gradients that are needed are computed). The
computation is registered as two ``torch.library`` custom operators with fake
(meta) implementations, so the function works under ``torch.compile`` and in
``torch.export``-ed graphs, where it appears as
``torch.ops.gridsampler.grid_sampler_2d``:

    gridsampler::grid_sampler_2d(Tensor input, Tensor grid, str mode,
                                 str padding_mode, bool align_corners) -> Tensor
    gridsampler::grid_sampler_2d_backward(Tensor grad, Tensor input, Tensor grid,
                                          str mode, str padding_mode, bool align_corners,
                                          bool[] output_mask) -> (Tensor, Tensor)

The backward operator returns an empty tensor (shape (0,)) for an output its
``output_mask`` leaves out. The operators use ``torch.get_num_threads()``
threads, capped at ``gridsampler.max_threads()`` (results do not depend on
the count). Needs torch >= 2.4.
"""

from __future__ import annotations

import warnings
from typing import Optional, Sequence, Tuple

import torch
from torch import Tensor

from . import _check_options
from . import _gridsampler as _C
# The library's memory kept between calls (the same for NumPy and torch calls).
from . import cached_memory_bytes, release_cached_memory

__all__ = ["grid_sample", "release_cached_memory", "cached_memory_bytes"]

if not hasattr(torch.library, "custom_op") or not hasattr(torch.library, "register_fake"):
    raise ImportError(
        "gridsampler.torch needs torch >= 2.4 (torch.library.custom_op); found torch "
        + torch.__version__)


def _threads() -> int:
    # torch's setting, like OMP_NUM_THREADS, is the environment's: capped at
    # the library's bound rather than refused.
    return min(torch.get_num_threads(), _C.max_threads())


def _check_tensors(input: Tensor, grid: Tensor) -> None:
    for name, t in (("input", input), ("grid", grid)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    if input.dim() != 4:
        raise ValueError(f"input: expected 4 dimensions, got {input.dim()}"
                         + (" (5-D, volumetric sampling, is not supported)"
                            if input.dim() == 5 else ""))
    if grid.dim() != 4:
        raise ValueError(f"grid: expected 4 dimensions, got {grid.dim()}")
    for name, t in (("input", input), ("grid", grid)):
        if t.device.type not in ("cpu", "meta"):
            raise ValueError(f"{name}: gridsampler runs on the CPU, got a tensor on {t.device}")


def _out_shape(input: Tensor, grid: Tensor) -> Tuple[int, int, int, int]:
    return (input.shape[0], input.shape[1], grid.shape[1], grid.shape[2])


@torch.library.custom_op("gridsampler::grid_sampler_2d", mutates_args=(), device_types="cpu")
def grid_sampler_2d(input: Tensor, grid: Tensor, mode: str, padding_mode: str,
                    align_corners: bool) -> Tensor:
    _check_tensors(input, grid)
    out = torch.empty(_out_shape(input, grid), dtype=input.dtype, device=input.device)
    _C.forward(input.detach(), grid.detach(), out, mode, padding_mode, align_corners,
               num_threads=_threads())
    return out


@grid_sampler_2d.register_fake
def _(input: Tensor, grid: Tensor, mode: str, padding_mode: str,
      align_corners: bool) -> Tensor:
    _check_options(mode, padding_mode)
    _check_tensors(input, grid)
    return input.new_empty(_out_shape(input, grid))


@torch.library.custom_op("gridsampler::grid_sampler_2d_backward", mutates_args=(),
                         device_types="cpu")
def grid_sampler_2d_backward(grad: Tensor, input: Tensor, grid: Tensor, mode: str,
                             padding_mode: str, align_corners: bool,
                             output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor]:
    _check_tensors(input, grid)
    want_dx, want_dgrid = (bool(m) for m in output_mask)
    dx = torch.empty(input.shape if want_dx else (0,), dtype=input.dtype, device=input.device)
    dgrid = torch.empty(grid.shape if want_dgrid else (0,), dtype=input.dtype,
                        device=input.device)
    _C.backward(grad.detach(), input.detach(), grid.detach(), dx if want_dx else None,
                dgrid if want_dgrid else None, mode, padding_mode, align_corners,
                num_threads=_threads())
    return dx, dgrid


@grid_sampler_2d_backward.register_fake
def _(grad: Tensor, input: Tensor, grid: Tensor, mode: str, padding_mode: str,
      align_corners: bool, output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor]:
    _check_options(mode, padding_mode)
    _check_tensors(input, grid)
    want_dx, want_dgrid = (bool(m) for m in output_mask)
    return (input.new_empty(input.shape if want_dx else (0,)),
            input.new_empty(grid.shape if want_dgrid else (0,)))


def _setup_context(ctx, inputs, output) -> None:
    input, grid, mode, padding_mode, align_corners = inputs
    ctx.save_for_backward(input, grid)
    ctx.options = (mode, padding_mode, align_corners)


def _backward(ctx, grad: Tensor):
    input, grid = ctx.saved_tensors
    want_dx, want_dgrid = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    dx: Optional[Tensor] = None
    dgrid: Optional[Tensor] = None
    if want_dx or want_dgrid:
        dx, dgrid = grid_sampler_2d_backward(grad, input, grid, *ctx.options,
                                             [want_dx, want_dgrid])
    return (dx if want_dx else None, dgrid if want_dgrid else None, None, None, None)


grid_sampler_2d.register_autograd(_backward, setup_context=_setup_context)


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: Optional[bool] = None) -> Tensor:
    """Drop-in for ``torch.nn.functional.grid_sample`` on 4-D CPU tensors.

    ``input`` (N, C, Hin, Win), ``grid`` (N, Hout, Wout, 2) of (x, y) in [-1, 1],
    both float16, bfloat16, float32 or float64 of one dtype, any strides.
    Returns (N, C, Hout, Wout). ``align_corners=None`` means False, with the
    same warning as PyTorch's.
    """
    _check_options(mode, padding_mode)
    if align_corners is None:
        warnings.warn(
            "Default grid_sample and affine_grid behavior has changed to align_corners=False "
            "since 1.3.0. Please specify align_corners=True if the old behavior is desired. "
            "See the documentation of grid_sample for details.")
        align_corners = False
    _check_tensors(input, grid)
    return grid_sampler_2d(input, grid, mode, padding_mode, bool(align_corners))

