#!/usr/bin/env python3
"""How much faster gridsampler runs on 2 threads than on 1 (or any two thread
counts), on bench/compare_torch.py's table of cases (CASES).

For each case the two thread counts are timed in turns, `--rounds` times, with
`gridsampler bench` (each a median of `--reps` calls), so that the machine's
drift affects both alike. Prints, per case, the median time of each thread
count, the ratio of those medians, and the per-round ratios (sorted), which
show how much a single round can mislead on a shared machine. No torch needed.

    python3 bench/thread_scaling.py [--cli build/tools/gridsampler]
        [--threads 1,2] [--reps 10] [--rounds 7] [--op backward|forward]
"""
import argparse
import statistics

from compare_torch import CASES, case_label, default_cli, ours_median_ms


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cli", default=default_cli())
    ap.add_argument("--threads", default="1,2", help="two thread counts, fewer first")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--op", choices=["backward", "forward"], default="backward")
    args = ap.parse_args()
    few, many = (int(t) for t in args.threads.split(","))

    print(f"{args.op}; {few} vs {many} threads; medians of {args.rounds} rounds x {args.reps} reps\n")
    print(f"| case (N,C,Hin,Win,Hout,Wout mode padding align dtype) | {few}T ms | {many}T ms | ratio | per-round ratios |")
    print("|---|---:|---:|---:|---|")
    for shape, mode, pad, align, dtype in CASES:
        a, b = [], []
        for _ in range(args.rounds):
            a.append(ours_median_ms(args.cli, shape, mode, pad, align, dtype, few, args.reps, args.op)[0])
            b.append(ours_median_ms(args.cli, shape, mode, pad, align, dtype, many, args.reps, args.op)[0])
        ma, mb = statistics.median(a), statistics.median(b)
        rounds = " ".join(f"{x / y:.2f}" for x, y in sorted(zip(a, b), key=lambda p: p[0] / p[1]))
        print(f"| {case_label(shape, mode, pad, align, dtype)} | {ma:.2f} | {mb:.2f} | {ma / mb:.2f}x | {rounds} |",
              flush=True)


if __name__ == "__main__":
    main()
