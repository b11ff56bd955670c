"""Turns the switch on at ``import torch`` when ``GRIDSAMPLER_TORCH=1``.

torch calls every entry point of the group ``torch.backends`` near the end of
``import torch`` (``torch._import_device_backends``; ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``
turns that off for all packages). pyproject.toml declares ``autoload`` below
as one, so a program gets gridsampler's kernels without importing
gridsampler, in every process that imports torch: subprocesses, DataLoader
workers and ``torch.distributed`` ranks inherit the variable.

Without the variable this costs one environment lookup (and the import of
this package, numpy and the extension, which torch's entry point machinery
imports before calling). torch turns any exception from an entry point into
a failed ``import torch``; a broken gridsampler must not take torch down with
it, so failures are a warning and PyTorch's kernels stay in place.
"""

import os
import warnings


def autoload() -> None:
    if os.environ.get("GRIDSAMPLER_TORCH", "").strip() in ("", "0"):
        return
    try:
        from ._switch import enable, env_requests_switch

        if env_requests_switch():
            enable()
    except Exception as e:  # noqa: BLE001 - reported, and import torch goes on
        warnings.warn(f"GRIDSAMPLER_TORCH: gridsampler's CPU kernels for grid_sample are not in "
                      f"use ({type(e).__name__}: {e}); PyTorch's run instead", RuntimeWarning)
