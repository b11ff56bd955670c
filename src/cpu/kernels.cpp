// The CPU kernels (see NOTE [Deterministic parallel backward] in kernels.hpp).
//
// Both directions work on tiles of kTile output pixels: the stencils of a
// tile are built once (coordinates, tap offsets, weights) into small arrays
// and then applied to every channel, so the coordinate work is amortised over
// the channels and each channel's loop is a tight gather/scatter over the
// tile. Values are computed in the compute type T (float32 for the 16-bit
// dtypes and float32, float64 for float64) and rounded once when stored.
#include "cpu/kernels.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>

#include "core/dtype.hpp"
#include "cpu/stencil.hpp"

namespace gridsampler::cpu {
namespace {

using detail::Problem;

constexpr int kTile = 64;                       // output pixels per tile
constexpr std::size_t kAccumulatorBytes = 256 << 10;  // a task's dx accumulators (L2-sized)
constexpr int64_t kMinTasks = 16;               // below this, split pixels (fixed, not per machine)
constexpr int64_t kMinChunkPixels = 1024;       // ... but never into chunks smaller than this

std::size_t align_up(std::size_t v) { return (v + 63) / 64 * 64; }

int resolve_threads(const Problem& p) {
  return p.options.num_threads > 0 ? p.options.num_threads : omp_get_max_threads();
}

// The stencils of up to kTile consecutive output pixels of one image, laid
// out tap-major so each channel's loop reads them sequentially. Invalid taps
// have zero weights, input offset 0 and accumulator index `plane` (a dummy
// slot past the real pixels), so loops need no branches; the gathered value
// of an invalid tap is replaced by 0 so that nothing from outside leaks in.
template <class T, int K>
struct Tile {
  int count = 0;
  int64_t out_off[kTile];  // pixel offset in a grad/output channel plane
  int64_t in_off[K][kTile];
  int64_t acc[K][kTile];  // y * Win + x
  bool valid[K][kTile];
  T w[K][kTile];
  T dwx[K][kTile];
  T dwy[K][kTile];
  T mult_x[kTile];
  T mult_y[kTile];
};

template <Interpolation M, Padding P, bool kAlign, class S, class T, int K>
void fill_tile(const Problem& p, const TensorView& grid, const Shape4& out_strides, int64_t n,
               int64_t p0, int64_t count, Tile<T, K>* t, const Shape4& in_strides) {
  const S* gr = static_cast<const S*>(grid.data);
  const Shape4& gs = grid.strides;
  const int64_t plane = p.in_h * p.in_w;
  Stencil<T, K> s;
  t->count = static_cast<int>(count);
  for (int64_t i = 0; i < count; ++i) {
    const int64_t q = p0 + i;
    const int64_t h = q / p.out_w, w = q % p.out_w;
    const S* g = gr + n * gs[0] + h * gs[1] + w * gs[2];
    build_stencil<M, P, kAlign>(load(g[0]), load(g[gs[3]]), p.in_h, p.in_w, &s);
    t->out_off[i] = h * out_strides[2] + w * out_strides[3];
    t->mult_x[i] = s.mult_x;
    t->mult_y[i] = s.mult_y;
    for (int k = 0; k < K; ++k) {
      const bool ok = s.valid[k];
      t->valid[k][i] = ok;
      t->in_off[k][i] = ok ? s.y[k] * in_strides[2] + s.x[k] * in_strides[3] : 0;
      t->acc[k][i] = ok ? s.y[k] * p.in_w + s.x[k] : plane;
      t->w[k][i] = ok ? s.w[k] : T(0);
      t->dwx[k][i] = ok ? s.dw_dx[k] : T(0);
      t->dwy[k][i] = ok ? s.dw_dy[k] : T(0);
    }
  }
}

// ---------------------------------------------------------------------------
// Forward: tasks are (n, tile); each writes its own output pixels.

template <class S, Interpolation M, Padding P, bool kAlign>
void forward(const Problem& p, int threads, const TensorView& input, const TensorView& grid,
             const MutableTensorView& output) {
  using T = compute_t<S>;
  constexpr int K = kTaps<M>;
  const int64_t pixels = p.out_h * p.out_w;
  const int64_t tiles = (pixels + kTile - 1) / kTile;
  const S* in = static_cast<const S*>(input.data);
  S* out = static_cast<S*>(output.data);
  const Shape4& is = input.strides;
  const Shape4& os = output.strides;
#pragma omp parallel num_threads(threads)
  {
    auto tile = std::make_unique<Tile<T, K>>();
#pragma omp for schedule(static)
    for (int64_t task = 0; task < p.n * tiles; ++task) {
      const int64_t n = task / tiles;
      const int64_t p0 = (task % tiles) * kTile;
      const int64_t count = std::min<int64_t>(kTile, pixels - p0);
      fill_tile<M, P, kAlign, S>(p, grid, os, n, p0, count, tile.get(), is);
      const Tile<T, K>& t = *tile;
      for (int64_t c = 0; c < p.c; ++c) {
        const S* ip = in + n * is[0] + c * is[1];
        S* op = out + n * os[0] + c * os[1];
        for (int i = 0; i < t.count; ++i) {
          T acc = 0;
          for (int k = 0; k < K; ++k) {
            const T v = t.valid[k][i] ? load(ip[t.in_off[k][i]]) : T(0);
            acc += t.w[k][i] * v;
          }
          op[t.out_off[i]] = store<S>(acc);
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------
// Backward.

// Adds one channel's contributions over a tile: dx into `acc` (one
// accumulator plane), dgrid terms into gx/gy.
template <class S, class T, int K, bool kDx, bool kDgrid>
inline void backward_channel(const Tile<T, K>& t, const S* gp, const S* ip, T* acc, T* gx, T* gy) {
  for (int i = 0; i < t.count; ++i) {
    const T g = load(gp[t.out_off[i]]);
    if constexpr (kDx) {
      for (int k = 0; k < K; ++k) acc[t.acc[k][i]] += t.w[k][i] * g;
    }
    if constexpr (kDgrid) {
      T sx = 0, sy = 0;
      for (int k = 0; k < K; ++k) {
        const T v = t.valid[k][i] ? load(ip[t.in_off[k][i]]) : T(0);
        sx += t.dwx[k][i] * v;
        sy += t.dwy[k][i] * v;
      }
      gx[i] += sx * g;
      gy[i] += sy * g;
    }
  }
}

template <class S, Interpolation M, Padding P, bool kAlign>
void backward(const BackwardPlan& plan, const TensorView& grad, const TensorView& input,
              const TensorView& grid, const MutableTensorView& dx, const MutableTensorView& dgrid,
              void* workspace) {
  using T = compute_t<S>;
  constexpr int K = kTaps<M>;
  constexpr bool kHasDgrid = M != Interpolation::kNearest;  // nearest: dgrid is 0
  const Problem& p = plan.problem;
  const bool want_dx = p.mask.input;
  const bool want_dgrid = p.mask.grid;
  const int64_t pixels = p.out_h * p.out_w;
  const int64_t plane = p.in_h * p.in_w;
  const int64_t slot = plane + 1;  // accumulator plane with its dummy slot
  const int64_t cb_size = plan.channel_block, blocks = plan.channel_blocks;
  const int64_t chunks = plan.pixel_chunks, chunk = plan.chunk_pixels;
  const S* go = static_cast<const S*>(grad.data);
  const S* in = static_cast<const S*>(input.data);
  S* dxp = static_cast<S*>(dx.data);
  S* dgp = static_cast<S*>(dgrid.data);
  const Shape4 &gs = grad.strides, &is = input.strides, &ds = dx.strides, &dgs = dgrid.strides;
  auto* ws = static_cast<unsigned char*>(workspace);
  T* dx_partials = reinterpret_cast<T*>(ws + plan.dx_partials);
  T* dg_partials = reinterpret_cast<T*>(ws + plan.dgrid_partials);
  T* scratch = reinterpret_cast<T*>(ws + plan.scratch);

  // Writes accumulator planes of channels [c0, c1) of image n to dx.
  auto store_dx = [&](int64_t n, int64_t c, const T* a) {
    S* d = dxp + n * ds[0] + c * ds[1];
    for (int64_t y = 0; y < p.in_h; ++y)
      for (int64_t x = 0; x < p.in_w; ++x) d[y * ds[2] + x * ds[3]] = store<S>(a[y * p.in_w + x]);
  };

#pragma omp parallel num_threads(plan.threads)
  {
    auto tile = std::make_unique<Tile<T, K>>();
    T gx[kTile], gy[kTile];
    const int64_t scratch_planes = chunks == 1 ? cb_size : 1;  // as plan_backward sized it
    T* my_scratch = scratch + static_cast<int64_t>(omp_get_thread_num()) * scratch_planes * slot;
#pragma omp for schedule(static)
    for (int64_t task = 0; task < p.n * blocks * chunks; ++task) {
      const int64_t n = task / (blocks * chunks);
      const int64_t block = (task / chunks) % blocks;
      const int64_t part = task % chunks;
      const int64_t c0 = block * cb_size, c1 = std::min(p.c, c0 + cb_size);
      const int64_t p_begin = part * chunk, p_end = std::min(pixels, p_begin + chunk);
      // This task's accumulator plane for channel c.
      auto acc_plane = [&](int64_t c) {
        return chunks == 1 ? my_scratch + (c - c0) * slot
                           : dx_partials + ((n * p.c + c) * chunks + part) * slot;
      };
      if (want_dx) {
        for (int64_t c = c0; c < c1; ++c) std::fill_n(acc_plane(c), slot, T(0));
      }
      for (int64_t p0 = p_begin; p0 < p_end; p0 += kTile) {
        fill_tile<M, P, kAlign, S>(p, grid, gs, n, p0, std::min<int64_t>(kTile, p_end - p0), tile.get(), is);
        const Tile<T, K>& t = *tile;
        std::fill_n(gx, kTile, T(0));
        std::fill_n(gy, kTile, T(0));
        for (int64_t c = c0; c < c1; ++c) {
          const S* gp = go + n * gs[0] + c * gs[1];
          const S* ip = in + n * is[0] + c * is[1];
          T* a = want_dx ? acc_plane(c) : nullptr;
          if (want_dx && want_dgrid && kHasDgrid) {
            backward_channel<S, T, K, true, true>(t, gp, ip, a, gx, gy);
          } else if (want_dx) {
            backward_channel<S, T, K, true, false>(t, gp, ip, a, gx, gy);
          } else if (want_dgrid && kHasDgrid) {
            backward_channel<S, T, K, false, true>(t, gp, ip, a, gx, gy);
          }
        }
        if (want_dgrid) {
          for (int i = 0; i < t.count; ++i) {
            const int64_t q = p0 + i;
            if (blocks == 1) {
              S* d = dgp + n * dgs[0] + (q / p.out_w) * dgs[1] + (q % p.out_w) * dgs[2];
              d[0] = store<S>(t.mult_x[i] * gx[i]);
              d[dgs[3]] = store<S>(t.mult_y[i] * gy[i]);
            } else {
              // Partial sums, and (from block 0) the multipliers, per pixel.
              T* part_sum = dg_partials + ((n * (blocks + 1) + block + 1) * pixels + q) * 2;
              part_sum[0] = gx[i];
              part_sum[1] = gy[i];
              if (block == 0) {
                T* mult = dg_partials + (n * (blocks + 1) * pixels + q) * 2;
                mult[0] = t.mult_x[i];
                mult[1] = t.mult_y[i];
              }
            }
          }
        }
      }
      if (want_dx && chunks == 1) {
        for (int64_t c = c0; c < c1; ++c) store_dx(n, c, acc_plane(c));
      }
    }

    // Fixed-order sums of what spans tasks (the barrier of `omp for` above
    // has made every partial visible).
    if (want_dx && chunks > 1) {
      T* sum = my_scratch;  // one plane: plan gives the scratch for this case too
#pragma omp for schedule(static)
      for (int64_t nc = 0; nc < p.n * p.c; ++nc) {
        const T* first = dx_partials + nc * chunks * slot;
        std::copy_n(first, plane, sum);
        for (int64_t part = 1; part < chunks; ++part) {
          const T* a = first + part * slot;
          for (int64_t q = 0; q < plane; ++q) sum[q] += a[q];
        }
        store_dx(nc / p.c, nc % p.c, sum);
      }
    }
    if (want_dgrid && blocks > 1) {
#pragma omp for schedule(static)
      for (int64_t nq = 0; nq < p.n * pixels; ++nq) {
        const int64_t n = nq / pixels, q = nq % pixels;
        const T* base = dg_partials + n * (blocks + 1) * pixels * 2;
        T sx = 0, sy = 0;
        for (int64_t block = 0; block < blocks; ++block) {
          sx += base[((block + 1) * pixels + q) * 2];
          sy += base[((block + 1) * pixels + q) * 2 + 1];
        }
        S* d = dgp + n * dgs[0] + (q / p.out_w) * dgs[1] + (q % p.out_w) * dgs[2];
        d[0] = store<S>(base[q * 2] * sx);
        d[dgs[3]] = store<S>(base[q * 2 + 1] * sy);
      }
    }
  }
}

// ---------------------------------------------------------------------------
// The dispatch table: every (dtype, mode, padding, align_corners) in one
// place, indexed as ((dtype * 3 + mode) * 3 + padding) * 2 + align.

constexpr int kEntries = 4 * 3 * 3 * 2;

template <int I>
struct Entry {
  static constexpr bool kAlign = I % 2 == 1;
  static constexpr Padding kPad = static_cast<Padding>((I / 2) % 3);
  static constexpr Interpolation kMode = static_cast<Interpolation>((I / 6) % 3);
  static constexpr int kDType = I / 18;
  template <class F>
  static constexpr auto pick(F f) {
    if constexpr (kDType == static_cast<int>(DType::kFloat16)) return f(Half{});
    else if constexpr (kDType == static_cast<int>(DType::kBFloat16)) return f(BFloat16{});
    else if constexpr (kDType == static_cast<int>(DType::kFloat32)) return f(float{});
    else return f(double{});
  }
  static constexpr ForwardFn forward_fn() {
    return pick([](auto tag) -> ForwardFn { return &forward<decltype(tag), kMode, kPad, kAlign>; });
  }
  static constexpr BackwardFn backward_fn() {
    return pick([](auto tag) -> BackwardFn { return &backward<decltype(tag), kMode, kPad, kAlign>; });
  }
};

template <int... I>
constexpr std::array<ForwardFn, kEntries> forward_table(std::integer_sequence<int, I...>) {
  return {Entry<I>::forward_fn()...};
}
template <int... I>
constexpr std::array<BackwardFn, kEntries> backward_table(std::integer_sequence<int, I...>) {
  return {Entry<I>::backward_fn()...};
}

constexpr auto kForward = forward_table(std::make_integer_sequence<int, kEntries>{});
constexpr auto kBackward = backward_table(std::make_integer_sequence<int, kEntries>{});

int index_of(const Problem& p) {
  return ((static_cast<int>(p.dtype) * 3 + static_cast<int>(p.options.interpolation)) * 3 +
          static_cast<int>(p.options.padding)) * 2 + (p.options.align_corners ? 1 : 0);
}

}  // namespace

ForwardPlan plan_forward(const Problem& problem) {
  ForwardPlan plan;
  plan.problem = problem;
  plan.threads = resolve_threads(problem);
  plan.fn = kForward[index_of(problem)];
  return plan;
}

BackwardPlan plan_backward(const Problem& p) {
  BackwardPlan plan;
  plan.problem = p;
  plan.threads = resolve_threads(p);
  plan.fn = kBackward[index_of(p)];
  const std::size_t elem = p.dtype == DType::kFloat64 ? sizeof(double) : sizeof(float);
  const int64_t pixels = p.out_h * p.out_w;
  const int64_t slot = p.in_h * p.in_w + 1;
  const int64_t c = std::max<int64_t>(p.c, 1);
  // Channels per task: as many accumulator planes as fit kAccumulatorBytes.
  plan.channel_block = std::clamp<int64_t>(
      static_cast<int64_t>(kAccumulatorBytes / (static_cast<std::size_t>(slot) * elem)), 1, c);
  plan.channel_blocks = (c + plan.channel_block - 1) / plan.channel_block;
  // Too few (n, block) tasks to feed the threads: split the output pixels.
  const int64_t tasks = std::max<int64_t>(p.n * plan.channel_blocks, 1);
  int64_t chunks = 1;
  if (tasks < kMinTasks) {
    chunks = std::min((kMinTasks + tasks - 1) / tasks, std::max<int64_t>(pixels / kMinChunkPixels, 1));
  }
  // Chunked dx needs a partial plane per chunk: not worth it past kMaxPartialBytes.
  constexpr std::size_t kMaxPartialBytes = std::size_t{256} << 20;
  if (static_cast<std::size_t>(p.n * p.c * chunks * slot) * elem > kMaxPartialBytes) chunks = 1;
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
    plan.dx_partials = take(static_cast<std::size_t>(p.n * p.c * chunks * slot) * elem);
  }
  if (p.mask.grid && plan.channel_blocks > 1) {
    plan.dgrid_partials =
        take(static_cast<std::size_t>(p.n * (plan.channel_blocks + 1) * pixels * 2) * elem);
  }
  if (p.mask.input) {
    // Per thread: a task's accumulator planes (chunks == 1), or one plane to
    // sum chunks into (chunks > 1).
    const int64_t planes = chunks == 1 ? plan.channel_block : 1;
    plan.scratch = take(static_cast<std::size_t>(plan.threads * planes * slot) * elem);
  }
  plan.workspace_bytes = bytes;
  return plan;
}

}  // namespace gridsampler::cpu
