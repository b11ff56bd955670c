// Forward drivers: the OpenMP task loops of grid_sample, for one storage
// type, stencil size K and channel layout, with the plan's tile builder.
// Each output value is a function of its pixel alone, so how the pixels are
// split among threads changes no bits.

// Target-independent includes (normal include guards).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>

#include "core/dtype.hpp"
#include "cpu/plan.hpp"
#include "cpu/tile.hpp"

// Per-target part: re-included once for every target.
#if defined(GRIDSAMPLER_CPU_FORWARD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_FORWARD_INL_H_
#undef GRIDSAMPLER_CPU_FORWARD_INL_H_
#else
#define GRIDSAMPLER_CPU_FORWARD_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
namespace {

// Planar: tasks (n, tile); a tile's stencils serve every channel plane,
// through flat taps when the plan says the planes are dense.
template <class S, int K, int G>
void forward_planar(const ForwardPlan& plan, const TensorView& input, const TensorView& grid,
                    const MutableTensorView& output, void*) {
  using T = compute_t<S>;
  const detail::Problem& p = plan.problem;
  const int64_t pixels = out_pixels(p);
  const int64_t plane = in_plane(p);
  const S* in = static_cast<const S*>(input.data);
  S* out = static_cast<S*>(output.data);
  const Shape4& is = input.strides;
  const Shape4& os = output.strides;
  TileSource src = tile_source(p, grid, os, is, /*derivatives=*/false, /*wide_indices=*/false);
  src.window_reads = plan.window_reads;
  // Few channels through fused tiles (plan.hpp) when the output's planes
  // are dense as well, in runs of kFusedRun pixels, each run's stencils
  // serving all channels. (Each output value depends on its pixel alone:
  // the split changes no bits.) A grid of other strides (permuted from
  // (N, G, H, W)) is copied a run at a time into the dense points the
  // tiles read.
  const bool fused = plan.fused != nullptr && os[3] == 1 && os[2] == p.out_w;
  const bool dense_grid = dense_points<G>(grid.strides, p.out_w);
  const int64_t run = fused ? kFusedRun : kTile;
  // Tiny images (plan.batched) as one sequence of pixels: runs cross from
  // image to image where the grid's points and the output's values follow
  // on from one image to the next.
  const bool batched = fused && plan.batched && dense_grid && grid.strides[0] == G * pixels && os[0] == pixels;
  const int64_t runs = (pixels + run - 1) / run;
  const int64_t batch_runs = batched ? (p.n * pixels + run - 1) / run : 0;
  TileSource batch_src = src;
  batch_src.image_pixels = pixels;
#pragma omp parallel num_threads(plan.threads)
  {
    auto tile = std::make_unique<Tile<T, K, G>>();
    std::unique_ptr<S[]> points_copy(fused && !dense_grid ? new S[G * kFusedRun] : nullptr);
#pragma omp for schedule(static)
    for (int64_t task = 0; task < batch_runs; ++task) {
      const int64_t q0 = task * run, n = q0 / pixels;
      const int64_t count = std::min(run, p.n * pixels - q0);
      plan.fused(batch_src, n, q0 - n * pixels, count, 1, static_cast<const S*>(grid.data) + G * q0,
                 in + n * is[0], out + n * os[0]);
    }
#pragma omp for schedule(static)
    for (int64_t task = 0; task < (batched ? 0 : p.n * runs); ++task) {
      const int64_t n = task / runs;
      const int64_t p0 = (task % runs) * run;
      if (fused) {
        const int64_t count = std::min<int64_t>(run, pixels - p0);
        const S* points = run_points<G>(grid, p.out_w, n, p0, count, dense_grid, points_copy.get());
        plan.fused(src, n, p0, count, p.c, points, in + n * is[0], out + n * os[0]);
        continue;
      }
      plan.build(src, n, p0, std::min<int64_t>(kTile, pixels - p0), tile.get());
      for (int64_t c = 0; c < p.c; ++c) {
        const S* ip = in + n * is[0] + c * is[1];
        S* op = out + n * os[0] + c * os[1];
        if (plan.flat_taps) {
          forward_channel<true>(*tile, ip, plane, op);
        } else {
          forward_channel<false>(*tile, ip, plane, op);
        }
      }
    }
  }
}

// Interleaved: tasks (n, block of L channels, range of output pixels); a
// task copies its block's input channels into [pixel][lane] order (once per
// block a thread takes in a row), then runs the tiles of its range through a
// [pixel][lane] tile buffer.
template <class S, int K, int L, int G>
void forward_interleaved(const ForwardPlan& plan, const TensorView& input, const TensorView& grid,
                         const MutableTensorView& output, void* copies) {
  using T = compute_t<S>;
  const detail::Problem& p = plan.problem;
  const int64_t pixels = out_pixels(p);
  const int64_t plane = in_plane(p);
  const int64_t blocks = plan.blocks, ranges = plan.ranges, range = plan.range_pixels;
  S* out = static_cast<S*>(output.data);
  const Shape4& os = output.strides;
  const TileSource src = tile_source(p, grid, os, input.strides, /*derivatives=*/false, /*wide_indices=*/false);
#pragma omp parallel num_threads(plan.threads)
  {
    auto tile = std::make_unique<Tile<T, K, G>>();
    T* values = static_cast<T*>(copies) + static_cast<int64_t>(omp_get_thread_num()) * plan.copy_elems;
    int64_t loaded = -1;  // the (n, block) whose values are in `values`
    alignas(64) T ot[kTile * L];
#pragma omp for schedule(static)
    for (int64_t task = 0; task < p.n * blocks * ranges; ++task) {
      const int64_t n = task / (blocks * ranges);
      const int64_t s0 = (task / ranges) % blocks * L, s1 = std::min(p.c, s0 + L);
      const int rows = static_cast<int>(s1 - s0);
      const int64_t p_begin = task % ranges * range, p_end = std::min(pixels, p_begin + range);
      if (p_begin >= p_end) continue;
      if (loaded != task / ranges) copy_values<L, S>(p, input, n, s0, s1, values, 0, plane);
      loaded = task / ranges;
      S* ob = out + n * os[0] + s0 * os[1];
      for (int64_t p0 = p_begin; p0 < p_end; p0 += kTile) {
        plan.build(src, n, p0, std::min<int64_t>(kTile, p_end - p0), tile.get());
        const Tile<T, K, G>& t = *tile;
        forward_lanes<L>(t, values, ot);
        store_tile_lanes<L>(ot, rows, t.count, t.out_off, p0, ob, os, p.out_w);
      }
    }
  }
}

// Interleaved with one copy for the team (plan.shared_copy): the (n, block)
// tasks in turn, each copied by every thread (a stretch of the plane each)
// and then sampled by every thread (a share of its tiles each). The
// barriers between the two keep the copy whole while it is read.
template <class S, int K, int L, int G>
void forward_interleaved_shared(const ForwardPlan& plan, const TensorView& input, const TensorView& grid,
                                const MutableTensorView& output, void* copies) {
  using T = compute_t<S>;
  const detail::Problem& p = plan.problem;
  const int64_t pixels = out_pixels(p);
  const int64_t plane = in_plane(p);
  const int64_t tiles = (pixels + kTile - 1) / kTile;
  const int64_t stretch = plan.copy_stretch;
  // At least one stretch: the last one also zeroes the slot after the plane.
  const int64_t stretches = std::max<int64_t>((plane + stretch - 1) / stretch, 1);
  S* out = static_cast<S*>(output.data);
  const Shape4& os = output.strides;
  const TileSource src = tile_source(p, grid, os, input.strides, /*derivatives=*/false, /*wide_indices=*/false);
  T* values = static_cast<T*>(copies);
#pragma omp parallel num_threads(plan.threads)
  {
    auto tile = std::make_unique<Tile<T, K, G>>();
    alignas(64) T ot[kTile * L];
    for (int64_t task = 0; task < p.n * plan.blocks; ++task) {
      const int64_t n = task / plan.blocks;
      const int64_t s0 = task % plan.blocks * L, s1 = std::min(p.c, s0 + L);
#pragma omp for schedule(static)
      for (int64_t s = 0; s < stretches; ++s) {
        const int64_t q0 = std::min(plane, s * stretch), q1 = std::min(plane, (s + 1) * stretch);
        copy_values<L, S>(p, input, n, s0, s1, values, q0, q1);
      }
      S* ob = out + n * os[0] + s0 * os[1];
#pragma omp for schedule(static)
      for (int64_t t = 0; t < tiles; ++t) {
        const int64_t p0 = t * kTile;
        plan.build(src, n, p0, std::min<int64_t>(kTile, pixels - p0), tile.get());
        forward_lanes<L>(*tile, values, ot);
        store_tile_lanes<L>(ot, static_cast<int>(s1 - s0), tile->count, tile->out_off, p0, ob, os, p.out_w);
      }
    }
  }
}

// The forward driver of one (dtype, stencil size, path, grid components),
// as a table entry.
template <class S, int K, int L, int G = 2>
void forward(const ForwardPlan& plan, const TensorView& input, const TensorView& grid,
             const MutableTensorView& output, void* copies) {
  if constexpr (L == 1) {
    forward_planar<S, K, G>(plan, input, grid, output, copies);
  } else if (plan.shared_copy) {
    forward_interleaved_shared<S, K, L, G>(plan, input, grid, output, copies);
  } else {
    forward_interleaved<S, K, L, G>(plan, input, grid, output, copies);
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#endif  // GRIDSAMPLER_CPU_FORWARD_INL_H_
