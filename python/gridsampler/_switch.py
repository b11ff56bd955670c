"""The switch: gridsampler as PyTorch's CPU kernel of ``aten::grid_sampler_2d``,
``aten::grid_sampler_3d`` and their backwards.

``F.grid_sample`` on 4-D tensors ends in two ATen operators, whatever library
calls it (kornia, MONAI, torchvision, a model zoo):

    aten::grid_sampler_2d(Tensor input, Tensor grid, int interpolation_mode,
                          int padding_mode, bool align_corners) -> Tensor
    aten::grid_sampler_2d_backward(Tensor grad_output, Tensor input, Tensor grid,
                                   int interpolation_mode, int padding_mode,
                                   bool align_corners, bool[2] output_mask) -> (Tensor, Tensor)

the second called by PyTorch's autograd formula for the first (and, with the
first, by its formula for second order); on 5-D tensors (volumes) in
``aten::grid_sampler_3d`` and ``aten::grid_sampler_3d_backward``, with the
same arguments.  ``enable()`` registers CPU kernels of
all four through a ``torch.library.Library("aten", "IMPL")``; the dispatcher then
calls them for CPU tensors below autograd, functorch, autocast and Python
dispatch modes, so all of those keep PyTorch's own behaviour, and only the
arithmetic changes hands. Dropping the library (``disable()``) puts PyTorch's
kernels back.

A call gridsampler does not take (a dtype or shape PyTorch rejects, an empty
spatial size, an integer mode code outside PyTorch's three) goes to the kernel
that was registered before, from ``torch.library.get_kernel``: the user sees
PyTorch's own result or message. The kernels allocate their results as
PyTorch's kernel does (contiguous) and always return the grid's gradient, which
PyTorch's CPU kernel computes whatever ``output_mask[1]`` says and its meta
function declares; only ``grad_input`` follows the mask (None when not asked).
"""

from __future__ import annotations

import os
import threading
import warnings
from contextlib import contextmanager
from typing import Any, Dict, Iterator, Optional, Sequence

import torch
from torch import Tensor

from . import MODES, PADDING_MODES
from . import _gridsampler as _C

# The environment variable that turns the switch on at `import torch`
# (through the `torch.backends` entry point, _gridsampler_torch_autoload).
ENV_VAR = "GRIDSAMPLER_TORCH"

# The dtypes both PyTorch's CPU kernel and gridsampler compute.
_DTYPES = frozenset((torch.float16, torch.bfloat16, torch.float32, torch.float64))

# aten's integer codes are the positions in these tuples (F.grid_sample's
# mapping: bilinear 0, nearest 1, bicubic 2; zeros 0, border 1, reflection 2).
assert MODES == ("bilinear", "nearest", "bicubic")
assert PADDING_MODES == ("zeros", "border", "reflection")


def aligned(t: Tensor) -> bool:
    """Whether the data of `t` sits on its element size, as the library requires
    (PyTorch does not: a dtype view of a byte buffer can be off)."""
    return t.data_ptr() % t.element_size() == 0


def _plain_cpu(t: Any, dtype: torch.dtype) -> bool:
    """A strided CPU tensor of `dtype`."""
    return (isinstance(t, Tensor) and t.dtype == dtype and t.device.type == "cpu"
            and t.layout == torch.strided)


def takes(input: Tensor, grid: Tensor, interpolation_mode: int, padding_mode: int,
          check_alignment: bool = True, rank: int = 4) -> bool:
    """Whether gridsampler computes ``aten::grid_sampler_2d`` (`rank` 4) or
    ``aten::grid_sampler_3d`` (`rank` 5) for these arguments.

    Exactly the calls PyTorch's CPU kernel computes (rather than rejects) and
    the library accepts: CPU tensors of one floating dtype, input of `rank`
    dimensions with a non-empty plane (volume), grid (N, Hout, Wout, 2) or
    (N, Dout, Hout, Wout, 3), integer codes 0..2. Everything else goes to
    PyTorch's kernel, whose checks then give PyTorch's messages.
    `check_alignment=False` leaves out the data pointers (which fake tensors
    under torch.compile do not have) for a caller that handles misalignment.
    """
    if not isinstance(input, Tensor) or input.dtype not in _DTYPES:
        return False
    if not (_plain_cpu(input, input.dtype) and _plain_cpu(grid, input.dtype)):
        return False
    if check_alignment and not (aligned(input) and aligned(grid)):
        return False
    if input.dim() != rank or grid.dim() != rank:
        return False
    if any(s == 0 for s in input.shape[2:]):
        return False
    if grid.shape[-1] != rank - 2 or grid.shape[0] != input.shape[0]:
        return False
    # bool is an int subclass; aten's int arguments arrive as Python ints.
    return (type(interpolation_mode) is int and 0 <= interpolation_mode <= 2
            and type(padding_mode) is int and 0 <= padding_mode <= 2)


def plain_rank(input: Tensor, grid: Tensor) -> int:
    """`takes` for tensors of exactly type Tensor (or Parameter) with valid
    mode codes, alignment left out: the rank (4 or 5) of a call gridsampler
    computes, else 0. Reads each attribute once, and `is_cpu` rather than
    `device` (which builds an object), since on a small call these reads
    are most of the drop-in's overhead; a subclass (a fake tensor says it is
    on the CPU without being there) must go through `takes`."""
    dtype = input.dtype
    if dtype not in _DTYPES or grid.dtype != dtype:
        return 0
    if not (input.is_cpu and grid.is_cpu and input.layout == torch.strided
            and grid.layout == torch.strided):
        return 0
    shape, grid_shape = input.shape, grid.shape
    rank = len(shape)
    if rank not in (4, 5) or len(grid_shape) != rank or not all(shape[2:]):
        return 0
    if grid_shape[-1] != rank - 2 or grid_shape[0] != shape[0]:
        return 0
    return rank


def _grad_fits(grad: Any, input: Tensor, grid: Tensor) -> bool:
    """A ``grad_output`` of the input's dtype, shaped like the forward's output."""
    return (_plain_cpu(grad, input.dtype) and grad.dim() == input.dim()
            and tuple(grad.shape) == (input.shape[0], input.shape[1], *grid.shape[1:-1]))


def takes_backward(grad: Tensor, input: Tensor, grid: Tensor, interpolation_mode: int,
                   padding_mode: int, output_mask: Any, rank: int = 4) -> bool:
    """`takes` for ``aten::grid_sampler_2d_backward`` (or ``_3d_backward``),
    plus a ``grad_output`` of the input's dtype shaped like the output and a
    two-entry mask."""
    if not takes(input, grid, interpolation_mode, padding_mode, rank=rank):
        return False
    if not _grad_fits(grad, input, grid) or not aligned(grad):
        return False
    return len(output_mask) == 2


class _Stats:
    """Calls the switch saw, for tests and benchmarks to prove which kernel ran."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts = {"grid_sampler_2d": 0, "grid_sampler_2d_backward": 0,
                       "grid_sampler_3d": 0, "grid_sampler_3d_backward": 0, "handed_on": 0,
                       "double_backward": 0}

    def add(self, key: str) -> None:
        with self.lock:
            self.counts[key] += 1


_stats = _Stats()


def _forward_kernel(rank, original, keyset, input, grid, interpolation_mode, padding_mode,
                    align_corners):
    if not takes(input, grid, interpolation_mode, padding_mode, rank=rank):
        _stats.add("handed_on")
        return original.call_boxed(keyset, input, grid, interpolation_mode, padding_mode,
                                   align_corners)
    _stats.add(f"grid_sampler_{rank - 2}d")
    # The device is explicit: a `with torch.device(...)` block around the
    # caller must not move the result off the CPU, as it does not for PyTorch's.
    out = torch.empty((input.shape[0], input.shape[1], *grid.shape[1:-1]),
                      dtype=input.dtype, device=input.device)
    # detach(): DLPack refuses a tensor that requires grad; the dispatcher is
    # already below autograd here, so nothing is lost.
    forward = _C.forward if rank == 4 else _C.forward_3d
    forward(input.detach(), grid.detach(), out, MODES[interpolation_mode],
            PADDING_MODES[padding_mode], bool(align_corners),
            num_threads=min(torch.get_num_threads(), _C.max_threads()))
    return out


def _backward_kernel(rank, original, keyset, grad, input, grid, interpolation_mode,
                     padding_mode, align_corners, output_mask):
    if not takes_backward(grad, input, grid, interpolation_mode, padding_mode, output_mask,
                          rank=rank):
        _stats.add("handed_on")
        return original.call_boxed(keyset, grad, input, grid, interpolation_mode, padding_mode,
                                   align_corners, output_mask)
    _stats.add(f"grid_sampler_{rank - 2}d_backward")
    dx = (torch.empty(input.shape, dtype=input.dtype, device=input.device)
          if output_mask[0] else None)
    dgrid = torch.empty(grid.shape, dtype=input.dtype, device=input.device)
    backward = _C.backward if rank == 4 else _C.backward_3d
    backward(grad.detach(), input.detach(), grid.detach(), dx, dgrid,
             MODES[interpolation_mode], PADDING_MODES[padding_mode], bool(align_corners),
             num_threads=min(torch.get_num_threads(), _C.max_threads()))
    return dx, dgrid


def _bound(kernel, rank, original):
    """`kernel` for one operator: its rank and the kernel it hands calls on to."""
    return lambda keyset, *args: kernel(rank, original, keyset, *args)


def second_order_wanted(needed: Sequence[bool], gg_dgrid: Optional[Tensor]) -> list:
    """Which of the double backward's outputs (d_grad, d_input, d_grid) to
    compute: those autograd needs, less d_input when there is no gg_dgrid (dx
    does not depend on the input, so it is zero whatever the values). None
    then tells autograd so, as PyTorch's own formula does, without a tensor
    of zeros to allocate, fill and add (in an R1 step on 8,3,64,64 images
    that was a fifth of the step)."""
    want = [bool(w) for w in needed]
    if gg_dgrid is None:
        want[1] = False
    return want


def _native_second_order(rank: int) -> type:
    """``aten::grid_sampler_2d_backward`` (`rank` 4) or ``_3d_backward`` (5)
    with gridsampler's double backward as its derivative: the first order is
    redispatched below autograd (to the CPU kernel above), the second runs
    natively in one call instead of PyTorch's composite of gathers and scatters
    around the two first-order operators."""
    first_order = getattr(torch.ops.aten, f"grid_sampler_{rank - 2}d_backward").default
    second_order = getattr(torch.ops.gridsampler, f"grid_sampler_{rank - 2}d_double_backward")

    class NativeSecondOrder(torch.autograd.Function):
        @staticmethod
        def forward(keyset, grad, input, grid, interpolation_mode, padding_mode, align_corners,
                    output_mask):
            below = keyset & torch._C._after_autograd_keyset
            return first_order.redispatch(below, grad, input, grid, interpolation_mode,
                                          padding_mode, align_corners, output_mask)

        @staticmethod
        def setup_context(ctx, inputs, output):
            _, grad, input, grid, interpolation_mode, padding_mode, align_corners, output_mask = inputs
            ctx.save_for_backward(grad, input, grid)
            ctx.options = (MODES[interpolation_mode], PADDING_MODES[padding_mode], bool(align_corners))
            ctx.has_dx = bool(output_mask[0])
            # An output the loss does not use arrives as None, not as zeros,
            # and the double backward leaves its terms out.
            ctx.set_materialize_grads(False)

        @staticmethod
        def backward(ctx, gg_dx, gg_dgrid):
            grad, input, grid = ctx.saved_tensors
            want = second_order_wanted(ctx.needs_input_grad[1:4], gg_dgrid)
            if not any(want):
                return (None,) * 8
            _stats.add("double_backward")
            d = second_order(gg_dx if ctx.has_dx else None, gg_dgrid, grad, input, grid,
                             *ctx.options, want)
            return (None, *(t if w else None for t, w in zip(d, want)), None, None, None, None)

    return NativeSecondOrder


def _functorch_wrapped(*tensors: Any) -> bool:
    is_wrapped = getattr(torch._C._functorch, "is_functorch_wrapped_tensor", None)
    return is_wrapped is not None and any(isinstance(t, Tensor) and is_wrapped(t) for t in tensors)


def _second_order_kernel(rank, native, original, keyset, grad, input, grid, interpolation_mode,
                         padding_mode, align_corners, output_mask):
    # torch.func's transforms wrap tensors (no storage to check): their
    # derivatives stay PyTorch's formula, which still runs the first-order
    # operators on gridsampler. Alignment is the CPU kernel's to check (it
    # hands misaligned calls on) and the second-order operator copies.
    if (_functorch_wrapped(grad, input, grid)
            or not takes(input, grid, interpolation_mode, padding_mode, check_alignment=False,
                         rank=rank)
            or not _grad_fits(grad, input, grid) or len(output_mask) != 2):
        return original.call_boxed(keyset, grad, input, grid, interpolation_mode, padding_mode,
                                   align_corners, output_mask)
    return native.apply(keyset, grad, input, grid, interpolation_mode, padding_mode,
                        align_corners, output_mask)


def _register_second_order(lib: torch.library.Library) -> None:
    """Registers gridsampler's double backward as the derivative of
    ``aten::grid_sampler_2d_backward`` and ``aten::grid_sampler_3d_backward``
    on CPU only (their AutogradCPU kernels; other devices keep PyTorch's
    formula), with the kernels registered before for the calls it does not
    take. The native formula is not differentiable again: a third order
    through the switch raises a RuntimeError saying so."""
    import gridsampler.torch  # noqa: F401  (defines the second-order operators)
    for rank in (4, 5):
        name = f"grid_sampler_{rank - 2}d_backward"
        original = torch.library.get_kernel(f"aten::{name}", "AutogradCPU")
        native = _native_second_order(rank)
        lib.impl(name,
                 lambda keyset, *args, rank=rank, native=native, original=original:
                 _second_order_kernel(rank, native, original, keyset, *args),
                 "AutogradCPU", with_keyset=True)


class _State:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.lib: Optional[torch.library.Library] = None


_state = _State()


def enable() -> None:
    """Makes gridsampler PyTorch's CPU kernel for ``grid_sample`` (forward and backward).

    Every ``torch.nn.functional.grid_sample`` (and ``torch.grid_sampler``,
    ``torch.ops.aten.grid_sampler_2d`` / ``_3d``) on 4-D and 5-D CPU tensors
    then runs gridsampler, with PyTorch's autograd, ``torch.func`` transforms, hooks and
    anomaly mode around it. Calls it does not take go to PyTorch's kernel.
    Idempotent; thread-safe. Not reached by code ``torch.compile`` (Inductor)
    generates for the forward, which it decomposes into its own loops.
    """
    if not hasattr(torch.library, "get_kernel"):
        raise RuntimeError("gridsampler.torch.enable() needs torch.library.get_kernel, which torch "
                           + torch.__version__ + " does not have")
    with _state.lock:
        if _state.lib is not None:
            return
        # The kernels registered now (PyTorch's, or another library's
        # override) serve the calls this one hands on.
        originals = {
            (rank, op): torch.library.get_kernel(f"aten::grid_sampler_{rank - 2}d{op}", "CPU")
            for rank in (4, 5) for op in ("", "_backward")}
        lib = torch.library.Library("aten", "IMPL")
        try:
            with warnings.catch_warnings():
                # The dispatcher warns (once per process) that a kernel
                # overrides another for the same key: that is the point here.
                warnings.filterwarnings(
                    "ignore", message=r"(?s).*Overriding a previously registered kernel")
                for (rank, op), original in originals.items():
                    kernel = _forward_kernel if op == "" else _backward_kernel
                    lib.impl(f"grid_sampler_{rank - 2}d{op}",
                             _bound(kernel, rank, original),
                             "CPU", with_keyset=True)
                _register_second_order(lib)
        except BaseException:
            lib._destroy()  # a half-registered library must not stay behind
            raise
        _state.lib = lib


def disable() -> None:
    """Gives ``grid_sample`` on CPU back to PyTorch's kernels. Idempotent; thread-safe."""
    with _state.lock:
        lib, _state.lib = _state.lib, None
        if lib is not None:
            # Removes the registrations now rather than when the object is
            # collected (torch.library also does it from a finalizer).
            lib._destroy()


def is_enabled() -> bool:
    """Whether the switch is on in this process."""
    return _state.lib is not None


@contextmanager
def switch(on: bool = True) -> Iterator[None]:
    """``with gridsampler.torch.switch():`` turns the switch on (or, with
    ``on=False``, off) for the block and restores the previous state after it."""
    was = is_enabled()
    (enable if on else disable)()
    try:
        yield
    finally:
        (enable if was else disable)()


def switch_stats(reset: bool = False) -> Dict[str, int]:
    """Calls the switch has seen since the last reset: ``grid_sampler_2d``,
    ``grid_sampler_2d_backward``, ``grid_sampler_3d`` and
    ``grid_sampler_3d_backward`` computed by gridsampler, ``double_backward``
    (gridsampler's native second order, as the backward's derivative),
    ``handed_on`` to the kernel underneath (PyTorch's). With ``reset=True``, zeroes them after reading."""
    with _stats.lock:
        counts = dict(_stats.counts)
        if reset:
            for key in _stats.counts:
                _stats.counts[key] = 0
    return counts


def env_requests_switch() -> bool:
    """Whether ``GRIDSAMPLER_TORCH`` asks for the switch: "1" yes, unset, empty
    or "0" no; any other value raises ValueError (a typo should not silently
    leave PyTorch's kernel in place)."""
    value = os.environ.get(ENV_VAR, "").strip()
    if value in ("", "0"):
        return False
    if value == "1":
        return True
    raise ValueError(f"{ENV_VAR}={value!r}: expected 1 (on) or 0 (off)")
