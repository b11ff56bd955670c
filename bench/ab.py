#!/usr/bin/env python3
"""A/B checks between two builds of gridsampler (an OLD and a NEW one), for
refactors that must keep the same bits and the same speed.

    /usr/bin/python3 bench/ab.py bits --old OLD_BUILD --new NEW_BUILD
        [--src-old DIR] [--src-new DIR] [--targets AVX3,AVX2,SCALAR]
        [--filter SUBSTRING] [--workdir DIR]

  Compiles bench/ab_bits.cpp against each build's libgridsampler.so (headers
  from that build's source tree: --src-*, by default the tree its
  CMakeCache.txt names; g++ -O2 -std=c++20, RPATH to the build, checked with
  ldd), runs both under every SIMD target that both libraries contain and this
  CPU runs (GRIDSAMPLER_SIMD_TARGET=<hwy::TargetName>: AVX3, AVX2 and the
  baseline, SCALAR with Debian's Highway 1.0.3 and GCC < 12.3, else EMU128;
  read from the N_<target> namespaces in the libraries' symbols), and diffs
  the "<case> <hash>" lines. Both sides use this checkout's ab_bits.cpp. Also
  says how many lines differ between targets within one build (which shows
  the forced target took effect; the library ignores names it does not know)
  and whether the layout, thread-count and mask variants of a case agree, as
  the API promises. Exit status 1 when any line differs or is missing, 2 on a
  setup error.

    /usr/bin/python3 bench/ab.py callgrind --old OLD_CLI --new NEW_CLI
        [--cases SUBSTRING [--cases ...]] [--ops forward,backward]
        [--target AVX2] [--tolerance 1.0] [--quick]

  Counts instructions (Ir) of `<cli> bench ... --threads 1` under
  `valgrind --tool=callgrind`, for each case and op, with
  GRIDSAMPLER_SIMD_TARGET=AVX2 (valgrind has no AVX-512). The bench makes its
  random data, calls once to warm up, then --reps times; so each side runs with
  --reps 1 and --reps R (--calls, default 3) and the table's per-call Ir is
  (Ir(R) - Ir(1)) / (R - 1),
  which leaves out the data generation and the first call's one-time set-up.
  Total Ir at --reps 1 is shown beside it. Flags per-call ratios outside
  +-tolerance percent; also lists which Highway namespaces (N_AVX2, ...) the
  profile saw, to show the forced target took effect.

    /usr/bin/python3 bench/ab.py time --old OLD_CLI --new NEW_CLI
        [--rounds 11] [--threads 1,2] [--reps 10] [--cases ...] [--ops ...]
        [--target NAME] [--tolerance 5.0] [--quick]

  Times `<cli> bench ... --reps R` (its JSON line's median_ms), old and new in
  turns with the order swapped every round (old-new, new-old, ...), for each
  case, op and thread count; reports the median over rounds of each side, the
  ratio new/old, and flags ratios beyond +-tolerance percent.

Cases (callgrind, time): bench/compare_torch.py's CASES, plus a 1-channel
shape and a tiny-output shape, each forward and backward. --cases keeps the
cases whose label ("N,C,Hin,Win,Hout,Wout mode padding align dtype op", e.g.
"512,1,32,32,32,32 bilinear zeros false f32 backward") contains one of the
substrings. --quick is a smoke run: the 1-channel case only (unless --cases),
and for `time` 3 rounds of 3 reps at 1 thread (unless given).

Example, a build of HEAD~1 against the working tree:
    git worktree add /tmp/old HEAD~1 && cmake -S /tmp/old -B /tmp/build-old \\
        -DCMAKE_BUILD_TYPE=Release && cmake --build /tmp/build-old -j
    /usr/bin/python3 bench/ab.py bits --old /tmp/build-old --new build
    /usr/bin/python3 bench/ab.py callgrind --old /tmp/build-old/tools/gridsampler \\
        --new build/tools/gridsampler
    /usr/bin/python3 bench/ab.py time --old /tmp/build-old/tools/gridsampler \\
        --new build/tools/gridsampler
"""
import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from compare_torch import CASES as TORCH_CASES  # noqa: E402  (stdlib only at import time)
from compare_torch import case_label  # noqa: E402

EXTRA_CASES = [
    ((512, 1, 32, 32, 32, 32), "bilinear", "zeros", False, "f32"),  # one channel: planar plans
    ((4096, 1, 32, 48, 7, 7), "bilinear", "zeros", True, "f32"),  # many tiny outputs: per-call overheads
]
ALL_CASES = list(TORCH_CASES) + EXTRA_CASES
QUICK_CASE = EXTRA_CASES[0]

# CPU flags (/proc/cpuinfo) each Highway x86 target needs; targets not listed
# (EMU128, SCALAR, SSE2) run on any x86-64.
TARGET_FLAGS = {
    "SSSE3": {"ssse3"},
    "SSE4": {"ssse3", "sse4_1", "sse4_2", "pclmulqdq", "aes"},
    "AVX2": {"avx", "avx2", "fma", "bmi1", "bmi2", "f16c", "abm"},  # abm: Linux's name for LZCNT
    "AVX3": {"avx2", "fma", "bmi2", "f16c", "avx512f", "avx512vl", "avx512dq", "avx512bw"},
    "AVX3_DL": {"avx512f", "avx512vl", "avx512dq", "avx512bw", "avx512_vnni", "avx512_vbmi2", "vpclmulqdq",
                "vaes", "avx512_bitalg", "avx512_vpopcntdq"},
}
# Best first, the order Highway's bits give (lower bit = better target).
TARGET_ORDER = ["AVX3_DL", "AVX3", "AVX2", "SSE4", "SSSE3", "SSE2", "EMU128", "SCALAR"]


class SetupError(Exception):
    pass


def run(cmd, env=None, **kw):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, **kw)


def env_with(**extra):
    env = dict(os.environ)
    for k, v in extra.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


# ---------------------------------------------------------------------------
# bits

def cmake_source_dir(build):
    cache = os.path.join(build, "CMakeCache.txt")
    try:
        with open(cache) as f:
            for line in f:
                if line.startswith("CMAKE_HOME_DIRECTORY:"):
                    return line.split("=", 1)[1].strip()
    except OSError:
        pass
    raise SetupError(f"{build}: no CMakeCache.txt naming the source tree; pass --src-old/--src-new")


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def compiled_targets(lib):
    """Highway targets compiled into `lib`: its kernels live in namespaces
    N_<TargetName> (hwy::TargetName spells the same names), which the symbol
    table keeps unless the library was stripped."""
    out = run(["nm", "-C", lib])
    names = set(re.findall(r"\bN_([A-Z0-9_]+)::", out.stdout))
    return {n for n in names if n in TARGET_ORDER}


def usable_targets(libs):
    flags = cpu_flags()
    per_lib = [compiled_targets(lib) for lib in libs]
    if not all(per_lib):
        raise SetupError("cannot read the Highway targets from the libraries' symbols (stripped?); "
                         "pass --targets")
    common = set.intersection(*per_lib)
    runnable = [t for t in TARGET_ORDER if t in common and TARGET_FLAGS.get(t, set()) <= flags]
    return runnable, per_lib


def build_ab_bits(build, src, out_path):
    lib = os.path.join(build, "libgridsampler.so")
    if not os.path.exists(lib):
        raise SetupError(f"{lib} does not exist")
    include = os.path.join(src, "include")
    if not os.path.exists(os.path.join(include, "gridsampler", "gridsampler.hpp")):
        raise SetupError(f"{include}/gridsampler/gridsampler.hpp does not exist")
    build = os.path.abspath(build)
    # RPATH (not RUNPATH) so that LD_LIBRARY_PATH cannot swap the library.
    cmd = ["g++", "-O2", "-std=c++20", os.path.join(HERE, "ab_bits.cpp"), "-I", include, "-L", build,
           "-lgridsampler", f"-Wl,-rpath,{build}", "-Wl,--disable-new-dtags", "-o", out_path]
    r = run(cmd)
    if r.returncode != 0:
        raise SetupError(f"compiling against {build} failed:\n{' '.join(cmd)}\n{r.stderr}")
    ldd = run(["ldd", out_path]).stdout
    m = re.search(r"libgridsampler\.so\S*\s*=>\s*(\S+)", ldd)
    if not m or os.path.realpath(m.group(1)) != os.path.realpath(lib):
        raise SetupError(f"{out_path} does not load {lib}:\n{ldd}")
    return os.path.realpath(lib)


def read_lines(path):
    result = {}
    with open(path) as f:
        for line in f:
            label, _, value = line.rstrip("\n").rpartition(" ")
            if label:
                result[label] = value
    return result


def cmd_bits(args):
    work = args.workdir or tempfile.mkdtemp(prefix="ab_bits.")
    os.makedirs(work, exist_ok=True)
    src = {"old": args.src_old or cmake_source_dir(args.old), "new": args.src_new or cmake_source_dir(args.new)}
    builds = {"old": args.old, "new": args.new}
    exe, libs = {}, {}
    for side in ("old", "new"):
        exe[side] = os.path.join(work, f"ab_bits_{side}")
        libs[side] = build_ab_bits(builds[side], src[side], exe[side])
        print(f"{side}: {libs[side]} (headers {src[side]}/include)")
    if libs["old"] == libs["new"]:
        print("note: old and new are the same library (a dry run: everything must be identical)")

    r = run([exe["old"], "--selftest"])
    print(r.stdout.strip())
    if r.returncode != 0:
        raise SetupError("ab_bits --selftest failed (16-bit conversions):\n" + r.stderr)

    if args.targets:
        targets = args.targets.split(",")
        # An unknown name would silently run the best target instead.
        per_lib = [compiled_targets(lib) for lib in (libs["old"], libs["new"])]
        for t in targets:
            if all(per_lib) and not all(t in names for names in per_lib):
                raise SetupError(f"--targets: {t} is not compiled into both libraries "
                                 f"(old {sorted(per_lib[0])}, new {sorted(per_lib[1])})")
    else:
        targets, per_lib = usable_targets([libs["old"], libs["new"]])
        print("targets compiled in: old " + ",".join(t for t in TARGET_ORDER if t in per_lib[0]) +
              "; new " + ",".join(t for t in TARGET_ORDER if t in per_lib[1]) +
              "; run on this CPU: " + ",".join(targets))
    if not targets:
        raise SetupError("no SIMD target to run")

    extra = ["--filter", args.filter] if args.filter else []
    failed = False
    outputs = {}
    print()
    print("| target | lines | identical | different | only old | only new | ERR lines | old s | new s |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for target in targets:
        # Passive waiting: on a busy machine spinning OpenMP workers make the
        # 2-thread cases many times slower; the bits do not depend on it.
        env = env_with(GRIDSAMPLER_SIMD_TARGET=target,
                       OMP_WAIT_POLICY=os.environ.get("OMP_WAIT_POLICY", "passive"))
        seconds = {}
        for side in ("old", "new"):
            path = os.path.join(work, f"{side}.{target}.txt")
            t0 = time.monotonic()
            with open(path, "w") as f:
                r = subprocess.run([exe[side]] + extra, env=env, stdout=f, stderr=subprocess.PIPE, text=True)
            seconds[side] = time.monotonic() - t0
            if r.returncode != 0:
                raise SetupError(f"{exe[side]} under {target} exited with {r.returncode}:\n{r.stderr}")
            outputs[(side, target)] = read_lines(path)
        old, new = outputs[("old", target)], outputs[("new", target)]
        same = sum(1 for k, v in old.items() if new.get(k) == v)
        diff = [k for k, v in old.items() if k in new and new[k] != v]
        only_old = [k for k in old if k not in new]
        only_new = [k for k in new if k not in old]
        errs = sum(1 for v in list(old.values()) + list(new.values()) if v.startswith("ERR"))
        if diff or only_old or only_new or not old:
            failed = True
        print(f"| {target} | {len(old)} | {same} | {len(diff)} | {len(only_old)} | {len(only_new)} | {errs} | "
              f"{seconds['old']:.1f} | {seconds['new']:.1f} |", flush=True)
        for k in (diff[:args.show] + only_old[:args.show] + only_new[:args.show]):
            print(f"    {target}: {k}: old {old.get(k, '-')} new {new.get(k, '-')}")

    # The same build under two targets: lines that differ show that the
    # forced target took effect (the library falls back to the best target
    # when it does not know the name); all equal is possible too, when the
    # targets agree bit for bit.
    print()
    for side in ("old", "new"):
        base = outputs[(side, targets[0])]
        for target in targets[1:]:
            other = outputs[(side, target)]
            n = sum(1 for k, v in base.items() if other.get(k) != v)
            print(f"{side}: {targets[0]} vs {target}: {n} of {len(base)} lines differ")
    # The API promises the same bits for every layout, thread count and mask;
    # ab_bits gives those variants the same data, so their lines must agree.
    for side in ("old", "new"):
        lines = outputs[(side, targets[0])]
        broken = {}
        for label, value in lines.items():
            for a, b, what in ((" nchw ", " nhwc ", "layout"), (" t1 ", " t2 ", "threads"),
                               ("mask=both dx", "mask=dx dx", "mask"), ("mask=both dgrid", "mask=dgrid dgrid", "mask")):
                if a in label and lines.get(label.replace(a, b), value) != value:
                    broken[what] = broken.get(what, 0) + 1
        print(f"{side} under {targets[0]}: layout/threads/mask variants "
              + (", ".join(f"{k}: {v} differ" for k, v in broken.items()) if broken else "all agree"))
    print(f"\noutputs in {work}")
    print("RESULT: " + ("DIFFERENT" if failed else "all identical"))
    return 1 if failed else 0


# ---------------------------------------------------------------------------
# Cases for callgrind and time

def select_cases(args, quick_default):
    cases = [(c, op) for c in ALL_CASES for op in args.ops.split(",")]
    if args.cases:
        cases = [(c, op) for c, op in cases if any(s in f"{case_label(*c)} {op}" for s in args.cases)]
    elif args.quick and quick_default:
        cases = [(c, op) for c, op in cases if c == QUICK_CASE]
    if not cases:
        raise SetupError("no case matches --cases")
    return cases


def bench_cmd(cli, case, op, threads, reps):
    shape, mode, pad, align, dtype = case
    cmd = [cli, "bench", "--shape", ",".join(map(str, shape)), "--op", op, "--mode", mode, "--padding", pad,
           "--dtype", dtype, "--threads", str(threads), "--reps", str(reps)]
    if align:
        cmd.append("--align-corners")
    return cmd


def check_cli(path):
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        raise SetupError(f"{path} is not an executable")
    return os.path.abspath(path)


# ---------------------------------------------------------------------------
# callgrind

def callgrind_ir(cli, case, op, reps, target, work):
    out = os.path.join(work, f"cg.{os.getpid()}.{time.monotonic_ns()}.out")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + bench_cmd(cli, case, op, 1, reps)
    r = run(cmd, env=env_with(GRIDSAMPLER_SIMD_TARGET=target, OMP_NUM_THREADS="1"))
    if r.returncode != 0:
        raise SetupError(f"{' '.join(cmd)} exited with {r.returncode}:\n{r.stderr[-3000:]}")
    total, spaces = None, set()
    with open(out) as f:
        for line in f:
            if line.startswith(("summary:", "totals:")):
                total = int(line.split()[1])
            elif line.startswith(("fn=", "cfn=")):
                spaces.update(re.findall(r"\bN_([A-Z0-9_]+)::", line))
    os.remove(out)
    if total is None:
        raise SetupError(f"no summary/totals line in the callgrind output of {' '.join(cmd)}")
    return total, spaces


def cmd_callgrind(args):
    if shutil.which("valgrind") is None:
        raise SetupError("valgrind not found")
    clis = {"old": check_cli(args.old), "new": check_cli(args.new)}
    cases = select_cases(args, quick_default=True)
    work = tempfile.mkdtemp(prefix="ab_callgrind.")
    hi = max(args.calls, 2)
    print(f"GRIDSAMPLER_SIMD_TARGET={args.target}, 1 thread; per call = (Ir at --reps {hi} - Ir at --reps 1) / {hi - 1} "
          f"(leaves out data generation and the warm-up call); flag: per-call ratio outside "
          f"+-{args.tolerance}%\n")
    print("| case | old Ir/call | new Ir/call | new/old | old Ir total (reps 1) | new Ir total (reps 1) | "
          "namespaces seen | flag |")
    print("|---|---:|---:|---:|---:|---:|---|---|")
    flagged = 0
    try:
        for case, op in cases:
            per_call, totals, seen = {}, {}, set()
            for side in ("old", "new"):
                ir1, s1 = callgrind_ir(clis[side], case, op, 1, args.target, work)
                ir3, s3 = callgrind_ir(clis[side], case, op, hi, args.target, work)
                per_call[side] = (ir3 - ir1) / (hi - 1)
                totals[side] = ir1
                seen |= s1 | s3
            ratio = per_call["new"] / per_call["old"] if per_call["old"] else float("nan")
            flag = ""
            if not abs(ratio - 1) * 100 <= args.tolerance:
                flag = "**OUTSIDE**"
                flagged += 1
            if seen and seen != {args.target}:
                flag += " **target?**"
            print(f"| {case_label(*case)} {op} | {per_call['old']:,.0f} | {per_call['new']:,.0f} | {ratio:.4f} | "
                  f"{totals['old']:,} | {totals['new']:,} | {','.join(sorted(seen)) or '-'} | {flag} |",
                  flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nRESULT: {flagged} of {len(cases)} cases outside +-{args.tolerance}%")
    return 1 if flagged else 0


# ---------------------------------------------------------------------------
# time

def bench_ms(cli, case, op, threads, reps, env):
    cmd = bench_cmd(cli, case, op, threads, reps)
    r = run(cmd, env=env)
    if r.returncode != 0:
        raise SetupError(f"{' '.join(cmd)} exited with {r.returncode}:\n{r.stderr}")
    return json.loads(r.stdout.strip().splitlines()[-1])["median_ms"]


def cmd_time(args):
    clis = {"old": check_cli(args.old), "new": check_cli(args.new)}
    cases = select_cases(args, quick_default=True)
    rounds = args.rounds if args.rounds is not None else (3 if args.quick else 11)
    reps = args.reps if args.reps is not None else (3 if args.quick else 10)
    threads = [int(t) for t in (args.threads or ("1" if args.quick else "1,2")).split(",")]
    env = env_with(GRIDSAMPLER_SIMD_TARGET=args.target) if args.target else dict(os.environ)
    print(f"{rounds} rounds, order swapped each round (old-new, new-old, ...); each run `bench --reps {reps}` "
          f"(its median); table: median over rounds; target {args.target or 'default'}; "
          f"flag: new/old outside +-{args.tolerance}%\n")
    print("| case | threads | old ms | new ms | new/old | old min-max | new min-max | flag |")
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    flagged, rows, ratios = 0, 0, []
    for case, op in cases:
        for t in threads:
            ms = {"old": [], "new": []}
            for r in range(rounds):
                for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
                    ms[side].append(bench_ms(clis[side], case, op, t, reps, env))
            mo, mn = statistics.median(ms["old"]), statistics.median(ms["new"])
            ratio = mn / mo
            ratios.append(ratio)
            rows += 1
            flag = ""
            if abs(ratio - 1) * 100 > args.tolerance:
                flag = "**slower**" if ratio > 1 else "**faster**"
                flagged += 1
            print(f"| {case_label(*case)} {op} | {t} | {mo:.3f} | {mn:.3f} | {ratio:.3f} | "
                  f"{min(ms['old']):.3f}-{max(ms['old']):.3f} | {min(ms['new']):.3f}-{max(ms['new']):.3f} | "
                  f"{flag} |", flush=True)
    geo = 1.0
    for v in ratios:
        geo *= v
    geo **= 1.0 / len(ratios)
    print(f"\nRESULT: geomean new/old {geo:.3f}; {flagged} of {rows} rows outside +-{args.tolerance}%")
    return 1 if flagged else 0


# ---------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)

    b = sub.add_parser("bits", help="same bits: hash sweep of two builds under each SIMD target")
    b.add_argument("--old", required=True, help="old build directory (holds libgridsampler.so)")
    b.add_argument("--new", required=True, help="new build directory")
    b.add_argument("--src-old", help="old source tree (default: from the build's CMakeCache.txt)")
    b.add_argument("--src-new", help="new source tree (default: from the build's CMakeCache.txt)")
    b.add_argument("--targets", help="comma-separated GRIDSAMPLER_SIMD_TARGET values (default: all usable)")
    b.add_argument("--filter", help="only ab_bits lines whose label contains this substring")
    b.add_argument("--workdir", help="where binaries and outputs go (default: a new temporary directory)")
    b.add_argument("--show", type=int, default=10, help="differing lines to print per target (default: 10)")

    for name, helptext in (("callgrind", "same instructions: Ir per call under callgrind"),
                           ("time", "same speed: interleaved wall-clock medians")):
        p = sub.add_parser(name, help=helptext)
        p.add_argument("--old", required=True, help="old CLI (build/tools/gridsampler)")
        p.add_argument("--new", required=True, help="new CLI")
        p.add_argument("--cases", action="append",
                       help="keep cases whose label contains this substring (repeatable; labels hold commas)")
        p.add_argument("--ops", default="forward,backward", help="forward,backward (default: both)")
        p.add_argument("--quick", action="store_true", help="smoke run: fewer cases (and rounds, for time)")
        if name == "callgrind":
            p.add_argument("--target", default="AVX2", help="GRIDSAMPLER_SIMD_TARGET (default: AVX2)")
            p.add_argument("--tolerance", type=float, default=1.0, help="percent (default: 1)")
            p.add_argument("--calls", type=int, default=3,
                           help="--reps of the second run; per call = difference / (calls - 1) (default: 3)")
        else:
            p.add_argument("--rounds", type=int, help="alternating rounds (default: 11; --quick 3)")
            p.add_argument("--reps", type=int, help="bench --reps per run (default: 10; --quick 3)")
            p.add_argument("--threads", help="comma-separated thread counts (default: 1,2; --quick 1)")
            p.add_argument("--target", help="GRIDSAMPLER_SIMD_TARGET (default: unset, the best target)")
            p.add_argument("--tolerance", type=float, default=5.0, help="percent (default: 5)")

    args = ap.parse_args()
    try:
        return {"bits": cmd_bits, "callgrind": cmd_callgrind, "time": cmd_time}[args.command](args)
    except SetupError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
