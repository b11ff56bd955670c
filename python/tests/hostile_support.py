"""The hostile sweep's registry, checks and runner (see test_hostile.py).

A case passes when the call raises the expected exception with the library's
message, or returns the right values: against torch.nn.functional.grid_sample
in float64 where torch is available, analytically where the arrays are too
large for it. run() prints a JSON line when a case starts and one with its
outcome, so that the parent can tell which case took the process down.
"""

import json
import os
import traceback

import numpy as np

import gridsampler

CASES = {}  # name -> (function, the environment it needs)


def case(name, env=None):
    def register(fn):
        assert name not in CASES, name
        CASES[name] = (fn, env or {})
        return fn
    return register


class Skip(Exception):
    pass


def need_torch():
    try:
        import torch
    except ImportError:
        if os.environ.get("GRIDSAMPLER_REQUIRE_TORCH") == "1":
            raise
        raise Skip("torch is not installed")
    return torch


def raises(exc, message, fn, *args, **kwargs):
    """`fn` raises exactly `exc` whose message contains `message` (a plain string)."""
    try:
        fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 (what came back is the point)
        assert type(e) is exc, f"raised {type(e).__name__}: {e} (expected {exc.__name__})"
        assert message in str(e), f"message {str(e)!r} lacks {message!r}"
        return
    raise AssertionError(f"returned normally; expected {exc.__name__}: {message}")


# ---------------------------------------------------------------------------
# Data and references.

def problem(dtype=np.float32, shape=(2, 3, 5, 7, 4, 6), seed=0, spread=1.15):
    n, c, hi, wi, ho, wo = shape
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, hi, wi)).astype(dtype)
    g = ((rng.random((n, ho, wo, 2)) * 2 - 1) * spread).astype(dtype)
    w = rng.standard_normal((n, c, ho, wo)).astype(dtype)
    return x, g, w


def special_grid(dtype):
    """(1, 6, 6, 2): every pair of NaN, +-Inf, +-1e30 and 0.5 as (x, y)."""
    specials = np.asarray([np.nan, np.inf, -np.inf, 1e30, -1e30, 0.5])
    sx, sy = np.meshgrid(specials, specials, indexing="ij")
    return np.stack([sx, sy], -1).reshape(1, 6, 6, 2).astype(dtype)


TOL = {"float64": 1e-12, "float32": 2e-5, "float16": 4 * 2.0**-10, "bfloat16": 4 * 2.0**-7}


def as_f64(a):
    """A float64 NumPy copy of an array or tensor (bfloat16 included)."""
    if type(a).__module__.startswith("torch"):
        return a.detach().double().numpy()
    return np.array(a, dtype=np.float64)


def close(got, want, dtype_name, what):
    """`got` within the dtype's tolerance of the float64 `want`, with the same
    NaNs and infinities where `want` has them."""
    got, want = as_f64(got), as_f64(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, expected {want.shape}"
    assert np.array_equal(np.isnan(got), np.isnan(want)), f"{what}: NaNs differ"
    inf = np.isinf(want)
    assert np.array_equal(got[inf], want[inf]), f"{what}: infinities differ"
    finite = np.isfinite(want)
    if finite.any():
        err = float(np.abs(got[finite] - want[finite]).max())
        scale = max(1.0, float(np.abs(want[finite]).max()))
        tol = TOL[dtype_name]
        assert err <= tol * scale, f"{what}: max error {err:.3g} > {tol:.3g} * {scale:.3g}"


def torch_reference(x, g, w, mode="bilinear", padding="zeros", align=False):
    """F.grid_sample's output and the gradients of sum(out * w), in float64."""
    torch = need_torch()
    xt = torch.from_numpy(as_f64(x)).requires_grad_()
    gt = torch.from_numpy(as_f64(g)).requires_grad_()
    out = torch.nn.functional.grid_sample(xt, gt, mode, padding, align)
    (out * torch.from_numpy(as_f64(w))).sum().backward()
    return out.detach(), xt.grad, gt.grad


def check_numpy_call(x, g, w, mode="bilinear", padding="zeros", align=False, **kwargs):
    """grid_sample and grid_sample_backward on NumPy (x, g, w) match torch."""
    name = np.dtype(x.dtype).name
    out = gridsampler.grid_sample(x, g, mode, padding, align, **kwargs)
    dx, dgrid = gridsampler.grid_sample_backward(w, x, g, mode, padding, align, **kwargs)
    ref = torch_reference(x, g, w, mode, padding, align)
    for got, want, what in zip((out, dx, dgrid), ref, ("out", "dx", "dgrid")):
        close(got, want, name, what)


# ---------------------------------------------------------------------------

def run(names):
    """Runs the named cases in order, reporting each as JSON lines on stdout."""
    for name in names:
        fn, env = CASES[name]
        print(json.dumps({"case": name, "started": True}), flush=True)
        outcome = {"case": name, "ok": True}
        try:
            if any(os.environ.get(k) != v for k, v in env.items()):
                raise Skip(f"needs the environment {env}")
            fn()
        except Skip as e:
            outcome = {"case": name, "skip": str(e)}
        except Exception as e:  # noqa: BLE001
            tb = traceback.format_exc(limit=-3)
            outcome = {"case": name, "ok": False, "why": f"{type(e).__name__}: {e}\n{tb}"}
        print(json.dumps(outcome), flush=True)
