// The double backward's planner and driver (see double_backward.hpp).
//
// Scalar code over output pixels, with the channel loop inside: the stencil
// (taps, weights, their first and second derivatives) is built once per
// pixel and serves every channel of the task. The weights of a pixel's taps
// differ per pixel, so there is no dense inner loop for SIMD to take without
// gathers and scatters; the first-order kernels' vector machinery answers a
// different question (many channels sharing one weight set per tap), which
// the channel loop here already exploits.
#include "cpu/double_backward.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/coords.hpp"
#include "core/dtype.hpp"
#include "core/threads.hpp"
#include "cpu/stencil.hpp"

namespace gridsampler::cpu {
namespace {

using detail::Problem;

// Splits (fixed, shape-only): at least kMinTasks tasks where the problem is
// big enough, pixel chunks of at least kMinChunkPixels, and pixel-chunk
// accumulators of at most kMaxPartialBytes.
constexpr int64_t kMinTasks = 16;
constexpr int64_t kMinChunkPixels = 2048;
constexpr uint64_t kMaxPartialBytes = uint64_t{64} << 20;
// Interleaved tasks hold at most kMaxBlock channels (their per-channel sums
// live on the stack), and their copies and accumulators at most
// kMaxInterleavedBytes in all; beyond that, planes.
constexpr int64_t kMaxBlock = 64;
constexpr uint64_t kMaxInterleavedBytes = uint64_t{512} << 20;
constexpr uint64_t kSaturated = UINT64_MAX;

uint64_t mul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kSaturated : r;
}
uint64_t align_up(uint64_t v) { return v >= kSaturated - 63 ? kSaturated : (v + 63) / 64 * 64; }

// Second derivatives of a stencil's weights with respect to (ix, iy), in the
// stencil's tap order.
template <class T, int K>
struct Curvature {
  T xx[K], xy[K], yy[K];
};

template <Interpolation M, Padding P, bool kAlign, class T>
void build_curvature(T gx, T gy, int64_t height, int64_t width, Curvature<T, kTaps<M>>* h) {
  if constexpr (M == Interpolation::kBilinear) {
    // Bilinear in (ix, iy): only the mixed derivative, +-1 (tap order of
    // bilinear_taps: (y0, x0), (y0, x0 + 1), (y0 + 1, x0), (y0 + 1, x0 + 1)).
    constexpr T kMixed[4] = {1, -1, -1, 1};
    for (int k = 0; k < 4; ++k) {
      h->xx[k] = 0;
      h->xy[k] = kMixed[k];
      h->yy[k] = 0;
    }
  } else if constexpr (M == Interpolation::kBicubic) {
    T mx = 0, my = 0;
    const T ix = coords::bicubic_source<P>(gx, width, kAlign, &mx);
    const T iy = coords::bicubic_source<P>(gy, height, kAlign, &my);
    const T tx = ix - std::floor(ix), ty = iy - std::floor(iy);
    T cx[4], cy[4], gcx[4], gcy[4], hcx[4], hcy[4];
    coords::cubic_weights(tx, cx);
    coords::cubic_weights(ty, cy);
    coords::cubic_weight_grads(tx, gcx);  // minus the first derivatives
    coords::cubic_weight_grads(ty, gcy);
    coords::cubic_weight_curvatures(tx, hcx);
    coords::cubic_weight_curvatures(ty, hcy);
    for (int j = 0; j < 4; ++j) {
      for (int i = 0; i < 4; ++i) {
        h->xx[j * 4 + i] = hcx[i] * cy[j];
        h->xy[j * 4 + i] = gcx[i] * gcy[j];
        h->yy[j * 4 + i] = cx[i] * hcy[j];
      }
    }
  } else {
    (void)gx, (void)gy, (void)height, (void)width, (void)h;
  }
}

template <class S>
const S* at(const TensorView& t, int64_t a, int64_t b, int64_t c, int64_t d) {
  const Shape4& s = t.strides;
  return static_cast<const S*>(t.data) + a * s[0] + b * s[1] + c * s[2] + d * s[3];
}
template <class S>
S* at(const MutableTensorView& t, int64_t a, int64_t b, int64_t c, int64_t d) {
  const Shape4& s = t.strides;
  return static_cast<S*>(t.data) + a * s[0] + b * s[1] + c * s[2] + d * s[3];
}

// What both drivers build for one output pixel: its stencil, the weights'
// second derivatives, and gg_dgrid in pixel units (0 when unused).
template <class T, int K>
struct PixelStencil {
  Stencil<T, K> st;
  Curvature<T, K> cv;
  T px = 0, py = 0;
};

// Inlined into the pixel loops: called once per output pixel, and a call
// (with its returned struct) cost 10% more instructions on small problems.
template <class S, Interpolation M, Padding P, bool kAlign>
[[gnu::always_inline]] inline PixelStencil<compute_t<S>, kTaps<M>> pixel_stencil(const Problem& p, const TensorView& grid,
                                                   const TensorView& gg_dgrid, bool use_v, int64_t n,
                                                   int64_t h, int64_t w) {
  PixelStencil<compute_t<S>, kTaps<M>> ps;
  const S* g2 = at<S>(grid, n, h, w, 0);
  const compute_t<S> gx = load(g2[0]), gy = load(g2[grid.strides[3]]);
  build_stencil<M, P, kAlign>(gx, gy, p.in_h, p.in_w, &ps.st);
  build_curvature<M, P, kAlign>(gx, gy, p.in_h, p.in_w, &ps.cv);
  if (use_v) {
    const S* gg = at<S>(gg_dgrid, n, h, w, 0);
    ps.px = load(gg[0]) * ps.st.mult_x;
    ps.py = load(gg[gg_dgrid.strides[3]]) * ps.st.mult_y;
  }
  return ps;
}

// A pixel's d_grid from one task: stored, or with several channel blocks
// kept as the block's partial sum.
template <class S, class T>
void store_grid(const DoubleBackwardPlan& plan, const MutableTensorView& d_grid, T* grid_partials, int64_t n,
                int64_t block, int64_t h, int64_t w, T dx, T dy) {
  const detail::Problem& p = plan.problem;
  if (plan.channel_blocks == 1) {
    S* d = at<S>(d_grid, n, h, w, 0);
    d[0] = store<S>(dx);
    d[d_grid.strides[3]] = store<S>(dy);
  } else {
    T* d = grid_partials + ((n * plan.channel_blocks + block) * p.out_h * p.out_w + h * p.out_w + w) * 2;
    d[0] = dx;
    d[1] = dy;
  }
}

// The channel blocks' d_grid partial sums added in block order and stored;
// a work-sharing loop of the enclosing parallel region.
template <class S, class T>
void sum_grid_partials(const DoubleBackwardPlan& plan, const T* grid_partials, const MutableTensorView& d_grid) {
  const detail::Problem& p = plan.problem;
  const int64_t pixels = p.out_h * p.out_w, blocks = plan.channel_blocks;
#pragma omp for schedule(static)
  for (int64_t nq = 0; nq < p.n * pixels; ++nq) {
    const int64_t n = nq / pixels, q = nq % pixels;
    T sx = 0, sy = 0;
    for (int64_t block = 0; block < blocks; ++block) {
      const T* d = grid_partials + ((n * blocks + block) * pixels + q) * 2;
      sx += d[0];
      sy += d[1];
    }
    S* d = at<S>(d_grid, n, q / p.out_w, q % p.out_w, 0);
    d[0] = store<S>(sx);
    d[d_grid.strides[3]] = store<S>(sy);
  }
}

template <class S, Interpolation M, Padding P, bool kAlign>
void run_planar(const DoubleBackwardPlan& plan, const TensorView& gg_dx, const TensorView& gg_dgrid,
         const TensorView& grad, const TensorView& input, const TensorView& grid,
         const MutableTensorView& d_grad, const MutableTensorView& d_input, const MutableTensorView& d_grid,
         unsigned char* ws) {
  using T = compute_t<S>;
  constexpr int K = kTaps<M>;
  // nearest's weights are piecewise constant: d_input and d_grid get no
  // terms (they are zero, not 0 * grad).
  constexpr bool kSmooth = M != Interpolation::kNearest;
  const Problem& p = plan.problem;
  const DoubleBackwardMask mask = plan.mask;
  const bool use_e = plan.has_gg_dx;                   // gg_dx's terms
  const bool use_v = plan.has_gg_dgrid && kSmooth;    // gg_dgrid's terms
  const bool scatter = mask.input && use_v;
  const int64_t pixels = p.out_h * p.out_w, plane = p.in_h * p.in_w;
  const int64_t blocks = plan.channel_blocks, cb = plan.channel_block;
  const int64_t chunks = plan.pixel_chunks, chunk = plan.chunk_pixels;
  T* partials = reinterpret_cast<T*>(ws + plan.input_partials);
  T* grid_partials = reinterpret_cast<T*>(ws + plan.grid_partials);
  const Shape4& is = input.strides;
  const Shape4& es = gg_dx.strides;
  const Shape4& as = plan.direct_input ? d_input.strides : Shape4{0, 0, p.in_w, 1};

#pragma omp parallel num_threads(plan.threads)
  {
#pragma omp for schedule(static)
    for (int64_t task = 0; task < p.n * blocks * chunks; ++task) {
      const int64_t n = task / (blocks * chunks);
      const int64_t block = (task / chunks) % blocks;
      const int64_t part = task % chunks;
      const int64_t c0 = block * cb, c1 = std::min(p.c, c0 + cb);
      const int64_t q0 = part * chunk, q1 = std::min(pixels, q0 + chunk);
      // This task's accumulator plane of channel c.
      auto acc_plane = [&](int64_t c) -> T* {
        if (plan.direct_input) return reinterpret_cast<T*>(at<S>(d_input, n, c, 0, 0));
        return partials + ((n * p.c + c) * chunks + part) * plane;
      };
      if (mask.input) {
        for (int64_t c = c0; c < c1; ++c) {
          T* a = acc_plane(c);
          for (int64_t y = 0; y < p.in_h; ++y) {
            for (int64_t x = 0; x < p.in_w; ++x) a[y * as[2] + x * as[3]] = T(0);
          }
        }
      }
      for (int64_t q = q0; q < q1; ++q) {
        const int64_t h = q / p.out_w, w = q % p.out_w;
        const PixelStencil<T, K> ps = pixel_stencil<S, M, P, kAlign>(p, grid, gg_dgrid, use_v, n, h, w);
        const Stencil<T, K>& st = ps.st;
        const Curvature<T, K>& cv = ps.cv;
        const T px = ps.px, py = ps.py;
        // Per tap: v (d_grad's and d_input's weight), the curvature terms of
        // d_grid, and where it lives in input, gg_dx and the accumulators.
        T v[K], sx[K], sy[K];
        int64_t in_off[K] = {}, e_off[K] = {}, a_off[K] = {};
        int valid[K] = {};
        int taps = 0;
        for (int k = 0; k < K; ++k) {
          if (!st.valid[k]) continue;
          valid[taps] = k;
          in_off[taps] = st.y[k] * is[2] + st.x[k] * is[3];
          e_off[taps] = st.y[k] * es[2] + st.x[k] * es[3];
          a_off[taps] = st.y[k] * as[2] + st.x[k] * as[3];
          v[taps] = px * st.dw_dx[k] + py * st.dw_dy[k];
          sx[taps] = px * cv.xx[k] + py * cv.xy[k];
          sy[taps] = px * cv.xy[k] + py * cv.yy[k];
          ++taps;
        }
        T tx = 0, ty = 0;
        for (int64_t c = c0; c < c1; ++c) {
          const T g = load(*at<S>(grad, n, c, h, w));
          const S* xin = at<S>(input, n, c, 0, 0);
          const S* e = use_e ? at<S>(gg_dx, n, c, 0, 0) : nullptr;
          T* acc = scatter ? acc_plane(c) : nullptr;
          T dg = 0, ex = 0, ey = 0, vx = 0, vy = 0;
          for (int t = 0; t < taps; ++t) {
            const int k = valid[t];
            if (use_e) {
              const T ev = load(e[e_off[t]]);
              dg += st.w[k] * ev;
              if constexpr (kSmooth) {
                ex += ev * st.dw_dx[k];
                ey += ev * st.dw_dy[k];
              }
            }
            if (use_v) {
              const T xv = load(xin[in_off[t]]);
              dg += v[t] * xv;
              vx += xv * sx[t];
              vy += xv * sy[t];
              if (scatter) acc[a_off[t]] += v[t] * g;
            }
          }
          if (mask.grad) *at<S>(d_grad, n, c, h, w) = store<S>(dg);
          if constexpr (kSmooth) {
            tx += g * (ex + vx);
            ty += g * (ey + vy);
          }
        }
        if (mask.grid) {
          store_grid<S>(plan, d_grid, grid_partials, n, block, h, w, st.mult_x * tx, st.mult_y * ty);
        }
      }
    }

    // Fixed-order sums of what spans tasks (the barrier of the loop above
    // has made every partial visible).
    if (mask.input && !plan.direct_input) {
#pragma omp for schedule(static)
      for (int64_t nc = 0; nc < p.n * p.c; ++nc) {
        const int64_t n = nc / p.c, c = nc % p.c;
        const T* first = partials + nc * chunks * plane;
        for (int64_t y = 0; y < p.in_h; ++y) {
          S* row = at<S>(d_input, n, c, y, 0);
          for (int64_t x = 0; x < p.in_w; ++x) {
            T sum = scatter ? first[y * p.in_w + x] : T(0);
            for (int64_t part = 1; scatter && part < chunks; ++part) sum += first[part * plane + y * p.in_w + x];
            row[x * d_input.strides[3]] = store<S>(sum);
          }
        }
      }
    }
    if (mask.grid && blocks > 1) sum_grid_partials<S>(plan, grid_partials, d_grid);
  }
}

// The interleaved driver: the same sums as run_planar, per tap a loop over
// the block's channels through contiguous rows of the copies.
template <class S, Interpolation M, Padding P, bool kAlign>
void run_interleaved(const DoubleBackwardPlan& plan, const TensorView& gg_dx, const TensorView& gg_dgrid,
                     const TensorView& grad, const TensorView& input, const TensorView& grid,
                     const MutableTensorView& d_grad, const MutableTensorView& d_input,
                     const MutableTensorView& d_grid, unsigned char* ws) {
  using T = compute_t<S>;
  constexpr int K = kTaps<M>;
  constexpr bool kSmooth = M != Interpolation::kNearest;
  const Problem& p = plan.problem;
  const DoubleBackwardMask mask = plan.mask;
  const bool use_e = plan.has_gg_dx;
  const bool use_v = plan.has_gg_dgrid && kSmooth;
  const bool scatter = mask.input && use_v;
  const int64_t pixels = p.out_h * p.out_w, plane = p.in_h * p.in_w;
  const int64_t blocks = plan.channel_blocks, cb = plan.channel_block;
  const int64_t chunks = plan.pixel_chunks, chunk = plan.chunk_pixels;
  T* values = reinterpret_cast<T*>(ws + plan.values);
  T* gg_values = reinterpret_cast<T*>(ws + plan.gg_values);
  T* partials = reinterpret_cast<T*>(ws + plan.input_partials);
  T* grid_partials = reinterpret_cast<T*>(ws + plan.grid_partials);
  const int64_t slab = plane * cb;  // one (n, block)'s copy

#pragma omp parallel num_threads(plan.threads)
  {
    // The copies: tasks (n, block, input row).
#pragma omp for schedule(static)
    for (int64_t task = 0; task < p.n * blocks * p.in_h; ++task) {
      const int64_t nb = task / p.in_h, y = task % p.in_h;
      const int64_t n = nb / blocks, c0 = (nb % blocks) * cb, c1 = std::min(p.c, c0 + cb);
      for (int a = 0; a < 2; ++a) {
        if (a == 0 ? !use_v : !use_e) continue;
        const TensorView& t = a == 0 ? input : gg_dx;
        T* out = (a == 0 ? values : gg_values) + nb * slab + y * p.in_w * cb;
        for (int64_t c = c0; c < c1; ++c) {
          const S* src = at<S>(t, n, c, y, 0);
          for (int64_t x = 0; x < p.in_w; ++x) out[x * cb + (c - c0)] = load(src[x * t.strides[3]]);
        }
      }
    }

    T sink[kMaxBlock];  // d_input's row when it is not wanted
#pragma omp for schedule(static)
    for (int64_t task = 0; task < p.n * blocks * chunks; ++task) {
      const int64_t nb = task / chunks, part = task % chunks;
      const int64_t n = nb / blocks, block = nb % blocks;
      const int64_t c0 = block * cb, c1 = std::min(p.c, c0 + cb), nc = c1 - c0;
      const int64_t q0 = part * chunk, q1 = std::min(pixels, q0 + chunk);
      const T* X = values + nb * slab;
      const T* E = gg_values + nb * slab;
      T* A = scatter ? partials + task * slab : nullptr;
      if (scatter) std::fill_n(A, slab, T(0));
      for (int64_t q = q0; q < q1; ++q) {
        const int64_t h = q / p.out_w, w = q % p.out_w;
        const PixelStencil<T, K> ps = pixel_stencil<S, M, P, kAlign>(p, grid, gg_dgrid, use_v, n, h, w);
        const Stencil<T, K>& st = ps.st;
        const Curvature<T, K>& cv = ps.cv;
        const T px = ps.px, py = ps.py;
        T G[kMaxBlock], dg[kMaxBlock], txv[kMaxBlock], tyv[kMaxBlock];
        for (int64_t c = 0; c < nc; ++c) {
          G[c] = load(*at<S>(grad, n, c0 + c, h, w));
          dg[c] = txv[c] = tyv[c] = T(0);
        }
        for (int k = 0; k < K; ++k) {
          if (!st.valid[k]) continue;
          const int64_t off = (st.y[k] * p.in_w + st.x[k]) * cb;
          const T wk = st.w[k], ax = st.dw_dx[k], ay = st.dw_dy[k];
          if (use_v) {
            const T v = px * ax + py * ay;
            const T sx = px * cv.xx[k] + py * cv.xy[k], sy = px * cv.xy[k] + py * cv.yy[k];
            const T* xr = X + off;
            T* ar = scatter ? A + off : sink;
            if (use_e) {
              const T* er = E + off;
              for (int64_t c = 0; c < nc; ++c) {
                dg[c] += wk * er[c] + v * xr[c];
                ar[c] += v * G[c];
                txv[c] += G[c] * (er[c] * ax + xr[c] * sx);
                tyv[c] += G[c] * (er[c] * ay + xr[c] * sy);
              }
            } else {
              for (int64_t c = 0; c < nc; ++c) {
                dg[c] += v * xr[c];
                ar[c] += v * G[c];
                txv[c] += G[c] * (xr[c] * sx);
                tyv[c] += G[c] * (xr[c] * sy);
              }
            }
          } else if (use_e) {
            const T* er = E + off;
            for (int64_t c = 0; c < nc; ++c) {
              dg[c] += wk * er[c];
              if constexpr (kSmooth) {
                txv[c] += G[c] * (er[c] * ax);
                tyv[c] += G[c] * (er[c] * ay);
              }
            }
          }
        }
        if (mask.grad) {
          for (int64_t c = 0; c < nc; ++c) *at<S>(d_grad, n, c0 + c, h, w) = store<S>(dg[c]);
        }
        if (mask.grid) {
          T tx = 0, ty = 0;
          if constexpr (kSmooth) {
            for (int64_t c = 0; c < nc; ++c) {
              tx += txv[c];
              ty += tyv[c];
            }
          }
          store_grid<S>(plan, d_grid, grid_partials, n, block, h, w, st.mult_x * tx, st.mult_y * ty);
        }
      }
    }

    // d_input: the chunks' channel-minor sums in chunk order (whole rows of
    // lanes at a time), rounded once into d_input's layout; tasks (n, block,
    // input row).
    if (mask.input) {
#pragma omp for schedule(static)
      for (int64_t task = 0; task < p.n * blocks * p.in_h; ++task) {
        const int64_t nb = task / p.in_h, y = task % p.in_h;
        const int64_t n = nb / blocks, c0 = (nb % blocks) * cb, nc = std::min(p.c, c0 + cb) - c0;
        T sum[kMaxBlock];
        for (int64_t x = 0; x < p.in_w; ++x) {
          if (scatter) {
            const T* a = partials + nb * chunks * slab + (y * p.in_w + x) * cb;
            for (int64_t c = 0; c < nc; ++c) sum[c] = a[c];
            for (int64_t part = 1; part < chunks; ++part) {
              for (int64_t c = 0; c < nc; ++c) sum[c] += a[part * slab + c];
            }
          } else {
            std::fill_n(sum, nc, T(0));
          }
          for (int64_t c = 0; c < nc; ++c) *at<S>(d_input, n, c0 + c, y, x) = store<S>(sum[c]);
        }
      }
    }
    if (mask.grid && blocks > 1) sum_grid_partials<S>(plan, grid_partials, d_grid);
  }
}

template <class S, Interpolation M, Padding P, bool kAlign>
void run(const DoubleBackwardPlan& plan, const TensorView& gg_dx, const TensorView& gg_dgrid,
         const TensorView& grad, const TensorView& input, const TensorView& grid,
         const MutableTensorView& d_grad, const MutableTensorView& d_input, const MutableTensorView& d_grid,
         unsigned char* ws) {
  if (plan.interleaved) {
    run_interleaved<S, M, P, kAlign>(plan, gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid, ws);
  } else {
    run_planar<S, M, P, kAlign>(plan, gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid, ws);
  }
}

using RunFn = void (*)(const DoubleBackwardPlan&, const TensorView&, const TensorView&, const TensorView&,
                       const TensorView&, const TensorView&, const MutableTensorView&, const MutableTensorView&,
                       const MutableTensorView&, unsigned char*);

template <class S, Interpolation M, Padding P>
RunFn pick_align(bool align) {
  return align ? &run<S, M, P, true> : &run<S, M, P, false>;
}
template <class S, Interpolation M>
RunFn pick_padding(const Options& o) {
  switch (o.padding) {
    case Padding::kZeros: return pick_align<S, M, Padding::kZeros>(o.align_corners);
    case Padding::kBorder: return pick_align<S, M, Padding::kBorder>(o.align_corners);
    case Padding::kReflection: break;
  }
  return pick_align<S, M, Padding::kReflection>(o.align_corners);
}
template <class S>
RunFn pick_mode(const Options& o) {
  switch (o.interpolation) {
    case Interpolation::kBilinear: return pick_padding<S, Interpolation::kBilinear>(o);
    case Interpolation::kNearest: return pick_padding<S, Interpolation::kNearest>(o);
    case Interpolation::kBicubic: break;
  }
  return pick_padding<S, Interpolation::kBicubic>(o);
}

}  // namespace

DoubleBackwardPlan plan_double_backward(const Problem& p, DoubleBackwardMask mask, bool has_gg_dx,
                                        bool has_gg_dgrid) {
  DoubleBackwardPlan plan;
  plan.problem = p;
  plan.mask = mask;
  plan.has_gg_dx = has_gg_dx;
  plan.has_gg_dgrid = has_gg_dgrid;
  const int64_t pixels = p.out_h * p.out_w;
  const uint64_t elem = p.dtype == DType::kFloat64 ? sizeof(double) : sizeof(float);
  const uint64_t planes_bytes = mul(mul(mul(static_cast<uint64_t>(p.n), static_cast<uint64_t>(p.c)),
                                        static_cast<uint64_t>(p.in_h * p.in_w)),
                                    elem);
  // Pixel chunks first (no stencil is built twice), as many as the
  // accumulators they need allow; then channel blocks.
  int64_t chunks = 1;
  if (p.n > 0 && p.n < kMinTasks && pixels >= 2 * kMinChunkPixels) {
    chunks = std::min((kMinTasks + p.n - 1) / p.n, pixels / kMinChunkPixels);
    if (mask.input && has_gg_dgrid) {
      const uint64_t fit = planes_bytes == 0 ? 1 : kMaxPartialBytes / planes_bytes;
      chunks = std::max<int64_t>(1, std::min<int64_t>(chunks, static_cast<int64_t>(std::min<uint64_t>(fit, 1 << 20))));
    }
  }
  plan.pixel_chunks = chunks;
  plan.chunk_pixels = (pixels + chunks - 1) / chunks;
  int64_t blocks = 1;
  if (p.n > 0 && p.n * chunks < kMinTasks && p.c > 1 && pixels > 0) {
    blocks = std::min(p.c, (kMinTasks + p.n * chunks - 1) / (p.n * chunks));
  }
  plan.channel_block = std::max<int64_t>(1, (p.c + blocks - 1) / blocks);
  plan.channel_blocks = std::max<int64_t>(1, (p.c + plan.channel_block - 1) / plan.channel_block);
  const bool compute_type = p.dtype == DType::kFloat32 || p.dtype == DType::kFloat64;
  const bool smooth = p.options.interpolation != Interpolation::kNearest;
  const bool scatter = mask.input && has_gg_dgrid && smooth;
  const bool need_values = has_gg_dgrid && smooth;
  const auto plane = static_cast<uint64_t>(p.in_h * p.in_w);
  // The interleaved split: blocks of at most kMaxBlock channels, split
  // further for tasks while blocks keep 8 channels or more (a narrower run
  // gains little over planes; blocks cost no memory, unlike pixel chunks,
  // each of which needs accumulators as large as the block's copy), then
  // pixel chunks as the accumulators' bound allows.
  int64_t i_blocks = 1, i_block = 1, i_chunks = 1;
  uint64_t copy_bytes = 0, i_bytes = kSaturated;
  if (p.c >= 2 && p.n > 0 && pixels > 0) {
    i_blocks = std::max((p.c + kMaxBlock - 1) / kMaxBlock,
                        std::min((kMinTasks / 2 + p.n - 1) / p.n, std::max<int64_t>(1, p.c / 32)));
    i_block = (p.c + i_blocks - 1) / i_blocks;
    i_blocks = (p.c + i_block - 1) / i_block;
    copy_bytes = mul(mul(mul(static_cast<uint64_t>(p.n), static_cast<uint64_t>(i_blocks)),
                         mul(plane, static_cast<uint64_t>(i_block))),
                     elem);
    if (p.n * i_blocks < kMinTasks / 2 && pixels >= 2 * kMinChunkPixels) {
      i_chunks = std::min((kMinTasks / 2 + p.n * i_blocks - 1) / (p.n * i_blocks), pixels / kMinChunkPixels);
      if (scatter) {
        const uint64_t fit = copy_bytes == 0 ? 1 : kMaxPartialBytes / copy_bytes;
        i_chunks = std::clamp<int64_t>(static_cast<int64_t>(std::min<uint64_t>(fit, 1 << 20)), 1, i_chunks);
      }
    }
    i_bytes = mul(copy_bytes, (need_values ? 1 : 0) + (has_gg_dx ? 1 : 0) +
                                  (scatter ? static_cast<uint64_t>(i_chunks) : 0));
  }
  plan.interleaved = i_bytes <= kMaxInterleavedBytes;
  uint64_t bytes = 64;  // slack to align the start
  if (plan.interleaved) {
    chunks = i_chunks;
    plan.pixel_chunks = chunks;
    plan.chunk_pixels = (pixels + chunks - 1) / chunks;
    plan.channel_block = i_block;
    plan.channel_blocks = i_blocks;
    if (need_values) {
      plan.values = bytes - 64;
      bytes = align_up(bytes + copy_bytes);
    }
    if (has_gg_dx) {
      plan.gg_values = bytes - 64;
      bytes = align_up(bytes + copy_bytes);
    }
    if (scatter) {
      plan.input_partials = bytes - 64;
      bytes = align_up(bytes + mul(copy_bytes, static_cast<uint64_t>(chunks)));
    }
  } else {
    plan.direct_input = compute_type && chunks == 1;
    if (mask.input && !plan.direct_input) {
      plan.input_partials = bytes - 64;
      bytes = align_up(bytes + mul(planes_bytes, static_cast<uint64_t>(chunks)));
    }
  }
  // No more threads than tasks (core/threads.hpp bounds the call's count).
  const uint64_t tasks = mul(mul(static_cast<uint64_t>(p.n), static_cast<uint64_t>(plan.channel_blocks)),
                             static_cast<uint64_t>(chunks));
  plan.threads = static_cast<int>(
      std::clamp<uint64_t>(tasks, 1, static_cast<uint64_t>(detail::call_threads(p.options.num_threads))));
  if (mask.grid && plan.channel_blocks > 1) {
    plan.grid_partials = bytes - 64;
    bytes = align_up(bytes + mul(mul(mul(static_cast<uint64_t>(p.n), plan.channel_blocks),
                                     static_cast<uint64_t>(pixels)),
                                 2 * elem));
  }
  plan.workspace_bytes = bytes == 64 ? 0 : (bytes >= kSaturated ? SIZE_MAX : static_cast<std::size_t>(bytes));
  return plan;
}

void run_double_backward(const DoubleBackwardPlan& plan, const TensorView& gg_dx, const TensorView& gg_dgrid,
                         const TensorView& grad, const TensorView& input, const TensorView& grid,
                         const MutableTensorView& d_grad, const MutableTensorView& d_input,
                         const MutableTensorView& d_grid, void* workspace) {
  const auto addr = reinterpret_cast<std::uintptr_t>(workspace);
  auto* aligned = workspace == nullptr ? nullptr : reinterpret_cast<unsigned char*>((addr + 63) / 64 * 64);
  const RunFn fn = visit_dtype(plan.problem.dtype, [&](auto tag) { return pick_mode<decltype(tag)>(plan.problem.options); });
  fn(plan, gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid, aligned);
}

}  // namespace gridsampler::cpu
