// CPU kernels: one template per (dtype, interpolation, padding,
// align_corners), chosen once from a single table when a call is planned.
// Kernels assume a validated problem (core/validate.hpp).
//
// NOTE [Deterministic parallel backward]
// dx[n, c] only receives contributions from grad[n, c], and dgrid[n, p] is a
// sum over channels. The backward therefore runs as tasks (n, channel block,
// pixel chunk): each task scatters into private float accumulators for its
// channels (a thread's scratch, or a workspace slice when pixel chunks of one
// plane must be summed) and sums its channels' dgrid terms per pixel. Where a
// sum spans tasks (several pixel chunks for dx, several channel blocks for
// dgrid) the partial results are added afterwards in a fixed order. Block
// sizes and chunk counts depend only on the problem's shape, never on the
// number of threads, so every thread count gives the same bits. No atomics.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/validate.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler::cpu {

struct BackwardPlan;

using ForwardFn = void (*)(const detail::Problem&, int threads, const TensorView& input,
                           const TensorView& grid, const MutableTensorView& output);
using BackwardFn = void (*)(const BackwardPlan&, const TensorView& grad, const TensorView& input,
                            const TensorView& grid, const MutableTensorView& dx,
                            const MutableTensorView& dgrid, void* workspace);

// The kernels of one dtype for the SIMD target chosen for this CPU, indexed
// by (mode * 3 + padding) * 2 + align_corners.
struct KernelTable {
  static constexpr int kEntries = 3 * 3 * 2;
  ForwardFn forward[kEntries];
  BackwardFn backward[kEntries];
};

// The SIMD targets compiled in and supported by this CPU (Highway's target
// bits), the one in use, and a way for tests to restrict the choice (0 =
// undo). Plans made after force_targets() use the new choice.
int64_t available_targets();
int64_t current_target();
void force_targets(int64_t targets);
const char* target_name(int64_t target);

struct ForwardPlan {
  detail::Problem problem;
  int threads = 1;
  ForwardFn fn = nullptr;
};

struct BackwardPlan {
  detail::Problem problem;
  int threads = 1;
  int lanes = 1;  // channels stored [pixel][lane] in blocks of kLanes or kNarrowLanes; 1 = planes
  int64_t channel_block = 1;  // channels per task
  int64_t accumulator_elems = 0;  // one task's dx accumulators
  int64_t scratch_elems = 0;      // per thread
  int64_t channel_blocks = 1;
  int64_t pixel_chunks = 1;   // output-pixel chunks per (n, channel block)
  int64_t chunk_pixels = 0;   // output pixels per chunk
  // Workspace layout (byte offsets, 64-byte aligned) and total size.
  std::size_t dx_partials = 0;     // per (n, block, chunk) accumulators, when chunks > 1
  std::size_t dgrid_partials = 0;  // per (n, channel block, pixel) sums, when blocks > 1
  std::size_t values = 0;          // per (n, block) input values, shared by chunks
  std::size_t scratch = 0;         // per-thread scratch
  std::size_t workspace_bytes = 0;
  BackwardFn fn = nullptr;
};

ForwardPlan plan_forward(const detail::Problem& problem);
BackwardPlan plan_backward(const detail::Problem& problem);

inline void run_forward(const ForwardPlan& plan, const TensorView& input, const TensorView& grid,
                        const MutableTensorView& output) {
  plan.fn(plan.problem, plan.threads, input, grid, output);
}

// `workspace` holds plan.workspace_bytes bytes, at any alignment: the plan
// asks for 64 bytes of slack and the start is rounded up to 64 here.
inline void run_backward(const BackwardPlan& plan, const TensorView& grad, const TensorView& input,
                         const TensorView& grid, const MutableTensorView& dx,
                         const MutableTensorView& dgrid, void* workspace) {
  const auto at = reinterpret_cast<std::uintptr_t>(workspace);
  void* aligned = workspace == nullptr ? nullptr : reinterpret_cast<void*>((at + 63) / 64 * 64);
  plan.fn(plan, grad, input, grid, dx, dgrid, aligned);
}

}  // namespace gridsampler::cpu
