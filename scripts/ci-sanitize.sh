#!/usr/bin/env bash
# Sanitizer and fuzzing CI. Three stages, each timed:
#
#   asan  The whole project and every test, built with clang and
#         AddressSanitizer + UndefinedBehaviorSanitizer (clang's "undefined"
#         includes float-cast-overflow, which GCC's does not) in build-asan,
#         run by ctest. The library is also compiled with libFuzzer's coverage
#         hooks (fuzzer-no-link), so that the fuzzers (fuzz/, which the root
#         CMakeLists.txt adds) come out of this same build.
#   tsan  The threaded tests under ThreadSanitizer, in build-tsan: clang,
#         LLVM's OpenMP runtime (libomp; GCC's libgomp is invisible to TSan)
#         and its Archer tool (libarcher.so), which tells TSan about OpenMP's
#         barriers, tasks and locks. TSAN_OPTIONS=ignore_noninstrumented_modules=1
#         silences what the uninstrumented libomp does internally.
#   fuzz  Replays the committed corpora and regressions, then runs each
#         libFuzzer target for GS_FUZZ_SECONDS (default 60) seconds.
#
# Environment: GS_SANITIZE_STAGES (default "asan tsan fuzz"), GS_FUZZ_SECONDS,
# GS_SANITIZE_SIMD (auto, avx2 or baseline; default auto), JOBS (default 2).
# Build folders are kept between runs (incremental); delete them to start over.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

JOBS=${JOBS:-2}
FUZZ_SECONDS=${GS_FUZZ_SECONDS:-60}
STAGES=${GS_SANITIZE_STAGES:-asan tsan fuzz}
CLANG_C=${CLANG_C:-clang-14}
CLANG_CXX=${CLANG_CXX:-clang++-14}
LLVM_LIB=${LLVM_LIB:-/usr/lib/llvm-14/lib}
LLVM_BIN=${LLVM_BIN:-/usr/lib/llvm-14/bin}

# Threaded tests run under TSan; the others test no threading and would
# only slow the stage down.
TSAN_TESTS=(threads_test kernel_vs_reference_test layout_test aclnn_test)
# Threaded cases of other programs, as pairs of target and ctest name
# pattern (the rest of those programs tests no threading).
TSAN_CASES=(double_backward_test 'double_backward_test\.DoubleBackward\.BitwiseIdentical'
            volume_kernels_test 'volume_kernels_test\.VolumeKernels\.ThreadCountsAreBitIdentical'
            volume_double_backward_test 'volume_double_backward_test\.VolumeDoubleBackward\.BitwiseIdentical'
            forward_copies_test 'forward_copies_test\..*(Volumes|bilinear_float32|bicubic_float64)'
            fused_tiles_test 'fused_tiles_test\..*/(bilinear_border_float32|bilinear_reflection_align_float64|bicubic_border_float32)')

# Nothing in the sanitizer builds is worth the time of the full SIMD target
# list or of the benchmarks. One target: AVX2 where this CPU has what
# Highway's AVX2 target needs (it ships, and it compiles in a third of the
# emulated baseline's time under the sanitizers), else the baseline.
simd_target=baseline
avx2_flags=(avx2 fma bmi1 bmi2 f16c abm pclmulqdq aes)
if [[ ${GS_SANITIZE_SIMD:-auto} == auto ]]; then
  simd_target=avx2
  for f in "${avx2_flags[@]}"; do
    grep -qw "$f" /proc/cpuinfo 2>/dev/null || simd_target=baseline
  done
else
  simd_target=$GS_SANITIZE_SIMD
fi
echo "ci-sanitize: SIMD target $simd_target"
# Line tables are all the sanitizers' reports use (file:line in each
# frame); full debug info cost 14% more compile time on a kernel file.
COMMON_CMAKE=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only"
              "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -gline-tables-only"
              -DGRIDSAMPLER_SIMD_TARGETS=$simd_target -DGRIDSAMPLER_BUILD_BENCH=OFF)

export ASAN_OPTIONS="detect_leaks=1:detect_stack_use_after_return=1:check_initialization_order=1:strict_init_order=1:abort_on_error=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# LLVM's libomp keeps a few team descriptors (1440 bytes each) allocated at
# exit after the thread count changes (threads_test: 1, 2, 3, 7 threads);
# LeakSanitizer reports them. They are libomp's own, so its allocations are
# not reported (the stack is not symbolized: the module is the only handle).
lsan_supp=$(mktemp)
trap 'rm -f "$lsan_supp"' EXIT
printf 'leak:libomp.so\n' >"$lsan_supp"
export LSAN_OPTIONS="report_objects=1:suppressions=$lsan_supp"
export ASAN_SYMBOLIZER_PATH="$LLVM_BIN/llvm-symbolizer"

bash scripts/install-deps.sh
# And what only this script needs: clang with libFuzzer and the sanitizer
# runtimes, LLVM's OpenMP with Archer, llvm-symbolizer.
missing=()
for p in clang-14 libclang-rt-14-dev libomp-14-dev llvm-14; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "ci-sanitize: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
command -v "$CLANG_CXX" >/dev/null || { echo "ci-sanitize: $CLANG_CXX is missing"; exit 1; }

timings=()
failed=()
stage() {  # stage NAME FUNCTION: runs and times one stage; a failure does not stop the others
  local name=$1 start end status=0
  echo "=== ci-sanitize: $name"
  start=$(date +%s)
  # In the background so that set -e holds inside (a "|| status=$?" would
  # switch it off for everything the stage runs).
  ( set -e; "$2" ) &
  wait $! || status=$?
  end=$(date +%s)
  if ((status == 0)); then
    timings+=("$name: passed in $((end - start)) s")
  else
    timings+=("$name: FAILED (status $status) after $((end - start)) s")
    failed+=("$name")
  fi
  echo "=== ci-sanitize: ${timings[-1]}"
}

# A build folder configured with another compiler is configured afresh.
configure() {  # configure SRC BUILD ARGS...
  local src=$1 build=$2
  shift 2
  if [[ -f $build/CMakeCache.txt ]] && ! grep -q "^CMAKE_CXX_COMPILER:[A-Z]*=.*$CLANG_CXX\$" "$build/CMakeCache.txt"; then
    echo "ci-sanitize: $build was configured with another compiler; starting it over"
    rm -rf "$build"
  fi
  CC=$CLANG_C CXX=$CLANG_CXX cmake -S "$src" -B "$build" "$@" >/dev/null
}

fuzz_in_root() { grep -Eq '^[[:space:]]*add_subdirectory\(fuzz\)' CMakeLists.txt; }

asan() {
  local extra=()
  fuzz_in_root && extra+=(-DGRIDSAMPLER_FUZZ=ON)
  configure . build-asan "${COMMON_CMAKE[@]}" -DGRIDSAMPLER_SANITIZE=address,undefined,fuzzer-no-link "${extra[@]}"
  cmake --build build-asan -j"$JOBS"
  # install_and_examples builds the examples without sanitizers against the
  # instrumented library, which the ASan runtime refuses (it must be loaded
  # first); it tests packaging, and its aclnn calls are aclnn_test's.
  ctest --test-dir build-asan --output-on-failure -j"$JOBS" --timeout 900 -E '^install_and_examples$'
}

tsan() {
  configure . build-tsan "${COMMON_CMAKE[@]}" -DGRIDSAMPLER_SANITIZE=thread
  # clang must have picked LLVM's libomp, not GCC's libgomp.
  grep -Eq '^OpenMP_CXX_LIB_NAMES:STRING=.*\bomp\b' build-tsan/CMakeCache.txt || {
    echo "ci-sanitize: the TSan build does not use libomp:"; grep '^OpenMP_' build-tsan/CMakeCache.txt; return 1; }
  local case_targets=() case_patterns=() i
  for ((i = 0; i < ${#TSAN_CASES[@]}; i += 2)); do
    case_targets+=("${TSAN_CASES[i]}")
    case_patterns+=("${TSAN_CASES[i + 1]}")
  done
  cmake --build build-tsan -j"$JOBS" --target "${TSAN_TESTS[@]}" "${case_targets[@]}"
  local archer="$LLVM_LIB/libarcher.so"
  [[ -f $archer ]] || { echo "ci-sanitize: $archer is missing (Debian: libomp-14-dev)"; return 1; }
  export OMP_TOOL_LIBRARIES="$archer"
  export TSAN_OPTIONS="ignore_noninstrumented_modules=1:halt_on_error=1:second_deadlock_stack=1:external_symbolizer_path=$LLVM_BIN/llvm-symbolizer"
  # Several threads even on a small machine (the tests also set their own counts).
  export OMP_NUM_THREADS=${OMP_NUM_THREADS:-4}
  # Archer must really be attached: it says so when verbose (the test's own
  # result is ctest's business below).
  local probe
  probe=$(ARCHER_OPTIONS=verbose=1 build-tsan/tests/threads_test --gtest_filter='Threads.MaskedRunsMatchFullRuns' 2>&1 || true)
  grep -q 'Archer detected OpenMP application with TSan' <<<"$probe" || {
    echo "ci-sanitize: Archer did not attach to libomp:"; echo "$probe" | head -20; return 1; }
  local pattern
  pattern="^($(IFS='|'; echo "${TSAN_TESTS[*]}"))\\.|^($(IFS='|'; echo "${case_patterns[*]}"))"
  ctest --test-dir build-tsan --output-on-failure -j"$JOBS" --timeout 900 -R "$pattern"
}

fuzz() {
  local dir
  if fuzz_in_root && [[ -x build-asan/fuzz/aclnn_fuzzer ]]; then
    dir=build-asan/fuzz
  else
    configure fuzz build-fuzz "${COMMON_CMAKE[@]}"
    cmake --build build-fuzz -j"$JOBS" --target npy_read_fuzzer aclnn_fuzzer
    dir=build-fuzz
  fi
  # Replays first; fuzz even when one fails, so that new findings show too.
  local replay=0
  ctest --test-dir "$dir" --output-on-failure -R '^fuzz_(replay|regression)_' || replay=$?
  local work name
  work=$(mktemp -d)
  for name in npy_read aclnn; do
    mkdir -p "$work/$name"
    echo "--- $name: ${FUZZ_SECONDS} s"
    # The committed corpus is read, the new inputs go to a scratch folder; a
    # crash leaves its input in $work and fails the stage.
    # One OpenMP thread by default: with more, libomp's fork/join under ASan
    # costs most of the fuzzer's runs per second (docs/performance.md). The
    # harness still runs the C++ API with 1-3 threads (and TSan checks the
    # threads).
    # A fixed seed (GS_FUZZ_SEED, default 1) makes a CI run reproducible: the
    # same build explores the same inputs in the same order.
    if ! OMP_NUM_THREADS=1 "$dir/${name}_fuzzer" -seed="${GS_FUZZ_SEED:-1}" -max_total_time="$FUZZ_SECONDS" -timeout=30 \
        -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$work/" \
        "$work/$name" "fuzz/corpus/$name" >"$work/$name.log" 2>&1; then
      tail -n 60 "$work/$name.log"
      local saved="$root/build-fuzz-findings"  # ignored by git, kept for the next look
      mkdir -p "$saved"
      cp "$work"/crash-* "$work"/leak-* "$work"/timeout-* "$work"/oom-* "$saved"/ 2>/dev/null || true
      echo "ci-sanitize: $name fuzzer found a problem; inputs saved in $saved (add them to fuzz/regressions/$name/)"
      rm -rf "$work"
      return 1
    fi
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec|peak_rss_mb)' "$work/$name.log" || true
  done
  rm -rf "$work"
  return "$replay"
}

for s in $STAGES; do
  case $s in
    asan) stage "asan (build + ctest)" asan ;;
    tsan) stage "tsan (build + threaded tests)" tsan ;;
    fuzz) stage "fuzz (replay + ${FUZZ_SECONDS} s per target)" fuzz ;;
    *) echo "ci-sanitize: unknown stage '$s'"; exit 2 ;;
  esac
done
echo "=== ci-sanitize: summary"
printf '  %s\n' "${timings[@]}"
if ((${#failed[@]})); then
  echo "ci-sanitize: FAILED: ${failed[*]}"
  exit 1
fi
echo "ci-sanitize: all stages passed"
