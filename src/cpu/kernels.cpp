// The planner: decides how the work is split (from the problem's shape only,
// so results do not depend on the thread count) and picks the kernel for the
// SIMD target chosen for this CPU.
#include "cpu/kernels.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "cpu/tuning.hpp"
#include "hwy/highway.h"
#include "hwy/targets.h"

namespace gridsampler::cpu {

// One per dtype, in kernels_<dtype>.cpp.
void kernels_f16(KernelTable* table);
void kernels_bf16(KernelTable* table);
void kernels_f32(KernelTable* table);
void kernels_f64(KernelTable* table);

namespace {

using detail::Problem;

std::size_t align_up(std::size_t v) { return (v + 63) / 64 * 64; }

int resolve_threads(const Problem& p) {
  return p.options.num_threads > 0 ? p.options.num_threads : omp_get_max_threads();
}

// GRIDSAMPLER_SIMD_TARGET=<name> (AVX3, AVX2, SSE4, ...) restricts the
// choice to that target when the library is first used (for benchmarks and
// tools like valgrind that lack some instruction sets).
void apply_environment() {
  static const bool once = [] {
    if (const char* want = std::getenv("GRIDSAMPLER_SIMD_TARGET")) {
      for (int64_t t = hwy::SupportedTargets() & HWY_TARGETS; t != 0; t &= t - 1) {
        const int64_t bit = t & -t;
        if (std::strcmp(hwy::TargetName(bit), want) == 0) hwy::SetSupportedTargetsForTest(bit);
      }
    }
    return true;
  }();
  (void)once;
}

KernelTable table_for(DType dtype) {
  apply_environment();
  KernelTable table{};
  switch (dtype) {
    case DType::kFloat16: kernels_f16(&table); break;
    case DType::kBFloat16: kernels_bf16(&table); break;
    case DType::kFloat32: kernels_f32(&table); break;
    case DType::kFloat64: kernels_f64(&table); break;
  }
  return table;
}

int index_of(const Problem& p) {
  return (static_cast<int>(p.options.interpolation) * 3 + static_cast<int>(p.options.padding)) * 2 +
         (p.options.align_corners ? 1 : 0);
}

}  // namespace

int64_t available_targets() { return hwy::SupportedTargets() & HWY_TARGETS; }
int64_t current_target() {
  const int64_t targets = available_targets();
  return targets & -targets;  // the lowest bit is the best target
}
void force_targets(int64_t targets) { hwy::SetSupportedTargetsForTest(targets); }
const char* target_name(int64_t target) { return hwy::TargetName(target); }

ForwardPlan plan_forward(const Problem& problem) {
  ForwardPlan plan;
  plan.problem = problem;
  plan.threads = resolve_threads(problem);
  plan.fn = table_for(problem.dtype).forward[index_of(problem)];
  return plan;
}

BackwardPlan plan_backward(const Problem& p) {
  BackwardPlan plan;
  plan.problem = p;
  plan.threads = resolve_threads(p);
  plan.fn = table_for(p.dtype).backward[index_of(p)];
  const std::size_t elem = p.dtype == DType::kFloat64 ? sizeof(double) : sizeof(float);
  const int64_t pixels = p.out_h * p.out_w;
  const int64_t slot = p.in_h * p.in_w + 1;
  const int64_t c = std::max<int64_t>(p.c, 1);
  // Channels in blocks of kLanes, interleaved, when there are enough of them
  // to fill most lanes and the two [pixel][lane] buffers stay reasonable;
  // otherwise planar blocks of as many accumulator planes as fit
  // kAccumulatorBytes.
  constexpr std::size_t kMaxInterleavedBytes = std::size_t{64} << 20;
  plan.interleaved = c >= kLanes / 2 &&
                     2 * static_cast<std::size_t>(slot) * kLanes * elem <= kMaxInterleavedBytes;
  if (plan.interleaved) {
    plan.channel_block = kLanes;
    plan.accumulator_elems = slot * kLanes;
  } else {
    // Each block rebuilds the stencils, so never split fewer than
    // kLanes / 2 channels, even when their planes exceed kAccumulatorBytes.
    const int64_t fit = static_cast<int64_t>(kAccumulatorBytes / (static_cast<std::size_t>(slot) * elem));
    plan.channel_block = std::clamp<int64_t>(std::max<int64_t>(fit, kLanes / 2), 1, c);
    plan.accumulator_elems = plan.channel_block * slot;
  }
  plan.channel_blocks = (c + plan.channel_block - 1) / plan.channel_block;
  // Too few (n, block) tasks to feed the threads: split the output pixels.
  const int64_t tasks = std::max<int64_t>(p.n * plan.channel_blocks, 1);
  int64_t chunks = 1;
  if (tasks < kMinTasks) {
    // A task sets up (zeroes, copies, writes out) its accumulators: keep each
    // chunk's work above that cost.
    const int64_t min_chunk = std::max(kMinChunkPixels, slot / 2);
    chunks = std::min((kMinTasks + tasks - 1) / tasks, std::max<int64_t>(pixels / min_chunk, 1));
  }
  // Chunked dx needs accumulators per chunk: not worth it past kMaxPartialBytes.
  constexpr std::size_t kMaxPartialBytes = std::size_t{256} << 20;
  if (static_cast<std::size_t>(tasks * chunks * plan.accumulator_elems) * elem > kMaxPartialBytes) chunks = 1;
  plan.pixel_chunks = chunks;
  const int64_t chunk = (pixels + chunks - 1) / chunks;
  plan.chunk_pixels = std::max<int64_t>((chunk + kTile - 1) / kTile * kTile, kTile);

  std::size_t bytes = 0;
  auto take = [&](std::size_t size) {
    const std::size_t at = bytes;
    bytes = align_up(bytes + size);
    return at;
  };
  if (p.mask.input && chunks > 1) {
    plan.dx_partials = take(static_cast<std::size_t>(tasks * chunks * plan.accumulator_elems) * elem);
  }
  if (p.mask.grid && plan.channel_blocks > 1) {
    plan.dgrid_partials =
        take(static_cast<std::size_t>(p.n * (plan.channel_blocks + 1) * pixels * 2) * elem);
  }
  // Per thread: one task's accumulators (or the sum of a block's chunks) and,
  // interleaved, the block's input values and a grad tile.
  plan.scratch_elems = plan.accumulator_elems + (plan.interleaved ? slot * kLanes + kTile * kLanes : 0);
  plan.scratch_elems = static_cast<int64_t>(align_up(static_cast<std::size_t>(plan.scratch_elems) * elem) / elem);
  if (!p.mask.input && !plan.interleaved) plan.scratch_elems = 0;  // nothing accumulated or copied
  plan.scratch = take(static_cast<std::size_t>(plan.threads * plan.scratch_elems) * elem);
  plan.workspace_bytes = bytes > 0 ? bytes + 64 : 0;  // slack to align any pointer to 64
  return plan;
}

}  // namespace gridsampler::cpu
