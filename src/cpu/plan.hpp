// Plans: every decision about how a call's work is split and where its
// scratch lives, made once from the problem's shape (plan.cpp). Kernels only
// read a plan. Splits that change a sum's order (channel blocks, pixel
// chunks) depend on the shape alone, never on the thread count, so results
// are the same bits for any number of threads.
//
// NOTE [Deterministic parallel backward]
// dx[n, c] only receives contributions from grad[n, c], and dgrid[n, p] is a
// sum over channels. The backward therefore runs as tasks (n, channel block,
// pixel chunk): each task scatters into private accumulators for its
// channels (a thread's scratch, or a workspace slice when pixel chunks of one
// plane must be summed) and sums its channels' dgrid terms per pixel. Where a
// sum spans tasks (several pixel chunks for dx, several channel blocks for
// dgrid) the partial results are added afterwards in a fixed order. No
// atomics.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/validate.hpp"
#include "cpu/tile.hpp"
#include "gridsampler/gridsampler.hpp"

namespace gridsampler::cpu {

// Volumes run through the image drivers with depth merged into rows: an
// input channel is a plane of Din * Hin * Win voxels, an image's output
// Dout * Hout * Wout voxels in Dout * Hout rows (images: depth 1).
inline int64_t in_plane(const detail::Problem& p) { return p.in_d * p.in_h * p.in_w; }
inline int64_t out_pixels(const detail::Problem& p) { return p.out_d * p.out_h * p.out_w; }
inline int64_t out_rows(const detail::Problem& p) { return p.out_d * p.out_h; }
inline int64_t in_rows(const detail::Problem& p) { return p.in_d * p.in_h; }

struct ForwardPlan;
struct BackwardPlan;

// A driver: the OpenMP task loop of one direction for one dtype, stencil
// size and channel layout, with the plan's tile builder.
using ForwardFn = void (*)(const ForwardPlan&, const TensorView& input, const TensorView& grid,
                           const MutableTensorView& output, void* copies);
using BackwardFn = void (*)(const BackwardPlan&, const TensorView& grad, const TensorView& input,
                            const TensorView& grid, const MutableTensorView& dx,
                            const MutableTensorView& dgrid, void* workspace);

// A fused tile (fused-inl.h): output pixels [p0, p0 + count) of image
// (volume) n, from the grid to the planes' values, in place of a builder and
// a microkernel; the same bits. `points` holds those pixels' grid points in
// order (G values each). The forward's tile samples `channels` planes, each
// stencil reused for all of them: `input` and `output` are the first
// channel's planes, the others src.in_strides[1] and src.out_strides[1]
// elements apart. The backward's tile works the channels of FusedPlanes,
// likewise with one stencil for all, adding each channel's dgrid terms in
// channel order into `sums` (T[3][kTile]) and its coordinate multipliers
// into `mult` (T[3][kTile]).
using FusedForwardFn = void (*)(const TileSource& src, int64_t n, int64_t p0, int64_t count, int64_t channels,
                                const void* points, const void* input, void* output);
// The planes of a backward fused tile: `channels` of them (one for bicubic
// tiles), channel c's grad values at grad + c * grad_step (the tile's
// pixels in order), its input plane at input + c * src.in_strides[1], and
// where its dx adds up at acc + c * acc_step.
struct FusedPlanes {
  int64_t channels = 1;
  const void* grad = nullptr;
  int64_t grad_step = 0;
  const void* input = nullptr;
  void* acc = nullptr;
  int64_t acc_step = 0;
};
using FusedBackwardFn = void (*)(const TileSource& src, int64_t n, int64_t p0, int count, const void* points,
                                 const FusedPlanes& planes, bool want_dx, bool want_dgrid, void* sums, void* mult);

// `threads` in both plans: the team of the plan's parallel region, the
// call's threads (at most max_threads()) capped at the region's tasks; the
// per-thread scratch and copies are sized by it.
struct ForwardPlan {
  detail::Problem problem;
  int threads = 1;
  // 1: planar tasks (n, tile). kLanes or kNarrowLanes: tasks (n, block of
  // `lanes` channels, range of output pixels), reading a per-thread copy of
  // the block's input in [pixel][lane] order.
  int lanes = 1;
  int64_t blocks = 1;        // channel blocks per image
  int64_t ranges = 1;        // pixel ranges per (n, block)
  int64_t range_pixels = 0;  // output pixels per range (a multiple of kTile)
  bool flat_taps = false;    // planar tasks read dense planes through flat taps
  int64_t copy_elems = 0;    // one copy: (plane + 1) * lanes
  std::size_t copy_bytes = 0;  // all copies (from the calling thread's cached buffer)
  // One copy made and read by the whole team, (n, block) after (n, block),
  // instead of one per thread: where there are fewer (n, block) tasks than
  // threads, or the per-thread copies would outgrow what a thread keeps
  // cached between calls (the planner says why).
  bool shared_copy = false;
  int64_t copy_stretch = 0;  // input pixels per thread's share of a shared copy
  ForwardFn fn = nullptr;
  BuildTileFn build = nullptr;
  // Set where fused tiles apply to the shape (dense float or double planes
  // of images or volumes, up to kMaxFusedForwardChannels of them; plan.cpp
  // says which modes); the driver takes it when the output's planes are
  // dense too (a strided grid is copied a run at a time).
  FusedForwardFn fused = nullptr;
  // Whether the fused tiles may read windows instead of gathering
  // (window_reads_pay(): the CPU decides; no bit changes).
  bool window_reads = false;
  // One channel of tiny images through fused tiles in runs that cross from
  // image to image (plan.cpp says when), instead of a run per image; the
  // driver takes it when the grid's points and the output's values are
  // dense across images too.
  bool batched = false;
};

struct BackwardPlan {
  detail::Problem problem;
  int threads = 1;
  int lanes = 1;  // channels stored [pixel][lane] in blocks of kLanes or kNarrowLanes; 1 = planes
  bool need_values = false;    // dgrid wanted and the mode has weight derivatives
  bool shared_values = false;  // interleaved values copied once per (n, block), shared by its chunks
  bool flat_taps = false;      // planar tasks read dense planes through flat taps
  // Planar tasks that own whole planes of dx in the compute type, its
  // pixels `acc_step` apart along rows and from row to row (1: dense rows;
  // channels-last: C), accumulate into dx itself (zeroed first) instead of
  // a scratch plane that is copied out: one pass over the plane instead of
  // three.
  bool direct_dx = false;
  // How far apart a planar task's dx targets are from pixel to pixel: in dx
  // itself (direct_dx), or 1 (accumulator planes, `in_plane + 1` apart),
  // or channel_block (accumulators [pixel][channel] for a channels-last dx
  // in 16 bits).
  int64_t acc_step = 1;
  int64_t channel_block = 1;      // channels per task
  int64_t channel_blocks = 1;
  int64_t accumulator_elems = 0;  // one task's dx accumulators (and, interleaved, its values)
  int64_t pixel_chunks = 1;  // output-pixel chunks per (n, channel block)
  int64_t chunk_pixels = 0;  // output pixels per chunk (a multiple of kTile)
  int64_t span = 0;          // input pixels per range when chunks copy values or sum dx
  // Per-thread scratch: elements, and where its parts start (accumulators at 0).
  int64_t scratch_elems = 0;
  int64_t scratch_values = 0;  // the block's input values (interleaved, unless shared)
  int64_t scratch_grad = 0;    // a grad tile (interleaved)
  // Workspace layout (byte offsets, 64-byte aligned) and total size.
  std::size_t dx_partials = 0;     // per (n, block, chunk) accumulators, when chunks > 1
  std::size_t dgrid_partials = 0;  // per (n, channel block, pixel) sums, when blocks > 1
  std::size_t values = 0;          // per (n, block) input values, when shared
  std::size_t scratch = 0;         // per-thread scratch
  std::size_t workspace_bytes = 0;
  BackwardFn fn = nullptr;
  BuildTileFn build = nullptr;
  FusedBackwardFn fused = nullptr;  // as ForwardPlan::fused
  bool window_reads = false;        // as ForwardPlan::window_reads
  // Interleaved tasks whose whole-plane buffers would be large keep their
  // accumulators and values in sliding windows of input rows
  // (window-inl.h) where the grid's reach (reach.hpp) allows: the same
  // bits, memory for a band of rows instead of a plane. Pixel chunks of one
  // (n, block) take windows when all of them can; they then write the rows
  // that one chunk alone reaches straight to dx.
  bool row_windows = false;
  // Rows beyond the stencil's reach that the reach estimate adds for
  // rounding (tests set it below 0 to make tiles reach outside their
  // windows, which the drivers must catch).
  int64_t window_margin = 1;
};

// How an interleaved forward gets its channel-minor copies: as the planner
// chooses, or (for tests) one way; kNone runs the planar path.
enum class ForwardCopies { kChosen, kNone, kPerThread, kShared };
ForwardPlan plan_forward(const detail::Problem& problem, ForwardCopies copies = ForwardCopies::kChosen);
// Whether an interleaved backward may keep row windows: as the planner
// chooses (kMinWindowBytes), or (for tests) wherever they apply, or never.
enum class RowWindows { kChosen, kWherever, kNever };
BackwardPlan plan_backward(const detail::Problem& problem, RowWindows windows = RowWindows::kChosen);

// Runs a forward plan; its copies come from the calling thread's cached
// buffer, and without them (no memory) the planar path runs, which needs none.
void run_forward(const ForwardPlan& plan, const TensorView& input, const TensorView& grid,
                 const MutableTensorView& output);

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
