"""Shared fixtures of the gridsampler Python tests.

torch is needed by every test that compares with PyTorch. Those tests are
skipped when torch is missing, unless GRIDSAMPLER_REQUIRE_TORCH=1 (set by
scripts/ci-python.sh), where a missing or too old torch is an error.
"""

import os
import sys

import pytest

# The suite compares gridsampler with PyTorch's own kernel, which the switch
# replaces: an inherited GRIDSAMPLER_TORCH=1 would compare gridsampler with
# itself. Tests of the variable set it in subprocesses of their own.
os.environ.pop("GRIDSAMPLER_TORCH", None)

MODES = ("bilinear", "nearest", "bicubic")
PADDINGS = ("zeros", "border", "reflection")


def _torch_or_skip(min_version=None):
    require = os.environ.get("GRIDSAMPLER_REQUIRE_TORCH") == "1"
    try:
        import torch
    except ImportError:
        if require:
            raise
        pytest.skip("torch is not installed")
    if min_version is not None and not hasattr(torch.library, "custom_op"):
        if require:
            raise AssertionError(f"torch {torch.__version__} is older than {min_version}")
        pytest.skip(f"torch {torch.__version__} is older than {min_version}")
    return torch


@pytest.fixture(scope="session")
def torch():
    return _torch_or_skip()


@pytest.fixture(scope="session")
def gt(torch):
    """gridsampler.torch (needs torch >= 2.4)."""
    _torch_or_skip("2.4")
    import gridsampler.torch as gt

    return gt


@pytest.fixture(autouse=True)
def _switch_left_off():
    """Every test leaves the switch as it found it (off): a test that leaks it
    would make the later ones compare gridsampler with itself."""
    yield
    switch = sys.modules.get("gridsampler._switch")
    if switch is not None and switch.is_enabled():
        switch.disable()
        pytest.fail("the test left gridsampler.torch's switch on")


def pytest_report_header(config):
    try:
        import torch

        return f"torch {torch.__version__} ({torch.__file__})"
    except ImportError:
        return "torch: not installed"


def op_logs():
    """(DispatchLog, FunctionLog): a TorchDispatchMode and a TorchFunctionMode
    that record, in their `ops`, the name of every operator they see."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class Recording:
        def __init__(self):
            super().__init__()
            self.ops = []

        def record(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    class DispatchLog(Recording, TorchDispatchMode):
        __torch_dispatch__ = Recording.record

    class FunctionLog(Recording, TorchFunctionMode):
        __torch_function__ = Recording.record

    return DispatchLog, FunctionLog
