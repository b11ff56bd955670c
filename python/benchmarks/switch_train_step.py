"""Training steps of unchanged client code with the switch off and on.

Each workload is a small model whose warp is a third-party call that ends in
F.grid_sample: kornia's warp_affine and warp_perspective (a localization net
predicts the matrix), MONAI's Warp (a conv net predicts a displacement field,
registration-style), and a plain F.grid_sample flow warp (the model of
train_step.py). A step: forward, loss, backward (gradients reach the sampled
input and, through the grid, the predicting net), SGD update.

Off and on run interleaved (off-on, on-off, ...) from the same weights on the
same data; the script checks that the first step's loss and gradients agree,
that every grid_sample of the "on" steps went through the switch, and prints
median step times, the median of the rounds' on/off ratios (each round runs
both back to back), and the time a step spends in the two
grid_sample operators (profiled separately, "gs off" / "gs on").

    python python/benchmarks/switch_train_step.py [--steps 15 --batch 8 --size 96]
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import gridsampler.torch as gt


def conv_net(cin, cout, width=16):
    return torch.nn.Sequential(
        torch.nn.Conv2d(cin, width, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(width, width, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(width, cout, 3, padding=1))


class MatrixWarp(torch.nn.Module):
    """Predicts a matrix (affine 2x3 or perspective 3x3, near identity) per
    image from pooled features and warps the features with kornia."""

    def __init__(self, channels, size, perspective):
        super().__init__()
        import kornia.geometry.transform as kt

        self.kt = kt
        self.perspective = perspective
        self.size = size
        self.features = conv_net(3, channels)
        self.head = torch.nn.Linear(channels, 8 if perspective else 6)
        torch.nn.init.zeros_(self.head.bias)
        torch.nn.init.normal_(self.head.weight, std=1e-3)

    def forward(self, image, mode, padding):
        feat = self.features(image)
        delta = self.head(feat.mean((2, 3)))
        n = image.shape[0]
        if self.perspective:
            m = torch.eye(3).expand(n, 3, 3) + F.pad(delta, (0, 1)).view(n, 3, 3)
            return self.kt.warp_perspective(feat, m, (self.size, self.size), mode=mode,
                                            padding_mode=padding, align_corners=True)
        s = self.size / 2  # translations in pixels
        m = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).expand(n, 2, 3) + \
            delta.view(n, 2, 3) * torch.tensor([[1.0, 1.0, s], [1.0, 1.0, s]])
        return self.kt.warp_affine(feat, m, (self.size, self.size), mode=mode,
                                   padding_mode=padding, align_corners=True)


class MonaiRegistration(torch.nn.Module):
    """Predicts a displacement field from (moving, fixed) and warps the moving
    image with MONAI's Warp."""

    def __init__(self, channels, mode, padding):
        super().__init__()
        from monai.networks.blocks import Warp

        self.ddf = conv_net(2 * channels, 2)
        self.warp = Warp(mode=mode, padding_mode=padding)

    def forward(self, moving, fixed):
        ddf = 2.0 * torch.tanh(self.ddf(torch.cat([moving, fixed], 1)))
        return self.warp(moving, ddf)


class FlowWarp(torch.nn.Module):
    """train_step.py's model: features and a flow from a conv net, the
    features warped by F.grid_sample at identity + flow."""

    def __init__(self, channels, size, sample=F.grid_sample):
        super().__init__()
        self.sample = sample
        self.features = conv_net(3, channels)
        self.flow = torch.nn.Conv2d(channels, 2, 3, padding=1)
        theta = torch.tensor([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]).unsqueeze(0)
        self.register_buffer("base", F.affine_grid(theta, (1, 1, size, size), align_corners=False))

    def forward(self, image, mode, padding):
        feat = self.features(image)
        grid = self.base + 0.05 * torch.tanh(self.flow(feat)).permute(0, 2, 3, 1)
        return self.sample(feat, grid, mode=mode, padding_mode=padding, align_corners=False)


def sampler_ms(step, rounds=3):
    """Milliseconds a step spends in aten::grid_sampler_2d and its backward,
    whichever kernel runs them: the median over a few steps run under a
    dispatch mode that times those two operators (kept out of the timed steps,
    since every operator then passes through Python)."""
    from torch.utils._python_dispatch import TorchDispatchMode

    ops = (torch.ops.aten.grid_sampler_2d.default, torch.ops.aten.grid_sampler_2d_backward.default)

    class Timer(TorchDispatchMode):
        total = 0.0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            t0 = time.perf_counter()
            out = func(*args, **(kwargs or {}))
            if func in ops:
                Timer.total += time.perf_counter() - t0
            return out

    totals = []
    for _ in range(rounds):
        Timer.total = 0.0
        with Timer():
            step()
        totals.append(Timer.total)
    return statistics.median(totals) * 1e3


def workloads(args):
    n, c, s = args.batch, args.channels, args.size
    gen = torch.Generator().manual_seed(0)
    image = torch.randn(n, 3, s, s, generator=gen)
    target = torch.randn(n, c, s, s, generator=gen)
    moving = torch.rand(n, c, s, s, generator=gen)
    fixed = torch.rand(n, c, s, s, generator=gen)
    mode, padding = args.mode, args.padding
    out = {
        "kornia warp_affine": (lambda: MatrixWarp(c, s, perspective=False),
                               lambda m: F.mse_loss(m(image, mode, padding), target)),
        "kornia warp_perspective": (lambda: MatrixWarp(c, s, perspective=True),
                                    lambda m: F.mse_loss(m(image, mode, padding), target)),
        "MONAI Warp": (lambda: MonaiRegistration(c, mode, padding),
                       lambda m: F.mse_loss(m(moving, fixed), fixed)),
        "F.grid_sample flow warp": (lambda: FlowWarp(c, s),
                                    lambda m: F.mse_loss(m(image, mode, padding), target)),
    }
    return {k: v for k, v in out.items() if not args.only or any(o in k for o in args.only)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--channels", type=int, default=16)
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--steps", type=int, default=15, help="timed steps per variant")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")
    ap.add_argument("--mode", default="bilinear")
    ap.add_argument("--padding", default="border")
    ap.add_argument("--only", nargs="*", help="workloads whose name contains one of these")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; batch {args.batch}, "
          f"{args.channels} channels, {args.size}x{args.size}, {args.mode}/{args.padding}; "
          f"medians of {args.steps} steps per variant, off/on interleaved")
    print(f"{'workload':26s} {'off ms':>9s} {'on ms':>9s} {'on/off':>7s} {'gs off':>9s} "
          f"{'gs on':>9s}   first-step check")
    print(f"{'':26s} {'(step)':>9s} {'(step)':>9s} {'':>7s} {'ms':>9s} {'ms':>9s}")
    for name, (make, loss_fn) in workloads(args).items():
        torch.manual_seed(1)
        init = make().state_dict()
        models = {}
        for on in (False, True):
            models[on] = make()
            models[on].load_state_dict(init)
        opts = {on: torch.optim.SGD(models[on].parameters(), lr=1e-3) for on in models}

        def step(on):
            with gt.switch(on):
                t0 = time.perf_counter()
                loss = loss_fn(models[on])
                opts[on].zero_grad(set_to_none=True)
                loss.backward()
                grads = [p.grad.clone() for p in models[on].parameters()]
                opts[on].step()
                return time.perf_counter() - t0, loss.item(), grads

        _, loss_off, grads_off = step(False)
        gt.switch_stats(reset=True)
        _, loss_on, grads_on = step(True)
        stats = gt.switch_stats(reset=True)
        assert stats["grid_sampler_2d"] >= 1 and stats["grid_sampler_2d_backward"] >= 1, stats
        assert stats["handed_on"] == 0, stats
        rel = max(float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))
                  for a, b in zip(grads_on, grads_off))
        times = {False: [], True: []}
        for i in range(args.warmup + args.steps):
            for on in ((False, True) if i % 2 == 0 else (True, False)):
                t = step(on)[0]
                if i >= args.warmup:
                    times[on].append(t)
        off, on = statistics.median(times[False]), statistics.median(times[True])
        # Each round's on/off pair ran back to back: the median of their
        # ratios is less at the mercy of the load drifting between rounds.
        paired = statistics.median(a / b for a, b in zip(times[True], times[False]))
        sampler = {on: sampler_ms(lambda: step(on)) for on in (False, True)}
        print(f"{name:26s} {off * 1e3:9.1f} {on * 1e3:9.1f} {paired:7.2f} "
              f"{sampler[False]:9.1f} {sampler[True]:9.1f}   loss {loss_off:.7g} vs "
              f"{loss_on:.7g}, gradients within {rel:.1e} (relative)", flush=True)


if __name__ == "__main__":
    main()
