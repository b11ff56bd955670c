"""Turns gridsampler's PyTorch switch on at ``import torch`` when ``GRIDSAMPLER_TORCH=1``.

torch calls every entry point of the group ``torch.backends`` near the end of
``import torch`` (``torch._import_device_backends``; ``TORCH_DEVICE_BACKEND_AUTOLOAD=0``
turns that off for all packages). pyproject.toml declares ``autoload`` below
as one, so a program gets gridsampler's kernels without importing
gridsampler, in every process that imports torch: subprocesses, DataLoader
workers and ``torch.distributed`` ranks inherit the variable.

torch turns any exception from loading or calling an entry point into a
failed ``import torch``. So this is a top-level module of its own, not part of
the gridsampler package: loading it imports nothing, and a broken gridsampler
(an extension that does not load, say) cannot take torch down with it.
Without the variable ``autoload`` only reads the environment; with it, every
failure is a warning and PyTorch's kernels stay in place.
"""

import os
import warnings


def autoload() -> None:
    if os.environ.get("GRIDSAMPLER_TORCH", "").strip() in ("", "0"):
        return
    try:
        from gridsampler._switch import enable, env_requests_switch

        if env_requests_switch():
            enable()
    except Exception as e:  # noqa: BLE001 - reported, and import torch goes on
        warnings.warn(f"GRIDSAMPLER_TORCH: gridsampler's CPU kernels for grid_sample are not in "
                      f"use ({type(e).__name__}: {e}); PyTorch's run instead", RuntimeWarning)
