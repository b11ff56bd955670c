"""PyTorch drop-in: ``gridsampler.torch.grid_sample`` for ``torch.nn.functional.grid_sample``.

Same signature and results as ``F.grid_sample`` on 4-D and 5-D (volume) CPU
tensors, differentiable with respect to ``input`` and ``grid`` through
gridsampler's GridSampler2DGrad and GridSampler3DGrad (only the gradients that
are needed are computed). The
computation is registered as ``torch.library`` custom operators with fake
(meta) implementations, so the function works under ``torch.compile`` and in
``torch.export``-ed graphs, where it appears as
``torch.ops.gridsampler.grid_sampler_2d`` (``grid_sampler_3d`` for volumes):

    gridsampler::grid_sampler_2d(Tensor input, Tensor grid, str mode,
                                 str padding_mode, bool align_corners) -> Tensor
    gridsampler::grid_sampler_2d_backward(Tensor grad, Tensor input, Tensor grid,
                                          str mode, str padding_mode, bool align_corners,
                                          bool[] output_mask) -> (Tensor, Tensor)

    gridsampler::grid_sampler_2d_double_backward(Tensor? gg_dx, Tensor? gg_dgrid,
                                                 Tensor grad, Tensor input, Tensor grid,
                                                 str mode, str padding_mode, bool align_corners,
                                                 bool[] output_mask) -> (Tensor, Tensor, Tensor)

    gridsampler::grid_sampler_3d(Tensor input, Tensor grid, str mode,
                                 str padding_mode, bool align_corners) -> Tensor
    gridsampler::grid_sampler_3d_backward(Tensor grad, Tensor input, Tensor grid,
                                          str mode, str padding_mode, bool align_corners,
                                          bool[] output_mask) -> (Tensor, Tensor)
    gridsampler::grid_sampler_3d_double_backward(...)  (as the 2-D one, on volumes)

Eager calls on plain tensors skip torch.library's Python layer (they run as
autograd Functions around the same extension calls, with the same results);
under torch.compile, torch.export, torch.jit.trace, fake tensors and dispatch
or function modes every call is one of these operators.

The backward operators return an empty tensor (shape (0,)) for an output their
``output_mask`` leaves out. The backward operators' autograd formula is
gridsampler's native double backward (images and volumes), so
``create_graph=True`` gradients can be differentiated again (gradient
penalties); a third order raises a RuntimeError saying it is not supported.
Under the switch, second order on volumes is PyTorch's own formula, whose
first-order calls run on gridsampler. The
operators use ``torch.get_num_threads()``
threads, capped at ``gridsampler.max_threads()`` (results do not depend on
the count). Needs torch >= 2.4.

``grid_sample`` hands every call the operators do not take to
``F.grid_sample`` itself: tensors on another device (CUDA, MPS, meta),
and every call PyTorch rejects, which so raises PyTorch's own exception and
message. Under ``torch.autocast("cpu")`` it casts as PyTorch's autocast casts
``grid_sample`` (to float32; float64 stays), so results have F.grid_sample's
dtype.

The switch, for code that calls ``F.grid_sample`` and cannot be edited:
``enable()``, ``disable()``, ``is_enabled()``, ``switch()`` (a context manager)
and ``switch_stats()``, in gridsampler._switch; ``GRIDSAMPLER_TORCH=1`` turns it
on at ``import torch``.
"""

from __future__ import annotations

import warnings
from typing import Optional, Sequence, Tuple

import torch
import torch.nn.functional as F
from torch import Tensor

from . import MODES, PADDING_MODES, _check_options
from . import _gridsampler as _C
from . import _switch
# The library's memory kept between calls (the same for NumPy and torch calls).
from . import cached_memory_bytes, cached_memory_limit, release_cached_memory, set_cached_memory_limit
from ._switch import disable, enable, is_enabled, switch, switch_stats

__all__ = ["grid_sample", "release_cached_memory", "cached_memory_bytes", "set_cached_memory_limit",
           "cached_memory_limit", "enable", "disable", "is_enabled", "switch", "switch_stats"]

if not hasattr(torch.library, "custom_op") or not hasattr(torch.library, "register_fake"):
    raise ImportError(
        "gridsampler.torch needs torch >= 2.4 (torch.library.custom_op); found torch "
        + torch.__version__)


def _threads() -> int:
    # torch's setting, like OMP_NUM_THREADS, is the environment's: capped at
    # the library's bound rather than refused.
    return min(torch.get_num_threads(), _C.max_threads())


def _check_tensors(input: Tensor, grid: Tensor, rank: int = 4) -> None:
    """Both tensors of rank `rank` (4: the 2-D operators, 5: the 3-D ones) on the CPU."""
    for name, t in (("input", input), ("grid", grid)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name}: expected a torch.Tensor, got {type(t).__name__}")
    for name, t in (("input", input), ("grid", grid)):
        if t.dim() != rank:
            raise ValueError(f"{name}: expected {rank} dimensions, got {t.dim()}")
    for name, t in (("input", input), ("grid", grid)):
        if t.device.type not in ("cpu", "meta"):
            raise ValueError(f"{name}: gridsampler runs on the CPU, got a tensor on {t.device}")


def _out_shape(input: Tensor, grid: Tensor) -> Tuple[int, ...]:
    """(N, C, *grid's spatial sizes): (N, C, Hout, Wout) or (N, C, Dout, Hout, Wout)."""
    return (input.shape[0], input.shape[1], *grid.shape[1:-1])


# A tensor handed to the extension as a DLPack capsule made by torch's C
# function: Tensor.__dlpack__, which the extension would otherwise call, is
# Python code that costs ~2 us per tensor, most of a small call's overhead
# (a backward passes five tensors). The capsule holds a reference to the
# tensor until the extension is done with it.
_to_dlpack = getattr(torch._C, "_to_dlpack", None)


def _handoff(t: Tensor):
    """`t` (detached, CPU) as the extension takes it: a DLPack capsule where
    torch has the C function, else the tensor itself."""
    return _to_dlpack(t) if _to_dlpack is not None else t


def _readable(t: Tensor):
    """`t` as the extension can read it: detached (DLPack refuses a tensor that
    requires grad), and copied if its data is off its element alignment, which
    the library refuses and PyTorch allows (``grid_sample`` takes such tensors,
    so the drop-in must too)."""
    if t.requires_grad:
        t = t.detach()
    return _handoff(t if _switch.aligned(t) else t.clone())


# The operators' bodies, for images (rank 4) and volumes (rank 5). The
# operators check their tensors first (a user may call them with anything);
# the direct calls below come from grid_sample, which has checked already.

def _run_forward(rank: int, input: Tensor, grid: Tensor, mode: str, padding_mode: str,
                 align_corners: bool) -> Tensor:
    out = torch.empty(_out_shape(input, grid), dtype=input.dtype, device=input.device)
    fn = _C.forward if rank == 4 else _C.forward_3d
    fn(_readable(input), _readable(grid), _handoff(out), mode, padding_mode, align_corners,
       num_threads=_threads())
    return out


def _forward(rank: int, input: Tensor, grid: Tensor, mode: str, padding_mode: str,
             align_corners: bool) -> Tensor:
    _check_tensors(input, grid, rank)
    return _run_forward(rank, input, grid, mode, padding_mode, align_corners)


def _forward_fake(rank: int, input: Tensor, grid: Tensor, mode: str,
                  padding_mode: str) -> Tensor:
    _check_options(mode, padding_mode)
    _check_tensors(input, grid, rank)
    return input.new_empty(_out_shape(input, grid))


def _backward_impl(rank: int, grad: Tensor, input: Tensor, grid: Tensor, mode: str,
                   padding_mode: str, align_corners: bool,
                   output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor]:
    _check_tensors(input, grid, rank)
    return _run_backward(rank, grad, input, grid, mode, padding_mode, align_corners,
                         output_mask)


def _run_backward(rank: int, grad: Tensor, input: Tensor, grid: Tensor, mode: str,
                  padding_mode: str, align_corners: bool,
                  output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor]:
    want_dx, want_dgrid = (bool(m) for m in output_mask)
    dx = torch.empty(input.shape if want_dx else (0,), dtype=input.dtype, device=input.device)
    dgrid = torch.empty(grid.shape if want_dgrid else (0,), dtype=input.dtype,
                        device=input.device)
    fn = _C.backward if rank == 4 else _C.backward_3d
    fn(_readable(grad), _readable(input), _readable(grid), _handoff(dx) if want_dx else None,
       _handoff(dgrid) if want_dgrid else None, mode, padding_mode, align_corners,
       num_threads=_threads())
    return dx, dgrid


def _backward_fake(rank: int, input: Tensor, grid: Tensor, mode: str, padding_mode: str,
                   output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor]:
    _check_options(mode, padding_mode)
    _check_tensors(input, grid, rank)
    want_dx, want_dgrid = (bool(m) for m in output_mask)
    return (input.new_empty(input.shape if want_dx else (0,)),
            input.new_empty(grid.shape if want_dgrid else (0,)))


@torch.library.custom_op("gridsampler::grid_sampler_2d", mutates_args=(), device_types="cpu")
def grid_sampler_2d(input: Tensor, grid: Tensor, mode: str, padding_mode: str,
                    align_corners: bool) -> Tensor:
    return _forward(4, input, grid, mode, padding_mode, align_corners)


@grid_sampler_2d.register_fake
def _(input: Tensor, grid: Tensor, mode: str, padding_mode: str,
      align_corners: bool) -> Tensor:
    return _forward_fake(4, input, grid, mode, padding_mode)


@torch.library.custom_op("gridsampler::grid_sampler_2d_backward", mutates_args=(),
                         device_types="cpu")
def grid_sampler_2d_backward(grad: Tensor, input: Tensor, grid: Tensor, mode: str,
                             padding_mode: str, align_corners: bool,
                             output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor]:
    return _backward_impl(4, grad, input, grid, mode, padding_mode, align_corners, output_mask)


@grid_sampler_2d_backward.register_fake
def _(grad: Tensor, input: Tensor, grid: Tensor, mode: str, padding_mode: str,
      align_corners: bool, output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor]:
    return _backward_fake(4, input, grid, mode, padding_mode, output_mask)


def _double_backward_impl(rank: int, gg_dx: Optional[Tensor], gg_dgrid: Optional[Tensor],
                          grad: Tensor, input: Tensor, grid: Tensor, mode: str,
                          padding_mode: str, align_corners: bool,
                          output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor, Tensor]:
    _check_tensors(input, grid, rank)
    want = [bool(m) for m in output_mask]
    outs = [torch.empty(shape if w else (0,), dtype=input.dtype, device=input.device)
            for shape, w in zip((grad.shape, input.shape, grid.shape), want)]
    fn = _C.double_backward if rank == 4 else _C.double_backward_3d
    fn(None if gg_dx is None else _readable(gg_dx),
       None if gg_dgrid is None else _readable(gg_dgrid),
       _readable(grad), _readable(input), _readable(grid),
       *(_handoff(o) if w else None for o, w in zip(outs, want)),
       mode, padding_mode, align_corners, num_threads=_threads())
    return outs[0], outs[1], outs[2]


def _double_backward_fake(rank: int, input: Tensor, grid: Tensor, grad: Tensor, mode: str,
                          padding_mode: str,
                          output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor, Tensor]:
    _check_options(mode, padding_mode)
    _check_tensors(input, grid, rank)
    want = [bool(m) for m in output_mask]
    return tuple(input.new_empty(shape if w else (0,))  # type: ignore[return-value]
                 for shape, w in zip((grad.shape, input.shape, grid.shape), want))


@torch.library.custom_op("gridsampler::grid_sampler_2d_double_backward", mutates_args=(),
                         device_types="cpu")
def grid_sampler_2d_double_backward(gg_dx: Optional[Tensor], gg_dgrid: Optional[Tensor],
                                    grad: Tensor, input: Tensor, grid: Tensor, mode: str,
                                    padding_mode: str, align_corners: bool,
                                    output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor, Tensor]:
    return _double_backward_impl(4, gg_dx, gg_dgrid, grad, input, grid, mode, padding_mode,
                                 align_corners, output_mask)


@grid_sampler_2d_double_backward.register_fake
def _(gg_dx: Optional[Tensor], gg_dgrid: Optional[Tensor], grad: Tensor, input: Tensor,
      grid: Tensor, mode: str, padding_mode: str, align_corners: bool,
      output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor, Tensor]:
    return _double_backward_fake(4, input, grid, grad, mode, padding_mode, output_mask)


def _backward_setup_context(ctx, inputs, output) -> None:
    grad, input, grid, mode, padding_mode, align_corners, output_mask = inputs
    ctx.save_for_backward(grad, input, grid)
    ctx.options = (mode, padding_mode, align_corners)
    ctx.output_mask = [bool(m) for m in output_mask]
    # An output of the backward that the loss does not use then arrives as
    # None, not as zeros: the double backward skips its terms (and, with no
    # gg_dgrid, runs as a forward and a backward).
    ctx.set_materialize_grads(False)


def _incoming(gg: Optional[Tensor], wanted: bool) -> Optional[Tensor]:
    """An incoming gradient the double backward needs: None for an output the
    first order did not compute (shape (0,)) or that nothing used."""
    return gg if wanted and gg is not None and gg.numel() > 0 else None


def _second_order(ctx, gg_dx: Optional[Tensor], gg_dgrid: Optional[Tensor]):
    """The autograd formula of a backward (operator or direct call): the native
    double backward, asked only for the gradients that are needed."""
    grad, input, grid = ctx.saved_tensors
    gg_dx = _incoming(gg_dx, ctx.output_mask[0])
    gg_dgrid = _incoming(gg_dgrid, ctx.output_mask[1])
    want = _switch.second_order_wanted(_engine_needs(ctx, ctx.needs_input_grad[:3]), gg_dgrid)
    results: list = [None, None, None]
    if any(want):
        results = list(_double_backward_call(input.dim(), gg_dx, gg_dgrid, grad, input, grid,
                                             *ctx.options, want))
    return tuple(r if w else None for r, w in zip(results, want))


def _op_formula(formula, arguments: int):
    """An operator's autograd formula from a direct call's: None for the
    operator's trailing non-tensor arguments as well."""

    def backward(ctx, *grads):
        results = formula(ctx, *grads)
        return (*results, *([None] * (arguments - len(results))))

    return backward


grid_sampler_2d_backward.register_autograd(_op_formula(_second_order, 7),
                                           setup_context=_backward_setup_context)


def _third_order(ctx, *grads):
    raise RuntimeError(
        "gridsampler: third-order gradients of grid_sample are not supported (the double "
        "backward, gridsampler::grid_sampler_2d_double_backward or "
        "gridsampler::grid_sampler_3d_double_backward, is not differentiable)")


def _no_setup(ctx, inputs, output) -> None:
    pass


grid_sampler_2d_double_backward.register_autograd(_third_order, setup_context=_no_setup)


def _setup_context(ctx, inputs, output) -> None:
    input, grid, mode, padding_mode, align_corners = inputs
    ctx.save_for_backward(input, grid)
    ctx.options = (mode, padding_mode, align_corners)


_will_engine_execute_node = getattr(torch._C, "_will_engine_execute_node", None)


def _engine_needs(ctx, needed: Sequence[bool]) -> list:
    """``needed`` (the formula's ``needs_input_grad`` for its leading tensor
    inputs) less the inputs whose gradient the running backward pass does not
    use: ``torch.autograd.grad(loss, x)`` on a graph where the grid requires
    grad as well (an R1 penalty through a learned warp) needs no dgrid, and
    PyTorch's own formulas skip it too (they ask the engine through
    task_should_compute_output). The engine can answer for an input with a
    grad_fn, not for a leaf under ``autograd.grad``: that, or any failure to
    ask, counts as needed."""
    want = [bool(w) for w in needed]
    nodes = getattr(ctx, "next_functions", None)
    if _will_engine_execute_node is None or nodes is None or len(nodes) < len(want):
        return want
    for i, w in enumerate(want):
        node = nodes[i][0]
        if w and node is not None:
            try:
                want[i] = bool(_will_engine_execute_node(node))
            except RuntimeError:
                pass
    return want


def _first_order_backward(ctx, grad: Tensor):
    """The autograd formula of a forward (operator or direct call): the
    backward, asked only for the gradients that are needed."""
    input, grid = ctx.saved_tensors
    want_dx, want_dgrid = _engine_needs(ctx, ctx.needs_input_grad[:2])
    dx: Optional[Tensor] = None
    dgrid: Optional[Tensor] = None
    if want_dx or want_dgrid:
        dx, dgrid = _backward_call(input.dim(), grad, input, grid, *ctx.options,
                                   [want_dx, want_dgrid])
    return (dx if want_dx else None, dgrid if want_dgrid else None)


grid_sampler_2d.register_autograd(_op_formula(_first_order_backward, 5),
                                  setup_context=_setup_context)


# Volumes: the same operators on 5-D tensors (gridsampler's GridSampler3DGrad).

@torch.library.custom_op("gridsampler::grid_sampler_3d", mutates_args=(), device_types="cpu")
def grid_sampler_3d(input: Tensor, grid: Tensor, mode: str, padding_mode: str,
                    align_corners: bool) -> Tensor:
    return _forward(5, input, grid, mode, padding_mode, align_corners)


@grid_sampler_3d.register_fake
def _(input: Tensor, grid: Tensor, mode: str, padding_mode: str,
      align_corners: bool) -> Tensor:
    return _forward_fake(5, input, grid, mode, padding_mode)


@torch.library.custom_op("gridsampler::grid_sampler_3d_backward", mutates_args=(),
                         device_types="cpu")
def grid_sampler_3d_backward(grad: Tensor, input: Tensor, grid: Tensor, mode: str,
                             padding_mode: str, align_corners: bool,
                             output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor]:
    return _backward_impl(5, grad, input, grid, mode, padding_mode, align_corners, output_mask)


@grid_sampler_3d_backward.register_fake
def _(grad: Tensor, input: Tensor, grid: Tensor, mode: str, padding_mode: str,
      align_corners: bool, output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor]:
    return _backward_fake(5, input, grid, mode, padding_mode, output_mask)


@torch.library.custom_op("gridsampler::grid_sampler_3d_double_backward", mutates_args=(),
                         device_types="cpu")
def grid_sampler_3d_double_backward(gg_dx: Optional[Tensor], gg_dgrid: Optional[Tensor],
                                    grad: Tensor, input: Tensor, grid: Tensor, mode: str,
                                    padding_mode: str, align_corners: bool,
                                    output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor, Tensor]:
    return _double_backward_impl(5, gg_dx, gg_dgrid, grad, input, grid, mode, padding_mode,
                                 align_corners, output_mask)


@grid_sampler_3d_double_backward.register_fake
def _(gg_dx: Optional[Tensor], gg_dgrid: Optional[Tensor], grad: Tensor, input: Tensor,
      grid: Tensor, mode: str, padding_mode: str, align_corners: bool,
      output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor, Tensor]:
    return _double_backward_fake(5, input, grid, grad, mode, padding_mode, output_mask)


grid_sampler_3d_double_backward.register_autograd(_third_order, setup_context=_no_setup)

grid_sampler_3d_backward.register_autograd(_op_formula(_second_order, 7),
                                           setup_context=_backward_setup_context)


grid_sampler_3d.register_autograd(_op_formula(_first_order_backward, 5),
                                  setup_context=_setup_context)


# Direct calls. An eager call on plain CPU tensors runs as torch.autograd.Functions
# around the same operator bodies (the same extension calls, so the same bits),
# because torch.library's Python layer (schema handling, the custom operator's
# autograd wrapper) costs several times a small call's work: a second-order
# step makes three such calls. Everything else goes through the operators,
# which torch.compile, torch.export, fake tensors, torch.jit.trace and dispatch
# or function modes must see as one operator each. The choice is made per
# call, backward and double backward included, so a mode that is active only
# during the backward sees the backward operators.

_direct_calls = True  # tests set it False to run everything through the operators
_PLAIN = (Tensor, torch.nn.Parameter)  # a Parameter has no __torch_function__ of its own


def _direct(*tensors: Optional[Tensor]) -> bool:
    """Whether a call on these tensors can bypass the operators."""
    if not _direct_calls or torch.compiler.is_compiling() or torch.jit.is_tracing():
        return False
    if any(t is not None and type(t) not in _PLAIN for t in tensors):
        return False  # subclasses: fake tensors, user subclasses
    return torch._C._len_torch_dispatch_stack() == 0 and torch._C._len_torch_function_stack() == 0


class _Sample(torch.autograd.Function):
    """grid_sampler_2d/3d as a direct call."""

    @staticmethod
    def forward(ctx, input, grid, mode, padding_mode, align_corners, rank):
        out = _run_forward(rank, input, grid, mode, padding_mode, align_corners)
        _setup_context(ctx, (input, grid, mode, padding_mode, align_corners), out)
        return out

    @staticmethod
    def backward(ctx, grad):
        return (*_first_order_backward(ctx, grad), None, None, None, None)


class _SampleBackward(torch.autograd.Function):
    """grid_sampler_2d/3d_backward as a direct call."""

    @staticmethod
    def forward(ctx, grad, input, grid, mode, padding_mode, align_corners, output_mask, rank):
        out = _run_backward(rank, grad, input, grid, mode, padding_mode, align_corners,
                            output_mask)
        _backward_setup_context(
            ctx, (grad, input, grid, mode, padding_mode, align_corners, output_mask), out)
        return out

    @staticmethod
    def backward(ctx, gg_dx, gg_dgrid):
        return (*_second_order(ctx, gg_dx, gg_dgrid), None, None, None, None, None)


class _SampleDoubleBackward(torch.autograd.Function):
    """grid_sampler_2d/3d_double_backward as a direct call."""

    @staticmethod
    def forward(ctx, gg_dx, gg_dgrid, grad, input, grid, mode, padding_mode, align_corners,
                output_mask, rank):
        return _double_backward_impl(rank, gg_dx, gg_dgrid, grad, input, grid, mode,
                                     padding_mode, align_corners, output_mask)

    @staticmethod
    def backward(ctx, *grads):
        _third_order(ctx, *grads)


def _sample_call(rank: int, input: Tensor, grid: Tensor, mode: str, padding_mode: str,
                 align_corners: bool, direct: bool) -> Tensor:
    if direct:
        if not (torch.is_grad_enabled() and (input.requires_grad or grid.requires_grad)):
            # Nothing to record (inference, augmentation without gradients):
            # the autograd.Function would only add its ~3 us.
            return _run_forward(rank, input, grid, mode, padding_mode, align_corners)
        return _Sample.apply(input, grid, mode, padding_mode, align_corners, rank)
    op = grid_sampler_2d if rank == 4 else grid_sampler_3d
    return op(input, grid, mode, padding_mode, align_corners)


def _backward_call(rank: int, grad: Tensor, input: Tensor, grid: Tensor, mode: str,
                   padding_mode: str, align_corners: bool,
                   output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor]:
    if _direct(grad, input, grid):
        if not torch.is_grad_enabled():
            # A first-order pass (no create_graph): nothing to record.
            return _run_backward(rank, grad, input, grid, mode, padding_mode, align_corners,
                                 output_mask)
        return _SampleBackward.apply(grad, input, grid, mode, padding_mode, align_corners,
                                     list(output_mask), rank)
    op = grid_sampler_2d_backward if rank == 4 else grid_sampler_3d_backward
    return op(grad, input, grid, mode, padding_mode, align_corners, list(output_mask))


def _double_backward_call(rank: int, gg_dx: Optional[Tensor], gg_dgrid: Optional[Tensor],
                          grad: Tensor, input: Tensor, grid: Tensor, mode: str,
                          padding_mode: str, align_corners: bool,
                          output_mask: Sequence[bool]) -> Tuple[Tensor, Tensor, Tensor]:
    if _direct(gg_dx, gg_dgrid, grad, input, grid):
        return _SampleDoubleBackward.apply(gg_dx, gg_dgrid, grad, input, grid, mode,
                                           padding_mode, align_corners, list(output_mask), rank)
    op = grid_sampler_2d_double_backward if rank == 4 else grid_sampler_3d_double_backward
    return op(gg_dx, gg_dgrid, grad, input, grid, mode, padding_mode, align_corners,
              list(output_mask))


def _autocast_enabled() -> bool:
    try:
        return torch.is_autocast_enabled("cpu")
    except TypeError:  # torch before the device argument
        return torch.is_autocast_cpu_enabled()


def _autocast(t: Tensor) -> Tensor:
    """What ``torch.autocast("cpu")`` makes of a ``grid_sample`` argument: PyTorch
    lists ``grid_sampler`` among the float32 operators, whose floating CPU
    arguments other than float64 are cast to float32."""
    if (isinstance(t, Tensor) and t.is_floating_point() and t.device.type == "cpu"
            and t.dtype != torch.float64):
        return t.to(torch.float32)
    return t


# For direct calls of the operator (grid_sample casts before it gets there).
grid_sampler_2d.register_autocast("cpu", torch.float32)
grid_sampler_3d.register_autocast("cpu", torch.float32)


def grid_sample(input: Tensor, grid: Tensor, mode: str = "bilinear",
                padding_mode: str = "zeros", align_corners: Optional[bool] = None) -> Tensor:
    """Drop-in for ``torch.nn.functional.grid_sample``.

    CPU tensors of one dtype among float16, bfloat16, float32 and float64, any
    strides: 4-D ``input`` (N, C, Hin, Win) with ``grid`` (N, Hout, Wout, 2) of
    (x, y) in [-1, 1], returning (N, C, Hout, Wout), or 5-D ``input``
    (N, C, Din, Hin, Win) with ``grid`` (N, Dout, Hout, Wout, 3) of (x, y, z),
    returning (N, C, Dout, Hout, Wout) (trilinear, nearest or tricubic), in the
    input's dtype: gridsampler. Anything else (another device, arguments
    PyTorch rejects) is ``F.grid_sample``'s, with its result or exception.
    ``align_corners=None`` means False, with the same warning as PyTorch's.
    """
    if mode not in MODES or padding_mode not in PADDING_MODES:
        return F.grid_sample(input, grid, mode, padding_mode, align_corners)
    if _autocast_enabled():
        input, grid = _autocast(input), _autocast(grid)
    # (_direct lets None through: the backward's optional tensors.)
    direct = input is not None and grid is not None and _direct(input, grid)
    if direct:
        # Plain tensors: the same test as takes' in fewer attribute reads
        # (a small call's overhead is mostly such reads).
        rank = _switch.plain_rank(input, grid)
    else:
        # Alignment is the operator's to handle (fake tensors under
        # torch.compile have no data pointer to check).
        rank = input.dim() if isinstance(input, Tensor) else 0
        if rank not in (4, 5) or not _switch.takes(
                input, grid, MODES.index(mode), PADDING_MODES.index(padding_mode),
                check_alignment=False, rank=rank):
            rank = 0
    if rank == 0:
        return F.grid_sample(input, grid, mode, padding_mode, align_corners)
    if align_corners is None:
        warnings.warn(
            "Default grid_sample and affine_grid behavior has changed to align_corners=False "
            "since 1.3.0. Please specify align_corners=True if the old behavior is desired. "
            "See the documentation of grid_sample for details.")
        align_corners = False
    return _sample_call(rank, input, grid, mode, padding_mode, bool(align_corners), direct)
