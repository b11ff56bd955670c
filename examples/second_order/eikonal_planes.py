"""An eikonal penalty on feature planes, trained through a gradient of a gradient.

A neural field stores features on planes; f(p) = head . grid_sample(planes, p)
is the field at points p. The eikonal loss mean((|df/dp| - 1)^2) asks the
field to be a distance function: |grad f| = 1. Its gradient with respect to
the planes needs the derivative of df/dp (grid_sample's backward) with
respect to the planes: grid_sample's double backward.

The same training runs twice from the same start, with PyTorch's
F.grid_sample and with gridsampler.torch.grid_sample, and prints both losses
per step; they agree to float32 rounding.

    python examples/second_order/eikonal_planes.py [--steps 8 --channels 16 --size 64 --points 8192]
"""

import argparse
import time

import torch
import torch.nn.functional as F

import gridsampler.torch as gst


def train(sample, steps, channels, size, points, seed=0, lr=2.0):
    gen = torch.Generator().manual_seed(seed)
    planes = (0.1 * torch.randn(3, channels, size, size, generator=gen)).requires_grad_()
    head = torch.randn(channels, generator=gen) / channels ** 0.5
    # Plain SGD: the two runs then differ by float32 rounding only (Adam
    # normalises each gradient, so it would magnify differences in the
    # near-zero gradients of planes the points barely touch).
    opt = torch.optim.SGD([planes], lr=lr)
    losses = []
    for _ in range(steps):
        p = (torch.rand(3, 1, points, 2, generator=gen) * 2 - 1).requires_grad_()
        feat = sample(planes, p, mode="bilinear", padding_mode="border", align_corners=True)
        f = torch.einsum("nckp,c->nkp", feat, head)
        (df,) = torch.autograd.grad(f.sum(), p, create_graph=True)
        loss = ((df.norm(dim=-1) - 1) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, planes.detach()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--channels", type=int, default=16)
    ap.add_argument("--size", type=int, default=64)
    ap.add_argument("--points", type=int, default=8192)
    args = ap.parse_args()
    runs = {}
    for name, sample in (("pytorch", F.grid_sample), ("gridsampler", gst.grid_sample)):
        t0 = time.perf_counter()
        runs[name] = train(sample, args.steps, args.channels, args.size, args.points)
        print(f"{name:12s} {time.perf_counter() - t0:6.2f} s")
    print(f"{'step':>4s} {'pytorch loss':>14s} {'gridsampler loss':>17s}")
    for i, (a, b) in enumerate(zip(runs["pytorch"][0], runs["gridsampler"][0])):
        print(f"{i:4d} {a:14.6f} {b:17.6f}")
    diff = (runs["pytorch"][1] - runs["gridsampler"][1]).abs().max().item()
    print(f"max |planes difference| after training: {diff:.2e}")
    first, last = runs["gridsampler"][0][0], runs["gridsampler"][0][-1]
    ok = last < first and diff < 1e-3
    print("loss falls and both agree" if ok else "MISMATCH")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
