"""DistributedDataParallel over gloo, 2 processes on this machine, switch on:
examples/pytorch_ddp/train_stn.py trains a spatial-transformer classifier.
The first step's gradients equal one process's on the same global batch
(float32 rounding), the loss falls, and both ranks ran gridsampler."""

import json
import pathlib
import subprocess
import sys

EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "pytorch_ddp" / "train_stn.py"


def test_ddp_spatial_transformer(torch, gt):
    steps = 8
    proc = subprocess.run(
        [sys.executable, str(EXAMPLE), "--check", "--world-size", "2", "--batch", "64",
         "--steps", str(steps), "--threads", "1"],
        capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-3000:])
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
