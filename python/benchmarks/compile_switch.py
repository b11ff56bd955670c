"""torch.compile and the switch: what runs, and what it costs.

A training step of the flow-warp model (switch_train_step.py's FlowWarp:
conv features, a predicted flow, F.grid_sample, MSE, backward, SGD) in five
variants, run interleaved on the same data and weights:

  eager        off / on   the switch decides F.grid_sample's kernel
  inductor     off / on   torch.compile(model), default backend, one compiled
                          model for both: Inductor decomposes the forward
                          aten.grid_sampler_2d into its own generated loop and
                          keeps the backward as a call of the operator, which
                          the switch then serves
  inductor + gridsampler.torch.grid_sample (the custom operator, opaque to
                          Inductor: gridsampler forward and backward)

For each it prints the first (compiling) step's time, the median step, and
which kernels ran, from the switch's counters.

    python python/benchmarks/compile_switch.py [--steps 15 --threads 1]
"""

import argparse
import statistics
import time

import torch
import torch.nn.functional as F

import gridsampler.torch as gt
from switch_train_step import FlowWarp


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--channels", type=int, default=16)
    ap.add_argument("--size", type=int, default=96)
    ap.add_argument("--steps", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave as is)")
    ap.add_argument("--mode", default="bilinear")
    ap.add_argument("--padding", default="border")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    n, c, s = args.batch, args.channels, args.size
    gen = torch.Generator().manual_seed(0)
    image = torch.randn(n, 3, s, s, generator=gen)
    target = torch.randn(n, c, s, s, generator=gen)

    torch.manual_seed(1)
    init = FlowWarp(c, s).state_dict()

    def make(sample=F.grid_sample):
        m = FlowWarp(c, s, sample)
        m.load_state_dict(init)
        return m

    eager, inductor, explicit = make(), make(), make(gt.grid_sample)
    variants = {  # name: (model to call, optimizer's model, switch on)
        "eager, switch off": (eager, eager, False),
        "eager, switch on": (eager, eager, True),
        "inductor, switch off": (torch.compile(inductor), inductor, False),
        "inductor, switch on": (torch.compile(inductor), inductor, True),
        "inductor + gt.grid_sample": (torch.compile(explicit), explicit, False),
    }
    # Variants sharing a model share its weights: reset before each step so
    # all see the same weights (SGD's update is part of the timed step).
    opts = {name: torch.optim.SGD(v[1].parameters(), lr=1e-3) for name, v in variants.items()}

    def step(name):
        call, model, on = variants[name]
        model.load_state_dict(init)
        with gt.switch(on):
            gt.switch_stats(reset=True)
            t0 = time.perf_counter()
            loss = F.mse_loss(call(image, args.mode, args.padding), target)
            opts[name].zero_grad(set_to_none=True)
            loss.backward()
            opts[name].step()
            elapsed = time.perf_counter() - t0
            return elapsed, loss.item(), gt.switch_stats(reset=True)

    first, losses, stats = {}, {}, {}
    for name in variants:
        first[name], losses[name], _ = step(name)
    times = {name: [] for name in variants}
    names = list(variants)
    for i in range(args.warmup + args.steps):
        for name in (names if i % 2 == 0 else names[::-1]):
            t, _, stats[name] = step(name)
            if i >= args.warmup:
                times[name].append(t)

    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; input ({n}, {c}, {s}, "
          f"{s}), {args.mode}/{args.padding}; medians of {args.steps} steps, interleaved")
    ref = statistics.median(times["eager, switch off"])
    print(f"{'variant':27s} {'first step':>11s} {'median':>9s} {'vs eager off':>13s}   "
          f"{'forward by':24s} {'backward by':24s} loss")
    for name in variants:
        med = statistics.median(times[name])
        compiled = name.startswith("inductor")
        if name.endswith("gt.grid_sample"):
            fwd = bwd = "gridsampler (custom op)"
        else:
            # The switch's counters say whether its kernels served the step.
            fwd = ("gridsampler (switch)" if stats[name]["grid_sampler_2d"] else
                   "Inductor's code" if compiled else "PyTorch")
            bwd = "gridsampler (switch)" if stats[name]["grid_sampler_2d_backward"] else "PyTorch"
        print(f"{name:27s} {first[name]:9.2f} s {med * 1e3:6.1f} ms {med / ref:12.2f}x   "
              f"{fwd:24s} {bwd:24s} {losses[name]:.7g}")

if __name__ == "__main__":
    main()
