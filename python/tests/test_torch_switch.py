"""The switch (gridsampler.torch.enable()): F.grid_sample on CPU tensors runs
gridsampler under PyTorch's own autograd, torch.func, hooks and anomaly mode;
what it does not take stays PyTorch's; GRIDSAMPLER_TORCH=1 turns it on at
`import torch`."""

import json
import os
import subprocess
import sys
import textwrap
import warnings

import pytest

from conftest import MODES, PADDINGS
from test_torch import CASE_IDS, CASES, assert_near, make_problem, with_layout

# The volume counts, zero in this file (volumes: test_volumes.py).
NO_3D = {"grid_sampler_3d": 0, "grid_sampler_3d_backward": 0}


@pytest.fixture
def switch_on(gt):
    gt.enable()
    gt.switch_stats(reset=True)
    yield gt
    gt.disable()


def grads(torch, op, x, g, w, **kwargs):
    """out, d(sum(out * w))/dx, d/dg through autograd (None for what does not require grad)."""
    out = op(x, g, **kwargs)
    wanted = [t for t in (x, g) if t.requires_grad]
    got = iter(torch.autograd.grad(out, wanted, w))
    return (out.detach(), (next(got) if x.requires_grad else None),
            (next(got) if g.requires_grad else None))


@pytest.mark.parametrize("layout", ["contiguous", "channels_last"])
@pytest.mark.parametrize("dtype_name", ["float32", "float64"])
@pytest.mark.parametrize("mode,padding,align", CASES, ids=CASE_IDS)
def test_switch_gives_gridsamplers_bits(torch, gt, mode, padding, align, dtype_name, layout):
    """On: F.grid_sample's output and both gradients are bit for bit what the
    library computes when called directly. Off again: PyTorch's bits again."""
    import gridsampler

    F = torch.nn.functional
    dtype = getattr(torch, dtype_name)
    x, g, w = make_problem(torch, dtype, seed=20)
    x = with_layout(torch, x, layout).requires_grad_()
    g = with_layout(torch, g, layout).requires_grad_()
    kwargs = dict(mode=mode, padding_mode=padding, align_corners=align)
    before = grads(torch, F.grid_sample, x, g, w, **kwargs)

    with gt.switch():
        gt.switch_stats(reset=True)
        on = grads(torch, F.grid_sample, x, g, w, **kwargs)
        stats = gt.switch_stats()
    assert stats == {**NO_3D, "grid_sampler_2d": 1, "grid_sampler_2d_backward": 1, "double_backward": 0, "handed_on": 0}
    direct_out = gridsampler.grid_sample(x.detach(), g.detach(), mode, padding, align)
    direct_dx, direct_dg = gridsampler.grid_sample_backward(w, x.detach(), g.detach(), mode,
                                                            padding, align)
    for got, want in zip(on, (direct_out, direct_dx, direct_dg)):
        assert got.dtype == dtype and torch.equal(got, want)
        assert got.is_contiguous()  # PyTorch's kernel allocates contiguous results too
    for got, ref, name in zip(on, before, ("output", "dx", "dgrid")):
        assert_near(got, ref, {"float32": 2e-5, "float64": 1e-12}[dtype_name], name)

    after = grads(torch, F.grid_sample, x, g, w, **kwargs)
    assert gt.switch_stats()["grid_sampler_2d"] == 1  # not counted: PyTorch's kernel ran
    for got, ref in zip(after, before):
        assert torch.equal(got, ref)


@pytest.mark.parametrize("dtype_name", ["float16", "bfloat16"])
def test_switch_low_precision(torch, switch_on, dtype_name):
    """float16/bfloat16, which PyTorch's CPU kernel also takes: gridsampler's
    bits (computed in float32, rounded once)."""
    import gridsampler

    gt = switch_on
    dtype = getattr(torch, dtype_name)
    x, g, w = make_problem(torch, dtype, seed=21)
    x.requires_grad_()
    g.requires_grad_()
    out, dx, dg = grads(torch, torch.nn.functional.grid_sample, x, g, w, mode="bicubic",
                        padding_mode="reflection", align_corners=False)
    assert gt.switch_stats()["grid_sampler_2d_backward"] == 1
    assert torch.equal(out, gridsampler.grid_sample(x.detach(), g.detach(), "bicubic",
                                                    "reflection", False))
    want_dx, want_dg = gridsampler.grid_sample_backward(w, x.detach(), g.detach(), "bicubic",
                                                        "reflection", False)
    assert torch.equal(dx, want_dx) and torch.equal(dg, want_dg)


@pytest.mark.parametrize("mask", [(True, False), (False, True)])
def test_switch_output_mask(torch, switch_on, mask):
    """One input requiring grad: autograd gets that gradient right; called
    directly, the kernel returns what PyTorch's returns (grad_input None when
    not asked, grad_grid always)."""
    gt = switch_on
    F = torch.nn.functional
    x, g, w = make_problem(torch, torch.float64, seed=22)
    x.requires_grad_(mask[0])
    g.requires_grad_(mask[1])
    _, dx, dg = grads(torch, F.grid_sample, x, g, w, mode="bilinear", padding_mode="border",
                      align_corners=True)
    with gt.switch(False):
        _, rdx, rdg = grads(torch, F.grid_sample, x, g, w, mode="bilinear",
                            padding_mode="border", align_corners=True)
    for got, ref in ((dx, rdx), (dg, rdg)):
        assert (got is None) == (ref is None)
        if ref is not None:
            assert_near(got, ref, 1e-12, "gradient")
    op = torch.ops.aten.grid_sampler_2d_backward
    ours = op(w, x.detach(), g.detach(), 0, 1, True, list(mask))
    with gt.switch(False):
        ref = op(w, x.detach(), g.detach(), 0, 1, True, list(mask))
    assert gt.switch_stats()["grid_sampler_2d_backward"] == 2
    for got, want in zip(ours, ref):
        assert (got is None) == (want is None)
        if want is not None:
            assert got.shape == want.shape and got.stride() == want.stride()
            assert_near(got, want, 1e-12, "direct")


@pytest.mark.parametrize("mode", MODES)
def test_double_backward(torch, gt, mode):
    """Second order through the switch: gridsampler's native double backward as the
    derivative of its first-order backward, equal to PyTorch's within float64 rounding."""
    F = torch.nn.functional
    x0, g0, w = make_problem(torch, torch.float64, seed=23)

    def second_order():
        x, g = x0.clone().requires_grad_(), g0.clone().requires_grad_()
        out = F.grid_sample(x, g, mode=mode, padding_mode="zeros", align_corners=False)
        dx, dg = torch.autograd.grad((out * w).sum(), (x, g), create_graph=True)
        # Nearest's grid gradient is zero, with no graph behind it.
        return torch.autograd.grad((dx * dx).sum() + (dg.sin()).sum(), (x, g), allow_unused=True,
                                   materialize_grads=True)

    ref = second_order()
    with gt.switch():
        gt.switch_stats(reset=True)
        ours = second_order()
        stats = gt.switch_stats()
    # The first-order backward, then gridsampler's native double backward as
    # its derivative on CPU.
    assert stats == {**NO_3D, "grid_sampler_2d": 1, "grid_sampler_2d_backward": 1, "double_backward": 1,
                     "handed_on": 0}
    for got, want, name in zip(ours, ref, ("d2/dx", "d2/dgrid")):
        assert_near(got, want, 1e-11, name)


def test_gradgradcheck_through_switch(torch, switch_on):
    x, g, _ = make_problem(torch, torch.float64, seed=24, shape=(1, 2, 4, 5, 3, 3), spread=1.1)
    x.requires_grad_()
    g.requires_grad_()
    F = torch.nn.functional
    assert torch.autograd.gradgradcheck(
        lambda x, g: F.grid_sample(x, g, "bilinear", "border", False), (x, g),
        eps=1e-6, atol=1e-6)
    assert switch_on.switch_stats()["grid_sampler_2d_backward"] > 0


def test_torch_func(torch, gt):
    """torch.func.grad, vmap (over an extra batch dimension), jvp and jacrev:
    the same results on and off, and the switch ran under each."""
    from torch import func

    F = torch.nn.functional
    x, g, w = make_problem(torch, torch.float64, seed=25)
    xs = torch.stack([x, 2 * x, -x])  # vmap over a leading dimension
    gs = torch.stack([g, 0.5 * g, g.flip(1)])

    def loss(x, g):
        return (F.grid_sample(x, g, "bicubic", "border", True) * w).sum()

    def evaluate():
        return {
            "grad": func.grad(loss, argnums=(0, 1))(x, g),
            "vmap": func.vmap(lambda a, b: F.grid_sample(a, b, "bilinear", "zeros", False))(xs, gs),
            "vmap_grad": func.vmap(func.grad(loss, argnums=1))(xs, gs),
            "jvp": func.jvp(loss, (x, g), (torch.ones_like(x), torch.ones_like(g)))[1],
            "jacrev": func.jacrev(
                lambda g: F.grid_sample(x[:1, :1], g, "bilinear", "reflection", False))(g[:1]),
        }

    ref = evaluate()
    with gt.switch():
        gt.switch_stats(reset=True)
        ours = evaluate()
        stats = gt.switch_stats()
    assert stats["grid_sampler_2d"] >= 5 and stats["grid_sampler_2d_backward"] >= 3
    for name in ref:
        want = ref[name] if isinstance(ref[name], tuple) else (ref[name],)
        got = ours[name] if isinstance(ours[name], tuple) else (ours[name],)
        for a, b in zip(got, want):
            assert_near(a, b, 1e-12, name)


@pytest.mark.filterwarnings("ignore:Anomaly Detection has been enabled")
def test_hooks_anomaly_mode_and_no_grad(torch, switch_on):
    gt = switch_on
    F = torch.nn.functional
    x, g, w = make_problem(torch, torch.float64, seed=26)
    x.requires_grad_()
    g.requires_grad_()
    seen = []
    g.register_hook(lambda grad: seen.append(grad.clone()) or grad * 2)
    with torch.autograd.detect_anomaly():
        (F.grid_sample(x, g, "bilinear", "zeros", False) * w).sum().backward()
    assert len(seen) == 1 and torch.equal(g.grad, 2 * seen[0])
    # Anomaly mode names PyTorch's backward node when it returns NaN; so here.
    g.grad = None
    out = F.grid_sample(x, g, "bilinear", "zeros", False)
    with warnings.catch_warnings(), torch.autograd.detect_anomaly(), pytest.raises(
            RuntimeError, match="Function 'GridSampler2DBackward0' returned nan values"):
        warnings.simplefilter("ignore")  # anomaly mode's own report of the same
        out.backward(torch.full_like(out, float("nan")))
    stats = gt.switch_stats()
    assert stats["grid_sampler_2d_backward"] == 2 and stats["handed_on"] == 0
    with torch.no_grad():
        out = F.grid_sample(x, g, "nearest", "border", False)
    with torch.inference_mode():
        out_inf = F.grid_sample(x, g, "nearest", "border", False)
    assert not out.requires_grad and torch.equal(out, out_inf)
    assert gt.switch_stats()["grid_sampler_2d"] == 4


HANDED_ON = {
    # Calls gridsampler does not take, through F.grid_sample or aten directly.
    "dtype_mix": lambda t: t.nn.functional.grid_sample(
        t.zeros(2, 3, 5, 7), t.zeros(2, 4, 6, 2, dtype=t.float64), align_corners=False),
    "int_dtype": lambda t: t.nn.functional.grid_sample(
        t.zeros(2, 3, 5, 7, dtype=t.int64), t.zeros(2, 4, 6, 2, dtype=t.int64),
        align_corners=False),
    "empty_hw": lambda t: t.nn.functional.grid_sample(
        t.zeros(2, 3, 0, 7), t.zeros(2, 4, 6, 2), align_corners=False),
    "grid_last_dim": lambda t: t.ops.aten.grid_sampler_2d(
        t.zeros(2, 3, 5, 7), t.zeros(2, 4, 6, 3), 0, 0, False),
    "batch": lambda t: t.ops.aten.grid_sampler_2d(
        t.zeros(2, 3, 5, 7), t.zeros(3, 4, 6, 2), 0, 0, False),
    "grad_shape": lambda t: t.ops.aten.grid_sampler_2d_backward(
        t.zeros(2, 3, 4, 5), t.zeros(2, 3, 5, 7), t.zeros(2, 4, 6, 2), 0, 0, False, [True, True]),
    "grad_dtype": lambda t: t.ops.aten.grid_sampler_2d_backward(
        t.zeros(2, 3, 4, 6, dtype=t.float64), t.zeros(2, 3, 5, 7), t.zeros(2, 4, 6, 2), 0, 0,
        False, [True, True]),
    # float32 data one byte into a buffer: PyTorch computes, the library
    # refuses misaligned data, so the switch hands it on.
    "misaligned": lambda t: t.nn.functional.grid_sample(
        t.frombuffer(bytearray(4 * 70 + 1), dtype=t.float32, count=70, offset=1).view(1, 2, 5, 7),
        t.full((1, 2, 3, 2), 0.3), align_corners=False),
    # An integer code outside PyTorch's three: PyTorch's kernel returns a
    # tensor without computing its values (uninitialized memory); so must the
    # switch, by handing it on. Compared by shape only.
    "mode_code_3": lambda t: t.ops.aten.grid_sampler_2d(
        t.arange(70.0).reshape(1, 2, 5, 7), t.full((1, 2, 3, 2), 0.3), 3, 0, False),
    "padding_code_5": lambda t: t.ops.aten.grid_sampler_2d(
        t.arange(70.0).reshape(1, 2, 5, 7), t.full((1, 2, 3, 2), 1.3), 0, 5, True),
}


@pytest.mark.parametrize("case", sorted(HANDED_ON))
def test_calls_not_taken_are_pytorchs(torch, gt, case):
    """What gridsampler does not take reaches PyTorch's kernel: the same
    exception and message, or the same result."""
    call = HANDED_ON[case]

    def outcome():
        try:
            return "result", call(torch)
        except Exception as e:  # noqa: BLE001 - compared below
            return "error", (type(e), str(e))

    ref = outcome()
    with gt.switch():
        gt.switch_stats(reset=True)
        ours = outcome()
        stats = gt.switch_stats()
    assert stats == {**NO_3D, "grid_sampler_2d": 0, "grid_sampler_2d_backward": 0, "double_backward": 0, "handed_on": 1}
    assert ours[0] == ref[0]
    if ref[0] == "error":
        assert ours[1] == ref[1]
    elif case.endswith("_code_3") or case.endswith("_code_5"):
        assert ours[1].shape == ref[1].shape and ours[1].dtype == ref[1].dtype
    else:
        assert torch.equal(ours[1], ref[1])


def test_enable_disable_idempotent_and_nested(torch, gt):
    F = torch.nn.functional
    x, g, _ = make_problem(torch, torch.float32, seed=27)
    assert not gt.is_enabled()
    gt.enable()
    gt.enable()
    assert gt.is_enabled()
    with gt.switch(False):
        assert not gt.is_enabled()
        with gt.switch():
            assert gt.is_enabled()
        assert not gt.is_enabled()
    assert gt.is_enabled()
    gt.switch_stats(reset=True)
    F.grid_sample(x, g, align_corners=False)
    gt.disable()
    gt.disable()
    F.grid_sample(x, g, align_corners=False)
    assert gt.switch_stats(reset=True)["grid_sampler_2d"] == 1
    assert gt.switch_stats() == {**NO_3D, "grid_sampler_2d": 0, "grid_sampler_2d_backward": 0,
                                 "double_backward": 0, "handed_on": 0}
    # The context manager restores the state after an exception too.
    with pytest.raises(KeyError):
        with gt.switch():
            raise KeyError
    assert not gt.is_enabled()


def test_device_context_and_autocast(torch, switch_on):
    """`with torch.device("meta")` leaves a CPU call on the CPU, as it does for
    PyTorch's kernel; CPU autocast casts to float32 before the switch computes."""
    gt = switch_on
    F = torch.nn.functional
    x, g, _ = make_problem(torch, torch.float32, seed=28)
    with torch.device("meta"):
        out = F.grid_sample(x, g, align_corners=True)
    assert out.device.type == "cpu"
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out_ac = F.grid_sample(x.bfloat16(), g.bfloat16(), align_corners=True)
    assert out_ac.dtype == torch.float32
    assert torch.equal(out_ac, F.grid_sample(x.bfloat16().float(), g.bfloat16().float(),
                                             align_corners=True))
    assert gt.switch_stats()["grid_sampler_2d"] == 3


def test_torch_compile_what_reaches_the_switch(torch, gt):
    """torch.compile: the aot_eager backend keeps both aten operators, so both
    reach the switch; Inductor decomposes the forward into its own loops and
    keeps the backward as a call of the operator (a fallback), so only the
    backward does. (python/benchmarks/compile_switch.py measures the costs.)"""
    F = torch.nn.functional
    x0, g0, w = make_problem(torch, torch.float32, seed=29)

    def f(x, g):
        return (F.grid_sample(x, g, "bilinear", "border", False) * w).sum()

    def run(fn):
        x, g = x0.clone().requires_grad_(), g0.clone().requires_grad_()
        loss = fn(x, g)
        loss.backward()
        return loss.detach(), x.grad, g.grad

    ref = run(f)
    counts = {}
    for backend in ("aot_eager", "inductor"):
        torch._dynamo.reset()
        compiled = torch.compile(f, backend=backend, fullgraph=True)
        with gt.switch():
            gt.switch_stats(reset=True)
            got = run(compiled)
            counts[backend] = gt.switch_stats()
        for a, b in zip(got, ref):
            assert_near(a, b, 2e-5, backend)
    torch._dynamo.reset()
    assert counts["aot_eager"] == {**NO_3D, "grid_sampler_2d": 1, "grid_sampler_2d_backward": 1,
                                   "double_backward": 0, "handed_on": 0}
    assert counts["inductor"] == {**NO_3D, "grid_sampler_2d": 0, "grid_sampler_2d_backward": 1,
                                  "double_backward": 0, "handed_on": 0}


# The child never imports gridsampler: it reaches the switch's counters, if
# the entry point loaded it, through sys.modules only.
CHILD = textwrap.dedent("""
    import json, sys
    import torch
    import torch.nn.functional as F
    gen = torch.Generator().manual_seed(30)
    x = torch.randn(2, 3, 9, 8, generator=gen, requires_grad=True)
    g = (torch.rand(2, 5, 4, 2, generator=gen) * 2.2 - 1.1).requires_grad_()
    w = torch.randn(2, 3, 5, 4, generator=gen)
    out = F.grid_sample(x, g, mode="bicubic", padding_mode="reflection", align_corners=False)
    dx, dg = torch.autograd.grad(out, (x, g), w)
    torch.save({"x": x.detach(), "g": g.detach(), "w": w, "out": out.detach(), "dx": dx,
                "dg": dg}, sys.argv[2])
    switch = sys.modules.get("gridsampler._switch")
    print(json.dumps({"loaded": switch is not None,
                      "enabled": switch is not None and switch.is_enabled(),
                      "stats": switch.switch_stats() if switch is not None else None}))
""")


@pytest.mark.parametrize("env", [{"GRIDSAMPLER_TORCH": "1"}, {"GRIDSAMPLER_TORCH": "0"},
                                 {"GRIDSAMPLER_TORCH": "yes"},
                                 {"GRIDSAMPLER_TORCH": "1", "TORCH_DEVICE_BACKEND_AUTOLOAD": "0"}],
                         ids=["on", "zero", "bad_value", "autoload_off"])
def test_environment_variable(torch, gt, tmp_path, env):
    """GRIDSAMPLER_TORCH=1 turns the switch on at `import torch` (torch's
    `torch.backends` entry points) in a program that never imports gridsampler;
    0 leaves PyTorch's kernel; another value warns and leaves it; torch's
    TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns off all entry points, this one too."""
    import gridsampler

    expect_on = env == {"GRIDSAMPLER_TORCH": "1"}
    child_env = {k: v for k, v in os.environ.items()
                 if k not in ("GRIDSAMPLER_TORCH", "TORCH_DEVICE_BACKEND_AUTOLOAD")}
    child_env.update(env)
    saved = tmp_path / "results.pt"
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, "expect_on" if expect_on else "expect_off", str(saved)],
        env=child_env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["enabled"] == expect_on
    if env.get("GRIDSAMPLER_TORCH") == "yes":
        assert "GRIDSAMPLER_TORCH='yes': expected 1 (on) or 0 (off)" in proc.stderr
    r = torch.load(saved)
    direct = (gridsampler.grid_sample(r["x"], r["g"], "bicubic", "reflection", False),
              *gridsampler.grid_sample_backward(r["w"], r["x"], r["g"], "bicubic", "reflection",
                                                False))
    pytorch = grads(torch, torch.nn.functional.grid_sample, r["x"].requires_grad_(),
                    r["g"].requires_grad_(), r["w"], mode="bicubic", padding_mode="reflection",
                    align_corners=False)
    want = direct if expect_on else pytorch
    for name, w in zip(("out", "dx", "dg"), want):
        assert torch.equal(r[name], w), name
    if expect_on:
        assert report["stats"] == {**NO_3D, "grid_sampler_2d": 1, "grid_sampler_2d_backward": 1,
                                   "double_backward": 0, "handed_on": 0}
        # ... and those are not PyTorch's bits (else this test could not tell).
        assert not all(torch.equal(r[n], p) for n, p in zip(("out", "dx", "dg"), pytorch))


def test_broken_gridsampler_leaves_torch_importable(torch, tmp_path):
    """torch fails its own import when an entry point raises: with
    GRIDSAMPLER_TORCH=1 and a gridsampler that does not import (a stand-in
    package shadows the installed one here), `import torch` still works, with
    a warning, and PyTorch's kernel runs."""
    fake = tmp_path / "gridsampler"
    fake.mkdir()
    (fake / "__init__.py").write_text("raise ImportError('a broken gridsampler install')\n")
    env = {k: v for k, v in os.environ.items() if k != "TORCH_DEVICE_BACKEND_AUTOLOAD"}
    env["GRIDSAMPLER_TORCH"] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tmp_path), env.get("PYTHONPATH")) if p)
    child = ("import torch, torch.nn.functional as F\n"
             "print(F.grid_sample(torch.ones(1, 1, 2, 2), torch.zeros(1, 1, 1, 2),"
             " align_corners=True).item())\n")
    proc = subprocess.run([sys.executable, "-c", child], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "1.0"
    assert "a broken gridsampler install" in proc.stderr
    assert "PyTorch's run instead" in proc.stderr
