"""Shared fixtures of the gridsampler Python tests.

torch is needed by every test that compares with PyTorch. Those tests are
skipped when torch is missing, unless GRIDSAMPLER_REQUIRE_TORCH=1 (set by
scripts/ci-python.sh), where a missing or too old torch is an error.
"""

import os

import pytest

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


def pytest_report_header(config):
    try:
        import torch

        return f"torch {torch.__version__} ({torch.__file__})"
    except ImportError:
        return "torch: not installed"
