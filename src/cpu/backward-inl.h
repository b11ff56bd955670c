// Backward drivers: the OpenMP task loops of GridSampler2DGrad for one
// storage type, stencil size K and channel layout (L = 1: planes), with the
// plan's tile builder. The plan (plan.hpp) fixes the tasks, the scratch and
// workspace layout, and the order of every sum that spans tasks; see NOTE
// [Deterministic parallel backward] there.

// Target-independent includes (normal include guards).
#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <type_traits>

#include "core/dtype.hpp"
#include "cpu/plan.hpp"
#include "cpu/tile.hpp"

// Per-target part: re-included once for every target.
#if defined(GRIDSAMPLER_CPU_BACKWARD_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_BACKWARD_INL_H_
#undef GRIDSAMPLER_CPU_BACKWARD_INL_H_
#else
#define GRIDSAMPLER_CPU_BACKWARD_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
namespace {

// Where a direct_dx plan accumulates channel c of image n: dx's own plane.
template <class S>
inline compute_t<S>* direct_dx_plane(const MutableTensorView& dx, int64_t n, int64_t c) {
  if constexpr (std::is_same_v<S, compute_t<S>>) {
    return static_cast<S*>(dx.data) + n * dx.strides[0] + c * dx.strides[1];
  } else {
    return nullptr;  // (plans never take direct_dx for 16-bit storage)
  }
}

// Where a planar task adds up dx of channel c (its block starting at c0):
// nothing when dx is not wanted, dx's own plane for a direct_dx plan, else
// the task's accumulator plane.
template <class S>
inline compute_t<S>* planar_dx_target(const BackwardPlan& plan, const MutableTensorView& dx, int64_t n, int64_t c,
                                      int64_t c0, compute_t<S>* acc) {
  if (!plan.problem.mask.input) return nullptr;
  if (plan.direct_dx) return direct_dx_plane<S>(dx, n, c);
  return acc + (c - c0) * (in_plane(plan.problem) + 1);
}

// The planar backward microkernel for the wanted outputs.
template <bool kFlat, class S, int K, int G, class T>
inline void backward_plane(const Tile<T, K, G>& t, const S* gp, const S* ip, int64_t plane, T* acc, bool want_dx,
                           bool need_values, T (*sums)[kTile]) {
  if (want_dx && need_values) {
    backward_channel<kFlat, S, T, K, G, true, true>(t, gp, ip, plane, acc, sums);
  } else if (want_dx) {
    backward_channel<kFlat, S, T, K, G, true, false>(t, gp, ip, plane, acc, sums);
  } else if (need_values) {
    backward_channel<kFlat, S, T, K, G, false, true>(t, gp, ip, plane, acc, sums);
  }
}

// One task's channels over one tile: the microkernel for the wanted
// outputs, per channel plane or per sub-block of L channels in order (a
// fixed order of the dgrid sums).
template <class S, int K, int L, int G>
inline void backward_tile(const BackwardPlan& plan, const TensorView& grad, const TensorView& input,
                          const MutableTensorView& dx, const Tile<compute_t<S>, K, G>& t, int64_t n, int64_t c0,
                          int64_t c1, int64_t p0, compute_t<S>* acc, const compute_t<S>* values, compute_t<S>* gt,
                          compute_t<S> (*sums)[kTile]) {
  using T = compute_t<S>;
  const detail::Problem& p = plan.problem;
  const bool want_dx = p.mask.input, need_values = plan.need_values;
  if constexpr (L > 1) {
    const int64_t sub = (in_plane(p) + 1) * L;
    for (int64_t b = 0; b < (c1 - c0 + L - 1) / L; ++b) {
      load_grad_lanes<L, S>(grad, p.out_w, n, c0 + b * L, std::min(c1, c0 + (b + 1) * L), t.out_off, t.count, p0, gt);
      T* ab = want_dx ? acc + b * sub : nullptr;
      const T* xb = values + b * sub;
      if (want_dx && need_values) {
        backward_lanes<L, T, K, G, true, true>(t, gt, xb, ab, sums);
      } else if (want_dx) {
        backward_lanes<L, T, K, G, true, false>(t, gt, xb, ab, sums);
      } else if (need_values) {
        backward_lanes<L, T, K, G, false, true>(t, gt, xb, ab, sums);
      }
    }
  } else {
    const int64_t slot = in_plane(p) + 1;
    const Shape4 &gs = grad.strides, &is = input.strides;
    for (int64_t c = c0; c < c1; ++c) {
      const S* gp = static_cast<const S*>(grad.data) + n * gs[0] + c * gs[1];
      const S* ip = static_cast<const S*>(input.data) + n * is[0] + c * is[1];
      T* a = planar_dx_target<S>(plan, dx, n, c, c0, acc);
      if (plan.flat_taps) {
        backward_plane<true, S, K>(t, gp, ip, slot - 1, a, want_dx, need_values, sums);
      } else {
        backward_plane<false, S, K>(t, gp, ip, slot - 1, a, want_dx, need_values, sums);
      }
    }
  }
}

// Writes accumulated dx pixels [q0, q1) of channels [c0, c1) of image n.
template <class S, int L>
inline void store_dx(const BackwardPlan& plan, const MutableTensorView& dx, int64_t n, int64_t c0, int64_t c1,
                     const compute_t<S>* acc, int64_t q0, int64_t q1) {
  const detail::Problem& p = plan.problem;
  const int64_t slot = in_plane(p) + 1;
  if constexpr (L > 1) {
    store_lanes<L, S>(dx, p.in_w, slot, n, c0, c1, acc, q0, q1);
  } else {
    store_planes<S>(dx, p.in_w, slot, n, c0, c1, acc, 1, q0, q1);
  }
}

// The backward driver of one (dtype, stencil size, path, grid components),
// as a table entry.
template <class S, int K, int L, int G = 2>
void backward(const BackwardPlan& plan, const TensorView& grad, const TensorView& input, const TensorView& grid,
              const MutableTensorView& dx, const MutableTensorView& dgrid, void* workspace) {
  using T = compute_t<S>;
  constexpr bool kInterleaved = L > 1;
  const detail::Problem& p = plan.problem;
  const bool want_dx = p.mask.input;
  const bool want_dgrid = p.mask.grid;
  const int64_t pixels = out_pixels(p);
  const int64_t plane = in_plane(p);
  const int64_t slot = plane + 1;
  const int64_t sub = slot * L;  // one sub-block's [pixel][lane] buffer
  const int64_t cb_size = plan.channel_block, blocks = plan.channel_blocks;
  const int64_t chunks = plan.pixel_chunks, chunk = plan.chunk_pixels, span = plan.span;
  const int64_t acc_elems = plan.accumulator_elems;
  const bool shared_values = plan.shared_values;
  auto* ws = static_cast<unsigned char*>(workspace);
  T* dx_partials = reinterpret_cast<T*>(ws + plan.dx_partials);
  T* dg_partials = reinterpret_cast<T*>(ws + plan.dgrid_partials);
  T* values = reinterpret_cast<T*>(ws + plan.values);
  T* scratch = reinterpret_cast<T*>(ws + plan.scratch);
  // Weight derivatives and multipliers serve dgrid alone.
  TileSource src = tile_source(p, grid, grad.strides, input.strides, want_dgrid, /*wide_indices=*/false);
  src.window_reads = plan.window_reads;
  // One channel through fused tiles (plan.hpp) when the grid and grad are
  // dense as well.
  const Shape4& gs = grad.strides;
  const bool fused = plan.fused != nullptr && dense_points<G>(grid.strides, p.out_w) && gs[3] == 1 && gs[2] == p.out_w;
  auto sub_blocks = [&](int64_t c0, int64_t c1) { return (c1 - c0 + L - 1) / L; };

#pragma omp parallel num_threads(plan.threads)
  {
    auto tile = std::make_unique<Tile<T, K, G>>();
    T sums[G][kTile];
    T* my_scratch = scratch + static_cast<int64_t>(omp_get_thread_num()) * plan.scratch_elems;
    T* my_acc = my_scratch;
    T* xin = kInterleaved ? my_scratch + plan.scratch_values : nullptr;
    T* gt = kInterleaved ? my_scratch + plan.scratch_grad : nullptr;

    // Chunks of one (n, block) share one copy of its input values, made by
    // `chunks` tasks, a range of pixels each.
    if (shared_values) {
#pragma omp for schedule(static)
      for (int64_t task = 0; task < p.n * blocks * chunks; ++task) {
        const int64_t nb = task / chunks, n = nb / blocks;
        const int64_t c0 = (nb % blocks) * cb_size, c1 = std::min(p.c, c0 + cb_size);
        const int64_t q0 = (task % chunks) * span, q1 = std::min(plane, q0 + span);
        if (q0 >= q1) continue;
        for (int64_t b = 0; b < sub_blocks(c0, c1); ++b) {
          copy_values<L, S>(p, input, n, c0 + b * L, std::min(c1, c0 + (b + 1) * L),
                            values + nb * acc_elems + b * sub, q0, q1);
        }
      }
    }

#pragma omp for schedule(static)
    for (int64_t task = 0; task < p.n * blocks * chunks; ++task) {
      const int64_t n = task / (blocks * chunks);
      const int64_t block = (task / chunks) % blocks;
      const int64_t part = task % chunks;
      const int64_t c0 = block * cb_size, c1 = std::min(p.c, c0 + cb_size);
      const int64_t p_begin = part * chunk, p_end = std::min(pixels, p_begin + chunk);
      T* acc = !want_dx       ? nullptr  // (no workspace may have been given)
               : chunks == 1 ? my_acc
                             : dx_partials + ((n * blocks + block) * chunks + part) * acc_elems;
      if (want_dx && plan.direct_dx) {
        for (int64_t c = c0; c < c1; ++c) std::fill_n(direct_dx_plane<S>(dx, n, c), plane, T(0));
      } else if (want_dx) {
        std::fill_n(acc, acc_elems, T(0));
      }
      const T* block_values = shared_values ? values + (n * blocks + block) * acc_elems : xin;
      if constexpr (kInterleaved) {
        if (plan.need_values && !shared_values) {
          for (int64_t b = 0; b < sub_blocks(c0, c1); ++b) {
            copy_values<L, S>(p, input, n, c0 + b * L, std::min(c1, c0 + (b + 1) * L), xin + b * sub, 0, plane);
          }
        }
      }
      for (int64_t p0 = p_begin; p0 < p_end; p0 += kTile) {
        const int count = static_cast<int>(std::min<int64_t>(kTile, p_end - p0));
        const Tile<T, K, G>& t = *tile;
        for (int c = 0; c < G; ++c) std::fill_n(sums[c], kTile, T(0));
        if (fused) {
          T* a = planar_dx_target<S>(plan, dx, n, 0, 0, acc);
          plan.fused(src, n, p0, count, static_cast<const S*>(grad.data) + n * gs[0],
                     static_cast<const S*>(input.data) + n * input.strides[0], a, want_dx, plan.need_values, sums,
                     tile->mult);
          tile->count = count;
        } else {
          plan.build(src, n, p0, count, tile.get());
          backward_tile<S, K, L, G>(plan, grad, input, dx, t, n, c0, c1, p0, acc, block_values, gt, sums);
        }
        if (want_dgrid && blocks == 1) {
          store_dgrid<S, G>(dgrid, p.out_w, n, p0, t.count, t.mult, sums);
        } else if (want_dgrid) {
          // Partial sums, and (from block 0) the multipliers, per pixel.
          T* part_sum = dg_partials + ((n * (blocks + 1) + block + 1) * pixels + p0) * G;
          T* mult = dg_partials + (n * (blocks + 1) * pixels + p0) * G;
          store_points<G, T, T>(sums, nullptr, t.count, part_sum);
          if (block == 0) store_points<G, T, T>(t.mult, nullptr, t.count, mult);
        }
      }
      if (want_dx && chunks == 1 && !plan.direct_dx) store_dx<S, L>(plan, dx, n, c0, c1, acc, 0, plane);
    }

    // Fixed-order sums of what spans tasks (the barrier of `omp for` above
    // has made every partial visible).
    if (want_dx && chunks > 1) {
#pragma omp for schedule(static)
      for (int64_t task = 0; task < p.n * blocks * chunks; ++task) {
        const int64_t nb = task / chunks;
        const int64_t q0 = (task % chunks) * span, q1 = std::min(plane, q0 + span);
        if (q0 >= q1) continue;
        // Chunk 0's accumulators take the sum, chunk by chunk in order.
        T* first = dx_partials + nb * chunks * acc_elems;
        const int64_t row_elems = kInterleaved ? sub : slot;
        const int64_t rows = acc_elems / row_elems;
        for (int64_t r = 0; r < rows; ++r) {
          T* __restrict sum = first + r * row_elems + q0 * L;
          for (int64_t part = 1; part < chunks; ++part) {
            const T* __restrict a = first + part * acc_elems + r * row_elems + q0 * L;
            for (int64_t e = 0; e < (q1 - q0) * L; ++e) sum[e] += a[e];
          }
        }
        const int64_t c0 = (nb % blocks) * cb_size;
        store_dx<S, L>(plan, dx, nb / blocks, c0, std::min(p.c, c0 + cb_size), first, q0, q1);
      }
    }
    if (want_dgrid && blocks > 1) {
      // Over (image, output row), so the pixel's place needs no division.
      const Shape4& dgs = dgrid.strides;
      const int64_t rows = out_rows(p);
#pragma omp for schedule(static)
      for (int64_t nh = 0; nh < p.n * rows; ++nh) {
        const int64_t n = nh / rows, h = nh % rows;
        const T* base = dg_partials + n * (blocks + 1) * pixels * G;
        S* row = static_cast<S*>(dgrid.data) + n * dgs[0] + h * dgs[1];
        for (int64_t w = 0, q = h * p.out_w; w < p.out_w; ++w, ++q) {
          T sum[G] = {};
          for (int64_t block = 0; block < blocks; ++block) {
            for (int c = 0; c < G; ++c) sum[c] += base[((block + 1) * pixels + q) * G + c];
          }
          S* d = row + w * dgs[2];
          for (int c = 0; c < G; ++c) d[c * dgs[3]] = store<S>(base[q * G + c] * sum[c]);
        }
      }
    }
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#endif  // GRIDSAMPLER_CPU_BACKWARD_INL_H_
