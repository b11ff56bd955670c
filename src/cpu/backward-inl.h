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
#include <vector>

#include "core/dtype.hpp"
#include "cpu/plan.hpp"
#include "cpu/reach.hpp"
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
  return acc + (c - c0) * (plan.acc_step == 1 ? in_plane(plan.problem) + 1 : 1);
}

// Zeroes dx for direct_dx tasks whose pixels lie `acc_step` (> 1) apart:
// part `part` of `parts` of it, all before any task runs, since channels
// of one task's block sit between those of others. Where dx's channels are
// dense and channels-last, each image's are one span, filled in pieces.
template <class S>
inline void zero_spread_dx(const BackwardPlan& plan, const MutableTensorView& dx, int64_t part, int64_t parts) {
  using T = compute_t<S>;
  const detail::Problem& p = plan.problem;
  const int64_t plane = in_plane(p), step = plan.acc_step;
  const int64_t n = part / parts, piece = part % parts;
  if (dx.strides[1] == 1 && step == p.c) {
    const int64_t span = plane * p.c, each = (span + parts - 1) / parts;
    const int64_t from = std::min(span, piece * each), to = std::min(span, from + each);
    std::fill(direct_dx_plane<S>(dx, n, 0) + from, direct_dx_plane<S>(dx, n, 0) + to, T(0));
    return;
  }
  for (int64_t c = piece; c < p.c; c += parts) {
    T* d = direct_dx_plane<S>(dx, n, c);
    for (int64_t i = 0; i < plane; ++i) d[i * step] = T(0);
  }
}

// The planar backward microkernel for the wanted outputs.
template <bool kFlat, class S, int K, int G, class T>
inline void backward_plane(const Tile<T, K, G>& t, const S* gp, const S* ip, int64_t plane, T* acc, int64_t step,
                           bool want_dx, bool need_values, T (*sums)[kTile]) {
  if (want_dx && need_values) {
    backward_channel<kFlat, S, T, K, G, true, true>(t, gp, ip, plane, acc, step, sums);
  } else if (want_dx) {
    backward_channel<kFlat, S, T, K, G, true, false>(t, gp, ip, plane, acc, step, sums);
  } else if (need_values) {
    backward_channel<kFlat, S, T, K, G, false, true>(t, gp, ip, plane, acc, step, sums);
  }
}

// One task's channels over one tile: the microkernel for the wanted
// outputs, per channel plane or per sub-block of L channels in order (a
// fixed order of the dgrid sums; sub-blocks' accumulators and values `sub`
// apart).
template <class S, int K, int L, int G>
inline void backward_tile(const BackwardPlan& plan, const TensorView& grad, const TensorView& input,
                          const MutableTensorView& dx, const Tile<compute_t<S>, K, G>& t, int64_t n, int64_t c0,
                          int64_t c1, int64_t p0, compute_t<S>* acc, const compute_t<S>* values, int64_t sub,
                          compute_t<S>* gt, compute_t<S> (*sums)[kTile]) {
  using T = compute_t<S>;
  const detail::Problem& p = plan.problem;
  const bool want_dx = p.mask.input, need_values = plan.need_values;
  if constexpr (L > 1) {
    for (int64_t b = 0; b < (c1 - c0 + L - 1) / L; ++b) {
      load_grad_lanes<L, S>(grad, p.out_w, n, c0 + b * L, std::min(c1, c0 + (b + 1) * L), t.out_off, t.count, p0, gt);
      T* ab = want_dx ? acc + b * sub : nullptr;
      const T* xb = values == nullptr ? nullptr : values + b * sub;  // (none for nearest in row windows)
      if (want_dx && need_values) {
        backward_lanes<L, T, K, G, true, true>(t, gt, xb, ab, sums);
      } else if (want_dx) {
        backward_lanes<L, T, K, G, true, false>(t, gt, xb, ab, sums);
      } else if (need_values) {
        backward_lanes<L, T, K, G, false, true>(t, gt, xb, ab, sums);
      }
    }
  } else {
    const int64_t slot = in_plane(p) + 1, step = plan.acc_step;
    const Shape4 &gs = grad.strides, &is = input.strides;
    for (int64_t c = c0; c < c1; ++c) {
      const S* gp = static_cast<const S*>(grad.data) + n * gs[0] + c * gs[1];
      const S* ip = static_cast<const S*>(input.data) + n * is[0] + c * is[1];
      T* a = planar_dx_target<S>(plan, dx, n, c, c0, acc);
      if (plan.flat_taps) {
        backward_plane<true, S, K>(t, gp, ip, slot - 1, a, step, want_dx, need_values, sums);
      } else {
        backward_plane<false, S, K>(t, gp, ip, slot - 1, a, step, want_dx, need_values, sums);
      }
    }
  }
}

// Writes a task's accumulated dx planes (channels [c0, c1) of image n).
template <class S, int L>
inline void store_dx(const BackwardPlan& plan, const MutableTensorView& dx, int64_t n, int64_t c0, int64_t c1,
                     const compute_t<S>* acc) {
  const detail::Problem& p = plan.problem;
  const int64_t plane = in_plane(p);
  if constexpr (L > 1) {
    store_lanes<L, S>(dx, p.in_w, plane + 1, n, c0, c1, acc, 0, plane);
  } else {
    store_planes<S>(dx, p.in_w, plane + 1, n, c0, c1, acc, plan.acc_step, 0, plane);
  }
}

// The input pixels [lo, hi) that a built tile's taps reach (lo >= hi when
// none is valid: invalid taps index the zero slot, `plane`).
template <class T, int K, int G>
inline void tap_span(const Tile<T, K, G>& t, int64_t plane, bool int32_taps, int64_t& lo, int64_t& hi) {
  int64_t mn = plane, mx = -1;
  auto reach = [&](const auto* taps) {
    for (int i = 0; i < t.count; ++i) {
      const int64_t q = taps[i];
      mn = std::min(mn, q);
      mx = std::max(mx, q < plane ? q : int64_t{-1});
    }
  };
  for (int k = 0; k < K; ++k) {
    if (int32_taps) {
      reach(t.acc32[k]);
    } else {
      reach(t.acc[k]);
    }
  }
  lo = mn;
  hi = mx + 1;
}

// A pixel chunk's accumulators, zeroed only where its taps reach: the
// pixels [z0, z1) of every row (a plane, or a sub-block of L lanes), grown
// tile by tile. A chunk of a smooth grid's output rows reaches a band of
// input rows, so the pages of its accumulators beyond the band are never
// touched, zeroed or summed; the sums after the chunks treat the rest as
// the zeros it would have held (the same bits).
template <class T, int L>
struct ChunkBand {
  T* acc;
  int64_t rows, row_elems;
  int64_t z0 = 0, z1 = 0;
  void zero(int64_t a, int64_t b) const {
    for (int64_t r = 0; r < rows; ++r) std::fill_n(acc + r * row_elems + a * L, (b - a) * L, T(0));
  }
  void widen(int64_t lo, int64_t hi) {
    if (lo >= hi) return;
    if (z0 >= z1) {
      zero(lo, hi);
      z0 = lo;
      z1 = hi;
      return;
    }
    if (lo < z0) zero(lo, z0), z0 = lo;
    if (hi > z1) zero(z1, hi), z1 = hi;
  }
};

// dst[i] (+)= the chunk's accumulators at pixels [e0, e1) (L values each):
// a[...] inside its band [z0, z1), else the zero it would have held there.
// `first` starts the sum; later chunks add in order.
template <int L, class T>
inline void sum_band(T* __restrict dst, const T* __restrict a, int64_t z0, int64_t z1, int64_t e0, int64_t e1,
                     bool first) {
  const int64_t lo = std::clamp(z0, e0, e1), hi = std::max(lo, std::clamp(z1, e0, e1));
  for (int64_t i = 0; i < (lo - e0) * L; ++i) dst[i] = first ? T(0) : dst[i] + T(0);
  const T* src = a + lo * L;
  T* mid = dst + (lo - e0) * L;
  if (first) {
    std::copy_n(src, (hi - lo) * L, mid);
  } else {
    for (int64_t i = 0; i < (hi - lo) * L; ++i) mid[i] += src[i];
  }
  for (int64_t i = (hi - e0) * L; i < (e1 - e0) * L; ++i) dst[i] = first ? T(0) : dst[i] + T(0);
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
  // One channel through fused tiles (plan.hpp). A grad or grid of other
  // strides (a loss's sum hands autograd one value expanded over the
  // output; flow warps pass grids permuted from (N, G, H, W)) is copied a
  // tile at a time into the dense values and points the tiles read: a
  // strided read per pixel, where the builders and microkernels cost about
  // 1.6x the fused tiles.
  const Shape4& gs = grad.strides;
  const bool fused = plan.fused != nullptr;
  const bool dense_grid = dense_points<G>(grid.strides, p.out_w);
  const bool dense_grad = gs[3] == 1 && gs[2] == p.out_w;
  // Tasks that are whole small images prefetch the next one's window of
  // input values (dgrid reads them; dx, zeroed whole, is in cache).
  const bool prefetch = fused && dense_grid && plan.need_values && chunks == 1 && pixels <= kFusedRun && !p.volume;
  auto sub_blocks = [&](int64_t c0, int64_t c1) { return (c1 - c0 + L - 1) / L; };
  // Pixel chunks zero and sum their accumulators only where their taps
  // reach (ChunkBand), recorded per task; fused tiles do not report their
  // taps, so their chunks zero everything.
  const bool banded = want_dx && chunks > 1 && !fused;
  const int64_t row_elems = kInterleaved ? sub : slot;
  const int64_t acc_rows = acc_elems / row_elems;
  const bool int32_taps = std::is_same_v<T, float> && (kInterleaved || plan.flat_taps);
  std::vector<int64_t> reach(want_dx && chunks > 1 ? static_cast<std::size_t>(2 * p.n * blocks * chunks) : 0);
  // Row windows: each task's window and reach (row_window, made before the
  // tasks: chunks need one another's), per (n, block) whether all its
  // chunks take windows, and per task whether it failed to (a tile outside
  // its window: the (n, block) then runs again with whole planes).
  const int64_t tasks = p.n * blocks * chunks;
  const bool windows = plan.row_windows;
  const std::size_t window_tasks = windows ? static_cast<std::size_t>(tasks) : 0;
  std::vector<WindowShape> shapes(window_tasks);
  std::vector<std::vector<int64_t>> keeps(window_tasks);  // row_window's keep, per task
  std::vector<RowSpan> spans(window_tasks);
  std::vector<unsigned char> windowed(windows ? static_cast<std::size_t>(p.n * blocks) : 0);
  std::vector<unsigned char> failed(window_tasks);
  auto task_pixels = [&](int64_t task) {
    const int64_t p_begin = task % chunks * chunk;
    return std::make_pair(p_begin, std::min(pixels, p_begin + chunk));
  };

#pragma omp parallel num_threads(plan.threads)
  {
    auto tile = std::make_unique<Tile<T, K, G>>();
    T sums[G][kTile];
    // A strided grid's points and a strided grad's values for a fused tile,
    // made only where a call needs them.
    std::unique_ptr<S[]> tile_points(fused && !dense_grid ? new S[G * kTile] : nullptr);
    std::unique_ptr<S[]> grad_tile(fused && !dense_grad ? new S[kMaxFusedBackwardChannels * kTile] : nullptr);
    T* my_scratch = scratch + static_cast<int64_t>(omp_get_thread_num()) * plan.scratch_elems;
    T* my_acc = my_scratch;
    T* xin = kInterleaved ? my_scratch + plan.scratch_values : nullptr;
    T* gt = kInterleaved ? my_scratch + plan.scratch_grad : nullptr;

    // Chunks of one (n, block) share one copy of its input values, made by
    // `chunks` tasks, a range of pixels each.
    auto copy_shared = [&](int64_t task) {
      const int64_t nb = task / chunks, n = nb / blocks;
      const int64_t c0 = (nb % blocks) * cb_size, c1 = std::min(p.c, c0 + cb_size);
      const int64_t q0 = (task % chunks) * span, q1 = std::min(plane, q0 + span);
      if (q0 >= q1) return;
      for (int64_t b = 0; b < sub_blocks(c0, c1); ++b) {
        copy_values<L, S>(p, input, n, c0 + b * L, std::min(c1, c0 + (b + 1) * L), values + nb * acc_elems + b * sub,
                          q0, q1);
      }
    };
    // Whether (n, block) nb ran in windows throughout (after the tasks).
    auto windows_of = [&](int64_t nb) {
      if (!windows || windowed[nb] == 0) return false;
      for (int64_t part = 0; part < chunks; ++part) {
        if (failed[nb * chunks + part] != 0) return false;
      }
      return true;
    };
    auto redo = [&](int64_t nb) { return windows && windowed[nb] != 0 && !windows_of(nb); };
    if (windows) {
#pragma omp for schedule(static)
      for (int64_t task = 0; task < tasks; ++task) {
        const auto [p_begin, p_end] = task_pixels(task);
        shapes[task] = row_window<G, S>(p, grid, task / (blocks * chunks), p_begin, p_end, plan.window_margin,
                                        in_rows(p) / 2, keeps[task]);
      }
#pragma omp for schedule(static)
      for (int64_t nb = 0; nb < p.n * blocks; ++nb) {
        bool all = true;
        for (int64_t part = 0; part < chunks; ++part) {
          const WindowShape& w = shapes[nb * chunks + part];
          all = all && w.rows > 0;
          spans[nb * chunks + part] = {w.lo, w.hi};
        }
        windowed[nb] = all ? 1 : 0;
      }
    }
    if (shared_values) {
#pragma omp for schedule(static)
      for (int64_t task = 0; task < tasks; ++task) {
        if (!windows || windowed[task / chunks] == 0) copy_shared(task);
      }
    }

    // Runs one task; with cap > 0 through a window of that many rows
    // (RowWindow), and then false if a tile reaches outside it, leaving the
    // task to be run again with whole planes.
    auto run_task = [&](int64_t task, int64_t cap) -> bool {
      const int64_t n = task / (blocks * chunks);
      const int64_t block = (task / chunks) % blocks;
      const int64_t part = task % chunks;
      const int64_t c0 = block * cb_size, c1 = std::min(p.c, c0 + cb_size);
      const int64_t p_begin = part * chunk, p_end = std::min(pixels, p_begin + chunk);
      T* acc = !want_dx       ? nullptr  // (no workspace may have been given)
               : chunks == 1 ? my_acc
                             : dx_partials + ((n * blocks + block) * chunks + part) * acc_elems;
      ChunkBand<T, L> band{acc, acc_rows, row_elems};
      // (the values' ring right after the accumulators', where the scratch
      // has room for both: a compact span of memory)
      const int64_t ring_rows = cap > 0 ? RowWindow<L, S>::ring_rows(p, cap) : 1;
      T* values_ring = nullptr;
      if (cap > 0 && plan.need_values) {
        values_ring = want_dx ? my_acc + RowWindow<L, S>::ring_values(p, sub_blocks(c0, c1), ring_rows) : xin;
      }
      RowWindow<L, S> win{p, input, dx, n, c0, c1, cap > 0 && want_dx ? my_acc : nullptr, values_ring, ring_rows};
      if (cap > 0 && chunks > 1) {
        win.spans = spans.data() + task / chunks * chunks;
        win.chunks = chunks;
        win.part = part;
        win.partial = acc;
        win.lo = win.hi = spans[task].lo;
        win.limit = spans[task].hi;
      }
      if (cap > 0) {
        win.start();
      } else if (want_dx && plan.direct_dx) {
        // (dx whose pixels lie further apart is zeroed before the tasks)
        if (plan.acc_step == 1) {
          for (int64_t c = c0; c < c1; ++c) std::fill_n(direct_dx_plane<S>(dx, n, c), plane, T(0));
        }
      } else if (banded) {
        band.zero(plane, slot);  // the zero slots, where invalid taps add nothing
      } else if (want_dx) {
        std::fill_n(acc, acc_elems, T(0));
      }
      const T* block_values = shared_values ? values + (n * blocks + block) * acc_elems : xin;
      if constexpr (kInterleaved) {
        if (plan.need_values && !shared_values && cap == 0) {
          for (int64_t b = 0; b < sub_blocks(c0, c1); ++b) {
            copy_values<L, S>(p, input, n, c0 + b * L, std::min(c1, c0 + (b + 1) * L), xin + b * sub, 0, plane);
          }
        }
      }
      if constexpr (std::is_same_v<S, T>) {  // (fused tiles: float and double)
        if (prefetch && n + 1 < p.n) {
          prefetch_window<S>(src, n + 1, 0, pixels, static_cast<const S*>(input.data) + (n + 1) * input.strides[0]);
        }
      }
      for (int64_t p0 = p_begin; p0 < p_end; p0 += kTile) {
        const int count = static_cast<int>(std::min<int64_t>(kTile, p_end - p0));
        const Tile<T, K, G>& t = *tile;
        for (int c = 0; c < G; ++c) std::fill_n(sums[c], kTile, T(0));
        if (fused) {
          FusedPlanes planes;
          planes.channels = c1 - c0;
          planes.acc = planar_dx_target<S>(plan, dx, n, c0, c0, acc);
          planes.acc_step = plan.direct_dx ? dx.strides[1] : slot;
          const S* g = static_cast<const S*>(grad.data) + n * gs[0] + c0 * gs[1];
          if (dense_grad) {
            planes.grad = g + p0;
            planes.grad_step = gs[1];
          } else {
            for (int64_t c = 0; c < c1 - c0; ++c) {
              pixel_values(g + c * gs[1], gs, p.out_w, p0, count, grad_tile.get() + c * kTile);
            }
            planes.grad = grad_tile.get();
            planes.grad_step = kTile;
          }
          planes.input = static_cast<const S*>(input.data) + n * input.strides[0] + c0 * input.strides[1];
          const S* points = run_points<G>(grid, p.out_w, n, p0, count, dense_grid, tile_points.get());
          plan.fused(src, n, p0, count, points, planes, want_dx, plan.need_values, sums, tile->mult);
          tile->count = count;
        } else if (cap > 0) {
          win.retire(keeps[task][(p0 - p_begin) / kTile]);
          plan.build(src, n, p0, count, tile.get());
          if (!win.admit(*tile)) return false;
          backward_tile<S, K, L, G>(plan, grad, input, dx, t, n, c0, c1, p0, win.acc, win.values, win.sub, gt, sums);
        } else {
          plan.build(src, n, p0, count, tile.get());
          if (banded) {
            int64_t lo = 0, hi = 0;
            tap_span(t, plane, int32_taps, lo, hi);
            band.widen(lo, hi);
          }
          backward_tile<S, K, L, G>(plan, grad, input, dx, t, n, c0, c1, p0, acc, block_values, sub, gt, sums);
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
      if (cap > 0) {
        win.retire(chunks > 1 ? spans[task].hi : in_rows(p), /*all=*/true);
      } else if (want_dx && chunks == 1 && !plan.direct_dx) {
        store_dx<S, L>(plan, dx, n, c0, c1, acc);
      }
      if (want_dx && chunks > 1 && cap > 0) {
        reach[2 * task] = spans[task].lo * p.in_w;
        reach[2 * task + 1] = spans[task].hi * p.in_w;
      } else if (want_dx && chunks > 1) {
        reach[2 * task] = banded ? band.z0 : 0;
        reach[2 * task + 1] = banded ? band.z1 : plane;
      }
      return true;
    };

    if (want_dx && plan.direct_dx && plan.acc_step != 1) {
      const int64_t parts = omp_get_num_threads();
#pragma omp for schedule(static)
      for (int64_t part = 0; part < p.n * parts; ++part) zero_spread_dx<S>(plan, dx, part, parts);
    }
#pragma omp for schedule(static)
    for (int64_t task = 0; task < tasks; ++task) {
      const int64_t cap = windows && windowed[task / chunks] != 0 ? shapes[task].rows : 0;
      if (!run_task(task, cap)) failed[task] = 1;
    }
    if (windows) {
      // (n, block)s whose windows failed: again with whole planes.
#pragma omp for schedule(static)
      for (int64_t task = 0; task < tasks; ++task) {
        if (shared_values && redo(task / chunks)) copy_shared(task);
      }
#pragma omp for schedule(static)
      for (int64_t task = 0; task < tasks; ++task) {
        if (redo(task / chunks)) run_task(task, 0);
      }
    }

    // Fixed-order sums of what spans tasks (the barrier of `omp for` above
    // has made every partial visible): per row of accumulators, pieces of
    // kTile * 16 pixels summed chunk by chunk in order into a buffer of the
    // thread's, then written to dx.
    if (want_dx && chunks > 1) {
      constexpr int64_t kPiece = kTile * 16;
      const auto piece = std::make_unique<T[]>(kPiece * L);
#pragma omp for schedule(static)
      for (int64_t task = 0; task < p.n * blocks * chunks; ++task) {
        const int64_t nb = task / chunks;
        const int64_t q0 = (task % chunks) * span, q1 = std::min(plane, q0 + span);
        const int64_t c0 = (nb % blocks) * cb_size, c1 = std::min(p.c, c0 + cb_size);
        const T* parts = dx_partials + nb * chunks * acc_elems;
        const int64_t* bands = reach.data() + 2 * nb * chunks;
        // Windowed chunks wrote the pixels that one chunk alone reaches to
        // dx: only the rest is summed (pieces end where a band does).
        const bool skip_single = windows_of(nb);
        for (int64_t r = 0; r < acc_rows && c0 + r * L < c1; ++r) {
          const int64_t s0 = c0 + r * L, s1 = std::min(c1, s0 + L);
          for (int64_t e0 = q0, e1 = q0; e0 < q1; e0 = e1) {
            e1 = std::min(q1, e0 + kPiece);
            int64_t cover = 0;
            if (skip_single) {
              for (int64_t part = 0; part < chunks; ++part) {
                const int64_t z0 = bands[2 * part], z1 = bands[2 * part + 1];
                cover += z0 <= e0 && e0 < z1 ? 1 : 0;
                if (z0 > e0) e1 = std::min(e1, z0);
                if (z1 > e0) e1 = std::min(e1, z1);
              }
              if (cover == 1) continue;
            }
            for (int64_t part = 0; part < chunks; ++part) {
              sum_band<L>(piece.get(), parts + part * acc_elems + r * row_elems, bands[2 * part],
                          bands[2 * part + 1], e0, e1, part == 0);
            }
            if constexpr (kInterleaved) {
              store_lanes<L, S>(dx, p.in_w, kPiece, nb / blocks, s0, s1, piece.get(), e0, e1);
            } else {
              store_planes<S>(dx, p.in_w, kPiece, nb / blocks, s0, s1, piece.get(), 1, e0, e1);
            }
          }
        }
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
