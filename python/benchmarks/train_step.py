"""End-to-end speed of a CPU training step: gridsampler.torch.grid_sample vs F.grid_sample.

The step: a small conv net computes features and a flow field from an image,
the features are warped by grid_sample at (identity + flow), an MSE loss
against a target, backward (gradients flow into both grid_sample inputs), and
an SGD update. The two variants run interleaved (ABAB...) on the same data
and weights; the script checks that they give the same loss and gradients and
prints median times, plus the grid_sample forward+backward alone.

    python python/benchmarks/train_step.py [--batch 8 --channels 32 --size 96 --steps 20]
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import gridsampler.torch as gt


class Warper(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, channels, 3, padding=1), torch.nn.ReLU(),
            torch.nn.Conv2d(channels, channels, 3, padding=1))
        self.flow = torch.nn.Conv2d(channels, 2, 3, padding=1)

    def forward(self, image, base, sample, mode, padding):
        feat = self.features(image)
        grid = base + 0.05 * torch.tanh(self.flow(feat)).permute(0, 2, 3, 1)
        return sample(feat, grid, mode=mode, padding_mode=padding, align_corners=False)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--channels", type=int, default=32)
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")
    ap.add_argument("--mode", default="bilinear")
    ap.add_argument("--padding", default="border")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    n, c, s = args.batch, args.channels, args.size
    image = torch.randn(n, 3, s, s)
    target = torch.randn(n, c, s, s)
    theta = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).expand(n, 2, 3)
    base = F.affine_grid(theta, (n, c, s, s), align_corners=False)
    init = Warper(c).state_dict()
    variants = {"F.grid_sample": F.grid_sample, "gridsampler": gt.grid_sample}
    models = {}
    for name in variants:
        models[name] = Warper(c)
        models[name].load_state_dict(init)

    def step(name):
        model = models[name]
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        t0 = time.perf_counter()
        loss = F.mse_loss(model(image, base, variants[name], args.mode, args.padding), target)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grads = [p.grad.clone() for p in model.parameters()]
        opt.step()
        return time.perf_counter() - t0, loss.item(), grads

    # Same loss and gradients on the first step (from identical weights).
    _, loss_a, grads_a = step("F.grid_sample")
    _, loss_b, grads_b = step("gridsampler")
    max_rel = max(float((a - b).abs().max() / a.abs().max().clamp_min(1e-30))
                  for a, b in zip(grads_a, grads_b))
    print(f"loss F.grid_sample {loss_a:.9g}  gridsampler {loss_b:.9g}  "
          f"max relative gradient difference {max_rel:.2e}")

    times = {name: [] for name in variants}
    for i in range(args.warmup + args.steps):
        for name in (variants if i % 2 == 0 else reversed(list(variants))):
            t = step(name)[0]
            if i >= args.warmup:
                times[name].append(t)

    # grid_sample forward + backward alone, on the same shapes.
    feat = torch.randn(n, c, s, s, requires_grad=True)
    grid = (base + 0.05 * torch.randn(n, s, s, 2)).requires_grad_()
    grad_out = torch.randn(n, c, s, s)
    op_times = {name: [] for name in variants}
    for i in range(args.warmup + args.steps):
        for name, fn in variants.items():
            t0 = time.perf_counter()
            out = fn(feat, grid, mode=args.mode, padding_mode=args.padding, align_corners=False)
            torch.autograd.grad(out, (feat, grid), grad_out)
            if i >= args.warmup:
                op_times[name].append(time.perf_counter() - t0)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; input ({n}, {c}, {s}, "
          f"{s}), grid ({n}, {s}, {s}, 2), {args.mode}/{args.padding}; medians of "
          f"{args.steps} runs")
    ref_step = statistics.median(times["F.grid_sample"])
    ref_op = statistics.median(op_times["F.grid_sample"])
    for name in variants:
        st, ot = statistics.median(times[name]), statistics.median(op_times[name])
        print(f"  {name:14s} training step {st * 1e3:8.1f} ms ({st / ref_step:4.2f}x)   "
              f"grid_sample fwd+bwd {ot * 1e3:8.1f} ms ({ot / ref_op:4.2f}x)")


if __name__ == "__main__":
    main()
