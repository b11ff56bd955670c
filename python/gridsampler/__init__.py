"""gridsampler: PyTorch's ``grid_sample`` and its gradient (GridSampler2DGrad) on the CPU.

Images (4-D input) and volumes (5-D input, PyTorch's ``grid_sampler_3d`` and
GridSampler3DGrad) alike.

Framework-neutral functions over any CPU array that speaks DLPack or the
buffer protocol (NumPy, PyTorch, JAX, ...), read without copying whatever
its strides::

    import numpy as np, gridsampler
    out = gridsampler.grid_sample(x, grid, mode="bilinear", padding_mode="zeros")
    dx, dgrid = gridsampler.grid_sample_backward(grad_out, x, grid)

Results are arrays of the caller's kind: torch tensors for a torch ``input``,
JAX arrays for a JAX ``input``, NumPy arrays otherwise. Importing this
module does not import torch. The differentiable PyTorch drop-in for
``torch.nn.functional.grid_sample`` is ``gridsampler.torch.grid_sample``.

Errors: a dtype problem raises ``TypeError``, any other bad argument
``ValueError``, a failure inside the library (no memory for its workspace)
``RuntimeError``, each with the C++ library's message (e.g.
``grid: last dimension must be 2, got 3``).
"""

from __future__ import annotations

import operator
import sys
from typing import Any, Sequence, Tuple

import numpy as _np

from . import _gridsampler as _C

__all__ = ["grid_sample", "grid_sample_backward", "grid_sample_double_backward",
           "release_cached_memory", "cached_memory_bytes", "set_cached_memory_limit", "cached_memory_limit",
           "max_threads", "MODES", "PADDING_MODES"]
__version__ = "0.1.0"

MODES = ("bilinear", "nearest", "bicubic")
PADDING_MODES = ("zeros", "border", "reflection")


def __getattr__(name: str) -> Any:
    # `gridsampler.torch` is imported on first use only, so that NumPy users
    # never import torch.
    if name == "torch":
        import importlib

        return importlib.import_module(".torch", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _torch_tensor_type():
    torch = sys.modules.get("torch")  # never imports torch
    return getattr(torch, "Tensor", None) if torch is not None else None


def _is_jax_array(x: Any) -> bool:
    jax = sys.modules.get("jax")
    return jax is not None and isinstance(x, getattr(jax, "Array", ()))


def _coerce(name: str, x: Any) -> Any:
    """Arrays as they are; anything without a shape (nested lists) through NumPy."""
    if hasattr(x, "shape"):
        return x
    try:
        return _np.asarray(x)
    except ValueError as e:  # ragged lists
        raise ValueError(f"{name}: cannot make an array of it: {e}") from None


def _check_ndim(name: str, x: Any, rank: int = 4) -> Tuple[int, ...]:
    shape = tuple(int(s) for s in x.shape)
    if len(shape) != rank:
        raise ValueError(f"{name}: expected {rank} dimensions, got {len(shape)}"
                         + ("" if rank == 4 else " (input is 5-D: a volume)"))
    return shape


def _input_rank(input: Any) -> int:
    """4 for images, 5 for volumes: the rank of ``input`` decides which
    operator a call is, and every other array must have the same."""
    rank = len(input.shape)
    if rank not in (4, 5):
        raise ValueError(f"input: expected 4 dimensions (an image) or 5 (a volume), got {rank}")
    return rank


def _sampler(rank: int) -> Tuple[Any, Any]:
    """The extension's forward and backward for images or volumes."""
    return (_C.forward, _C.backward) if rank == 4 else (_C.forward_3d, _C.backward_3d)


def _check_options(mode: str, padding_mode: str) -> None:
    if mode not in MODES:
        raise ValueError(
            f"mode: unknown value {mode!r} (expected 'bilinear', 'nearest' or 'bicubic')")
    if padding_mode not in PADDING_MODES:
        raise ValueError(
            f"padding_mode: unknown value {padding_mode!r} "
            "(expected 'zeros', 'border' or 'reflection')")


# The extension takes num_threads as a C int.
_INT_MAX = 2**31 - 1


def _num_threads(value: Any) -> int:
    """``num_threads`` as the extension takes it: an integer that fits a C int."""
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(
            f"num_threads: expected an integer, got {type(value).__name__}") from None
    # The library's rule and message (core/validate.cpp), for the values a C
    # int cannot carry to it.
    if n > _INT_MAX:
        raise ValueError(f"num_threads: at most {_C.max_threads()} on this machine, got {n}")
    if n < -_INT_MAX - 1:
        raise ValueError(f"num_threads: must be 0 (all) or positive, got {n}")
    return n


def _is_numpy_bfloat16(dtype: Any) -> bool:
    # ml_dtypes' bfloat16 (the one JAX uses): a NumPy dtype DLPack cannot carry.
    return isinstance(dtype, _np.dtype) and dtype.name == "bfloat16" and dtype.itemsize == 2


class _Frame:
    """Allocates outputs like `like`, hands arrays to the extension and
    converts the results to the caller's kind."""

    def __init__(self, like: Any):
        tensor_type = _torch_tensor_type()
        self.jax = False
        self.torch = None
        if tensor_type is not None and isinstance(like, tensor_type):
            if like.device.type != "cpu":
                raise ValueError(
                    f"input: gridsampler runs on the CPU, got a tensor on {like.device}")
            self.torch = sys.modules["torch"]
            self.dtype = like.dtype
        else:
            self.jax = _is_jax_array(like)
            try:
                self.dtype = _np.dtype(like.dtype)
            except (AttributeError, TypeError):
                self.dtype = _as_numpy(like).dtype
        self.bfloat16 = self.torch is None and _is_numpy_bfloat16(self.dtype)

    def empty(self, shape: Sequence[int]) -> Any:
        if self.torch is not None:
            return self.torch.empty(tuple(shape), dtype=self.dtype)
        return _np.empty(tuple(shape), dtype=self.dtype)

    def arg(self, name: str, x: Any) -> Any:
        """What the extension is given: the array itself (detached for torch,
        a uint16 view for NumPy bfloat16)."""
        if x is None:
            return None
        tensor_type = _torch_tensor_type()
        if tensor_type is not None and isinstance(x, tensor_type):
            return x.detach()  # torch refuses to export a tensor that requires grad
        if not isinstance(x, _np.ndarray) and not hasattr(x, "__dlpack__"):
            x = _np.asarray(x)  # lists, buffer-protocol objects
        if self.bfloat16:
            dtype = getattr(x, "dtype", None)
            if isinstance(x, _np.ndarray) and _is_numpy_bfloat16(x.dtype):
                return x.view(_np.uint16)
            if dtype is not None and _np.dtype(dtype) == _np.uint16:
                raise TypeError(f"{name}: dtype uint16 is not supported "
                                "(expected float16, bfloat16, float32 or float64)")
        return x

    def result(self, out: Any) -> Any:
        if out is not None and self.jax:
            return sys.modules["jax"].numpy.asarray(out)
        return out

    def call(self, fn: Any, names: Sequence[str], arrays: Sequence[Any], *options: Any,
             num_threads: int = 0) -> None:
        args = [self.arg(n, a) for n, a in zip(names, arrays)]
        try:
            fn(*args, *options, num_threads=num_threads, uint16_as_bfloat16=self.bfloat16)
        except TypeError:
            # An argument nanobind cannot read in place makes it refuse the
            # whole call without naming the argument: name it.
            for name, a in zip(names, args):
                if a is not None and not _readable(a):
                    raise TypeError(
                        f"{name}: cannot read a {type(a).__module__}.{type(a).__name__} in "
                        "place; expected a CPU array that supports DLPack or the buffer "
                        "protocol (NumPy, PyTorch, JAX, ...) in native byte order") from None
            raise


def _plain(rank: int, *arrays: Any) -> bool:
    """Whether every array is a NumPy array of a float dtype (float16, 32 or
    64) and of rank ``rank`` (4 or 5): the common case, which needs none of
    _Frame's conversions. The general path costs about 7 microseconds a call
    more (docs/performance.md, "The Python layer's cost per call")."""
    if rank != 4 and rank != 5:
        return False
    for a in arrays:
        if type(a) is not _np.ndarray or a.dtype.kind != "f" or a.ndim != rank:
            return False
    return True


def _plain_options(mode: Any, padding_mode: Any, num_threads: Any) -> bool:
    return (mode in MODES and padding_mode in PADDING_MODES and type(num_threads) is int
            and 0 <= num_threads <= _INT_MAX)


def _readable(a: Any) -> bool:
    try:
        _C._readable(a)
        return True
    except TypeError:
        return False


def _as_numpy(x: Any) -> Any:
    try:
        return _np.asarray(x) if not hasattr(x, "__dlpack__") else _np.from_dlpack(x)
    except (TypeError, BufferError, RuntimeError) as e:
        raise TypeError(f"cannot read an array of type {type(x).__name__}: {e}") from None


def grid_sample(input: Any, grid: Any, mode: str = "bilinear", padding_mode: str = "zeros",
                align_corners: bool = False, *, num_threads: int = 0) -> Any:
    """Samples ``input`` (N, C, Hin, Win) at ``grid`` (N, Hout, Wout, 2) of (x, y) in [-1, 1],
    or a volume ``input`` (N, C, Din, Hin, Win) at ``grid`` (N, Dout, Hout, Wout, 3) of
    (x, y, z) (x indexes W, y H, z D).

    Same semantics as ``torch.nn.functional.grid_sample`` on 4-D and 5-D input
    (``bilinear`` is trilinear on volumes, ``bicubic`` tricubic); returns
    (N, C, Hout, Wout) or (N, C, Dout, Hout, Wout) in the dtype of ``input``.
    Not differentiable: use ``gridsampler.torch.grid_sample`` for autograd.
    ``num_threads``: at most ``max_threads()`` (more raises ``ValueError``);
    0 uses OpenMP's default (``OMP_NUM_THREADS``) capped at ``max_threads()``.
    Results do not depend on it.
    """
    if type(input) is _np.ndarray and _plain_options(mode, padding_mode, num_threads) and \
            _plain(input.ndim, input, grid):
        out = _np.empty((*input.shape[:2], *grid.shape[1:-1]), dtype=input.dtype)
        try:
            _sampler(input.ndim)[0](input, grid, out, mode, padding_mode, bool(align_corners),
                                    num_threads=num_threads, uint16_as_bfloat16=False)
            return out
        except TypeError:
            pass  # (an array the extension cannot read: the general path says why)
    _check_options(mode, padding_mode)
    num_threads = _num_threads(num_threads)
    input, grid = _coerce("input", input), _coerce("grid", grid)
    rank = _input_rank(input)
    n, c = _check_ndim("input", input, rank)[:2]
    out_spatial = _check_ndim("grid", grid, rank)[1:-1]
    frame = _Frame(input)
    out = frame.empty((n, c, *out_spatial))
    frame.call(_sampler(rank)[0], ("input", "grid", "output"), (input, grid, out), mode,
               padding_mode, bool(align_corners), num_threads=num_threads)
    return frame.result(out)


def grid_sample_backward(grad: Any, input: Any, grid: Any, mode: str = "bilinear",
                         padding_mode: str = "zeros", align_corners: bool = False,
                         output_mask: Tuple[bool, bool] = (True, True), *,
                         num_threads: int = 0) -> Tuple[Any, Any]:
    """GridSampler2DGrad (GridSampler3DGrad for 5-D ``input``): the gradients of
    ``grid_sample`` with respect to input and grid.

    ``grad`` is the gradient of the output, (N, C, Hout, Wout) or
    (N, C, Dout, Hout, Wout). Returns ``(dx, dgrid)`` shaped like ``input`` and
    ``grid``; an output whose ``output_mask`` entry is False is not computed and
    returned as None.
    """
    if type(input) is _np.ndarray and _plain_options(mode, padding_mode, num_threads) and \
            _plain(input.ndim, grad, input, grid) and type(output_mask) in (tuple, list) and \
            len(output_mask) == 2:
        want_dx, want_dgrid = bool(output_mask[0]), bool(output_mask[1])
        dx = _np.empty(input.shape, dtype=input.dtype) if want_dx else None
        dgrid = _np.empty(grid.shape, dtype=input.dtype) if want_dgrid else None
        try:
            _sampler(input.ndim)[1](grad, input, grid, dx, dgrid, mode, padding_mode,
                                    bool(align_corners), num_threads=num_threads,
                                    uint16_as_bfloat16=False)
            return dx, dgrid
        except TypeError:
            pass  # (as in grid_sample)
    _check_options(mode, padding_mode)
    num_threads = _num_threads(num_threads)
    want_dx, want_dgrid = (bool(m) for m in output_mask)
    grad, input, grid = _coerce("grad", grad), _coerce("input", input), _coerce("grid", grid)
    rank = _input_rank(input)
    in_shape = _check_ndim("input", input, rank)
    grid_shape = _check_ndim("grid", grid, rank)
    _check_ndim("grad", grad, rank)
    frame = _Frame(input)
    dx = frame.empty(in_shape) if want_dx else None
    dgrid = frame.empty(grid_shape) if want_dgrid else None
    frame.call(_sampler(rank)[1], ("grad", "input", "grid", "dx", "dgrid"),
               (grad, input, grid, dx, dgrid), mode, padding_mode, bool(align_corners),
               num_threads=num_threads)
    return frame.result(dx), frame.result(dgrid)


def grid_sample_double_backward(gg_dx: Any, gg_dgrid: Any, grad: Any, input: Any, grid: Any,
                                mode: str = "bilinear", padding_mode: str = "zeros",
                                align_corners: bool = False,
                                output_mask: Tuple[bool, bool, bool] = (True, True, True), *,
                                num_threads: int = 0) -> Tuple[Any, Any, Any]:
    """The double backward: differentiates ``grid_sample_backward`` itself.

    With ``(dx, dgrid) = grid_sample_backward(grad, input, grid)`` and incoming
    gradients ``gg_dx`` (shaped like input) and ``gg_dgrid`` (shaped like
    grid), returns ``(d_grad, d_input, d_grid)``: the gradients of
    ``<gg_dx, dx> + <gg_dgrid, dgrid>`` with respect to grad, input and grid.
    Either incoming gradient may be None (zeros); an output whose
    ``output_mask`` entry is False is not computed and returned as None.
    Images (4-D input) and volumes (5-D input) alike.
    """
    _check_options(mode, padding_mode)
    num_threads = _num_threads(num_threads)
    want = [bool(m) for m in output_mask]
    if len(want) != 3:
        raise ValueError(f"output_mask: expected 3 entries, got {len(want)}")
    grad, input, grid = _coerce("grad", grad), _coerce("input", input), _coerce("grid", grid)
    gg_dx = None if gg_dx is None else _coerce("gg_dx", gg_dx)
    gg_dgrid = None if gg_dgrid is None else _coerce("gg_dgrid", gg_dgrid)
    rank = _input_rank(input)
    in_shape = _check_ndim("input", input, rank)
    grid_shape = _check_ndim("grid", grid, rank)
    grad_shape = _check_ndim("grad", grad, rank)
    if gg_dx is not None:
        _check_ndim("gg_dx", gg_dx, rank)
    if gg_dgrid is not None:
        _check_ndim("gg_dgrid", gg_dgrid, rank)
    frame = _Frame(input)
    outs = [frame.empty(shape) if w else None
            for shape, w in zip((grad_shape, in_shape, grid_shape), want)]
    frame.call(_C.double_backward if rank == 4 else _C.double_backward_3d,
               ("gg_dx", "gg_dgrid", "grad", "input", "grid", "d_grad", "d_input", "d_grid"),
               (gg_dx, gg_dgrid, grad, input, grid, *outs), mode, padding_mode,
               bool(align_corners), num_threads=num_threads)
    return tuple(frame.result(o) for o in outs)


def max_threads() -> int:
    """The most threads one call may use: 4 per hardware thread, at least 64,
    never more than OpenMP's thread limit (``OMP_THREAD_LIMIT``).

    A larger ``num_threads`` raises ``ValueError``; OpenMP's default
    (``OMP_NUM_THREADS``) and ``torch.get_num_threads()`` in
    ``gridsampler.torch`` are capped at it. Fixed for the process.
    """
    return _C.max_threads()


def release_cached_memory() -> None:
    """Frees the memory the library keeps between calls.

    Each thread that calls the library keeps one buffer (the backward's
    workspace, the forward's copies) for its next call, at most
    ``cached_memory_limit()`` bytes per thread (128 MiB unless set). This
    frees the buffers of all threads; one in use by a running call is freed
    when that call returns. Results do not depend on it.
    """
    _C.release_cached_memory()


def cached_memory_bytes() -> int:
    """Bytes the library keeps between calls, by all threads together."""
    return _C.cached_memory_bytes()


def set_cached_memory_limit(bytes: int) -> None:
    """Bounds the buffer each calling thread keeps between calls.

    From now on, for every thread; idle buffers above the bound are freed at
    once, one in use when its call returns. 0 keeps nothing: every call then
    allocates its workspace and frees it on return (fresh memory costs page
    faults, up to several times a large call's time). Results do not depend
    on it.
    """
    if isinstance(bytes, bool) or not isinstance(bytes, int) or bytes < 0:
        raise ValueError(f"set_cached_memory_limit: bytes must be a non-negative int, got {bytes!r}")
    _C.set_cached_memory_limit(min(bytes, 2**64 - 1))


def cached_memory_limit() -> int:
    """The bound on the buffer each calling thread keeps between calls."""
    return _C.cached_memory_limit()
