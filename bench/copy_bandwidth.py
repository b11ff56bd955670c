#!/usr/bin/env python3
"""The machine's copy bandwidth: the one yardstick for the GB/s that
`gridsampler bench` and bench/compare_torch.py report (bytes of every input
and output once each over the time).

memcpy of one buffer into another, counting the bytes read plus the bytes
written, over the best of 20 repetitions, with the threads splitting the
buffer between them. Sizes: buffers that only DRAM holds (64 MiB and 256 MiB:
on the 2-core EPYC of docs/performance.md, with its 32 MiB L3, two threads
copy 64 MiB about three times as fast as one, 256 MiB not at all, so both are
shown) and cache-resident ones whose source and destination together fit in
L1 (16 KiB), L2 (256 KiB) and L3 (8 MiB) of most x86 server cores.
bench/copy_bandwidth.c does the copying; it is compiled here with `cc -O2
-fopenmp` into a temporary folder on each use, so nothing is built in
advance.

    python3 bench/copy_bandwidth.py [--threads 1,2] [--sizes 16K,256K,8M,64M,256M]

As a module: measure(threads, sizes) -> {bytes: GB/s}; summary(threads) ->
one line for a table header.
"""
import argparse
import os
import subprocess
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_SIZES = [16 << 10, 256 << 10, 8 << 20, 64 << 20, 256 << 20]


def size_label(n):
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def parse_size(text):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().rstrip("IB")
    return int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)


def measure(threads=1, sizes=DEFAULT_SIZES, cc="cc"):
    """GB/s (read + write bytes / best time) of memcpy for each buffer size,
    the buffer split between `threads` threads."""
    with tempfile.TemporaryDirectory(prefix="copybw_") as tmp:
        exe = os.path.join(tmp, "copy_bandwidth")
        subprocess.run([cc, "-O2", "-fopenmp", os.path.join(HERE, "copy_bandwidth.c"), "-o", exe], check=True)
        out = subprocess.run([exe, str(threads)] + [str(s) for s in sizes], check=True, capture_output=True,
                             text=True).stdout
    result = {}
    for line in out.splitlines():
        n, gbps = line.split()
        result[int(n)] = float(gbps)
    return result


def summary(threads=1, sizes=DEFAULT_SIZES):
    """'memcpy GB/s (read+write, best of 20), 1 thread: 64 MiB 13.1, ...'"""
    bw = measure(threads, sizes)
    parts = ", ".join(f"{size_label(n)} {bw[n]:.1f}" for n in sorted(bw, reverse=True))
    return f"memcpy GB/s (read+write bytes / best of 20), {threads} thread{'s' if threads > 1 else ''}: {parts}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--sizes", default="16K,256K,8M,64M,256M")
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    for t in (int(t) for t in args.threads.split(",")):
        print(summary(t, sizes))


if __name__ == "__main__":
    main()
