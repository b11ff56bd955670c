"""A spatial-transformer classifier trained with DistributedDataParallel on the
CPU (gloo), with gridsampler as PyTorch's grid_sample kernel.

The model never mentions gridsampler: it calls F.grid_sample, and each process
turns the switch on (``gridsampler.torch.enable()``; ``GRIDSAMPLER_TORCH=1`` in
the environment does the same at ``import torch``). DDP averages the
gradients of the processes' halves of each global batch, so one step equals a
single process's step on the whole batch; ``--check`` verifies that on the
first step (rank 0 also runs the single-process model) and prints a JSON
summary line.

    python examples/pytorch_ddp/train_stn.py               # spawns 2 processes
    torchrun --nproc-per-node 2 examples/pytorch_ddp/train_stn.py

Data: generated 16x16 images of four shapes (horizontal bar, vertical bar,
square outline, cross), each shifted, rotated and scaled at random and with
noise; nothing is downloaded.
"""

import argparse
import json
import math
import os
import sys
import tempfile

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

import gridsampler.torch as gt

SIZE = 16
CLASSES = 4


def make_data(count, seed):
    """Images (count, 1, SIZE, SIZE) and labels: a canonical shape per class,
    warped by a random similarity transform, plus noise."""
    gen = torch.Generator().manual_seed(seed)
    base = torch.zeros(CLASSES, 1, SIZE, SIZE)
    c = SIZE // 2
    base[0, 0, c - 1:c + 1, 3:-3] = 1  # horizontal bar
    base[1, 0, 3:-3, c - 1:c + 1] = 1  # vertical bar
    base[2, 0, 4:-4, 4:-4] = 1  # square outline
    base[2, 0, 6:-6, 6:-6] = 0
    base[3, 0, c - 1:c + 1, 4:-4] = 1  # cross
    base[3, 0, 4:-4, c - 1:c + 1] = 1
    labels = torch.randint(0, CLASSES, (count,), generator=gen)
    angle = (torch.rand(count, generator=gen) - 0.5) * (math.pi / 3)
    scale = 0.8 + 0.4 * torch.rand(count, generator=gen)
    shift = (torch.rand(count, 2, generator=gen) - 0.5) * 0.6
    theta = torch.zeros(count, 2, 3)
    theta[:, 0, 0] = scale * torch.cos(angle)
    theta[:, 0, 1] = -scale * torch.sin(angle)
    theta[:, 1, 0] = scale * torch.sin(angle)
    theta[:, 1, 1] = scale * torch.cos(angle)
    theta[:, :, 2] = shift
    grid = F.affine_grid(theta, (count, 1, SIZE, SIZE), align_corners=False)
    images = F.grid_sample(base[labels], grid, align_corners=False)
    images = images + 0.1 * torch.randn(images.shape, generator=gen)
    return images, labels


class SpatialTransformerNet(torch.nn.Module):
    """A localization net predicts an affine transform (starting at identity);
    the image is resampled by it (F.grid_sample) and then classified."""

    def __init__(self):
        super().__init__()
        self.localization = torch.nn.Sequential(
            torch.nn.Conv2d(1, 8, 5, padding=2), torch.nn.MaxPool2d(2), torch.nn.ReLU(),
            torch.nn.Conv2d(8, 8, 3, padding=1), torch.nn.MaxPool2d(2), torch.nn.ReLU(),
            torch.nn.Flatten(), torch.nn.Linear(8 * (SIZE // 4) ** 2, 32), torch.nn.ReLU(),
            torch.nn.Linear(32, 6))
        with torch.no_grad():  # identity transform at start
            self.localization[-1].weight.zero_()
            self.localization[-1].bias.copy_(torch.tensor([1.0, 0, 0, 0, 1.0, 0]))
        self.classifier = torch.nn.Sequential(
            torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(16 * (SIZE // 4) ** 2, CLASSES))

    def forward(self, x):
        theta = self.localization(x).view(-1, 2, 3)
        grid = F.affine_grid(theta, x.shape, align_corners=False)
        x = F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=False)
        return self.classifier(x)


def make_model(seed):
    torch.manual_seed(seed)
    return SpatialTransformerNet()


def flat_grads(model):
    return torch.cat([p.grad.reshape(-1) for p in model.parameters()])


def train(rank, world, args, init_method):
    torch.set_num_threads(args.threads)
    dist.init_process_group("gloo", init_method=init_method, rank=rank, world_size=world)
    gt.enable()
    gt.switch_stats(reset=True)
    images, labels = make_data(args.batch * args.steps, seed=args.seed)
    per_rank = args.batch // world
    model = DistributedDataParallel(make_model(args.seed))
    opt = torch.optim.Adam(model.parameters(), lr=args.lr)
    summary = {"world": world, "losses": []}
    for step in range(args.steps):
        batch = slice(step * args.batch, (step + 1) * args.batch)
        x, y = images[batch], labels[batch]
        mine = slice(rank * per_rank, (rank + 1) * per_rank)
        loss = F.cross_entropy(model(x[mine]), y[mine])
        opt.zero_grad(set_to_none=True)
        loss.backward()  # DDP all-reduces (averages) the gradients here
        if step == 0 and args.check and rank == 0:
            # The same first step in one process on the whole global batch.
            single = make_model(args.seed)
            F.cross_entropy(single(x), y).backward()
            ddp_g, one_g = flat_grads(model.module), flat_grads(single)
            summary["grad_max_abs"] = float(one_g.abs().max())
            summary["grad_max_diff"] = float((ddp_g - one_g).abs().max())
        opt.step()
        # The global batch's loss: the mean of the ranks' means (equal halves).
        global_loss = loss.detach().clone()
        dist.all_reduce(global_loss)
        summary["losses"].append(float(global_loss) / world)
    stats = torch.tensor([gt.switch_stats()[k] for k in
                          ("grid_sampler_2d", "grid_sampler_2d_backward", "handed_on")])
    gathered = [torch.zeros_like(stats) for _ in range(world)]
    dist.all_gather(gathered, stats)
    summary["switch_stats_per_rank"] = [s.tolist() for s in gathered]
    if rank == 0:
        print(json.dumps(summary), flush=True)
        for i, v in enumerate(summary["losses"]):
            print(f"step {i}: loss {v:.4f}", file=sys.stderr, flush=True)
    # Tear down together: gloo's background threads may abort a process whose
    # peer closed its connections first, so every rank waits here for the
    # others, drops what holds the group (DDP's reducer), then destroys it.
    dist.barrier()
    del model, opt
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--batch", type=int, default=64, help="global batch size")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1, help="torch threads per process")
    ap.add_argument("--check", action="store_true",
                    help="compare the first step's gradients with one process's")
    args = ap.parse_args()
    if "RANK" in os.environ:  # started by torchrun
        world = int(os.environ["WORLD_SIZE"])
        assert args.batch % world == 0, "the global batch must split evenly"
        train(int(os.environ["RANK"]), world, args, "env://")
        return
    world = args.world_size
    assert args.batch % world == 0, "the global batch must split evenly"
    with tempfile.TemporaryDirectory() as tmp:
        # A file rendezvous: no port to pick or collide on.
        init = "file://" + os.path.join(tmp, "rendezvous")
        mp.spawn(train, args=(world, args, init), nprocs=world, join=True)


if __name__ == "__main__":
    main()
