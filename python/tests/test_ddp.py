"""DistributedDataParallel over gloo, 2 processes on this machine, switch on:
examples/pytorch_ddp/train_stn.py trains a spatial-transformer classifier.
The first step's gradients equal one process's on the same global batch
(float32 rounding), the loss falls, and both ranks ran gridsampler."""

import json
import pathlib
import subprocess
import sys
import warnings

import pytest

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch_ddp" / "train_stn.py"


def run_example(steps):
    return subprocess.run(
        [sys.executable, "-X", "faulthandler", str(EXAMPLE), "--check", "--world-size", "2", "--batch", "64",
         "--steps", str(steps), "--threads", "1"],
        capture_output=True, text=True, timeout=300)


def test_ddp_spatial_transformer(torch, gt):
    steps = 8
    proc = run_example(steps)
    if proc.returncode != 0 and "terminated with signal" in proc.stderr:
        # A rank killed by a signal is retried once, with what it printed
        # kept as a warning: a crash in gloo's teardown (after training) has
        # been seen once in CI and not reproduced; a real crash repeats.
        first = proc.stderr[-6000:]
        proc = run_example(steps)
        if proc.returncode == 0:
            warnings.warn(f"the DDP example died by a signal once, then passed; stderr ended:\n{first}")
    if proc.returncode != 0:  # the whole tail: an assertion's repr would elide its middle
        pytest.fail(f"exit status {proc.returncode}; stderr ends:\n{proc.stderr[-6000:]}", pytrace=False)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["world"] == 2
    # Averaged over the ranks' halves = the whole batch in one process, up to
    # the order of float32 additions.
    assert summary["grad_max_abs"] > 0
    assert summary["grad_max_diff"] <= 1e-5 * summary["grad_max_abs"]
    losses = summary["losses"]
    assert len(losses) == steps
    assert losses[0] > 1.3  # four balanced classes, identity transform: about ln 4
    assert losses[-1] < losses[0] - 0.05
    # Every rank's forward and backward of every step went through gridsampler
    # (rank 0 also ran the single-process check and each rank made the data).
    for forward, backward, handed_on in summary["switch_stats_per_rank"]:
        assert forward >= steps and backward >= steps and handed_on == 0
