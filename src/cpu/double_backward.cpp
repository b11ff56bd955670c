// The double backward's planner and driver (see double_backward.hpp).
//
// Scalar code over output pixels, with the channel loop inside: the stencil
// (taps, weights, their first and second derivatives) is built once per
// pixel and serves every channel of the task. The weights of a pixel's taps
// differ per pixel, so there is no dense inner loop for SIMD to take without
// gathers and scatters; the first-order kernels' vector machinery answers a
// different question (many channels sharing one weight set per tap), which
// the channel loop here already exploits.
//
// One driver serves images and volumes: G, the number of grid components
// (2 or 3), is a template parameter. Every per-component sum runs over
// a = 0 .. G-1 in that order, so the 2-D instantiations do the 2-D arithmetic
// in the 2-D order; volumes add a depth axis to the offsets and loops.
#include "cpu/double_backward.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <type_traits>

#include "core/coords.hpp"
#include "core/dtype.hpp"
#include "core/threads.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/stencil.hpp"

namespace gridsampler::cpu {
namespace {

using detail::Problem;

// Splits (fixed, shape-only): at least kMinTasks tasks where the problem is
// big enough, pixel chunks of at least kMinChunkPixels, and pixel-chunk
// accumulators of at most kMaxPartialBytes.
// (The double backward's own values, apart from the first order's in
// cpu/tuning.hpp.)
namespace split {
constexpr int64_t kMinTasks = 16;
constexpr int64_t kMinChunkPixels = 2048;
constexpr uint64_t kMaxPartialBytes = uint64_t{64} << 20;
// Interleaved tasks hold at most kMaxBlock channels (their per-channel sums
// live on the stack), and their copies and accumulators at most
// kMaxInterleavedBytes in all; beyond that, planes.
constexpr int64_t kMaxBlock = kSecondOrderMaxBlock;
constexpr uint64_t kMaxInterleavedBytes = uint64_t{512} << 20;
}  // namespace split
using split::kMaxBlock;
constexpr uint64_t kSaturated = UINT64_MAX;

uint64_t mul(uint64_t a, uint64_t b) {
  uint64_t r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kSaturated : r;
}
uint64_t align_up(uint64_t v) { return v >= kSaturated - 63 ? kSaturated : (v + 63) / 64 * 64; }

// Views of images (G = 2, rank 4) and volumes (G = 3, rank 5).
template <int G>
using InView = BasicTensorView<const void*, G + 2>;
template <int G>
using OutView = BasicTensorView<void*, G + 2>;

// The first-order stencil of G components: taps, weights, derivatives.
template <Interpolation M, int G>
inline constexpr int kTapsG = G == 2 ? kTaps<M> : kTaps3<M>;
template <class T, int K, int G>
using StencilG = std::conditional_t<G == 2, Stencil<T, K>, Stencil3<T, K>>;

// Uniform access to the two stencil types; `a` is a component (0 x, 1 y,
// 2 z), constant after unrolling.
template <class T, int K>
T dw(const Stencil<T, K>& s, int a, int k) {
  return a == 0 ? s.dw_dx[k] : s.dw_dy[k];
}
template <class T, int K>
T dw(const Stencil3<T, K>& s, int a, int k) {
  return s.dw[a][k];
}
template <class T, int K>
T mult(const Stencil<T, K>& s, int a) {
  return a == 0 ? s.mult_x : s.mult_y;
}
template <class T, int K>
T mult(const Stencil3<T, K>& s, int a) {
  return s.mult[a];
}
// Tap k's offset for spatial strides st = (depth, height, width); images
// have no depth.
template <class T, int K>
int64_t tap_offset(const Stencil<T, K>& s, int k, const int64_t st[3]) {
  return s.y[k] * st[1] + s.x[k] * st[2];
}
template <class T, int K>
int64_t tap_offset(const Stencil3<T, K>& s, int k, const int64_t st[3]) {
  return s.z[k] * st[0] + s.y[k] * st[1] + s.x[k] * st[2];
}

// Tap k's pixel index in a dense [z][y][x] plane (the interleaved copies),
// from the problem's sizes: no array a parallel region would have to share.
template <class T, int K>
int64_t dense_offset(const Stencil<T, K>& s, int k, const Problem& p) {
  return s.y[k] * p.in_w + s.x[k];
}
template <class T, int K>
int64_t dense_offset(const Stencil3<T, K>& s, int k, const Problem& p) {
  return (s.z[k] * p.in_h + s.y[k]) * p.in_w + s.x[k];
}

// Second derivatives of a stencil's weights with respect to the pixel
// coordinates, in the stencil's tap order, stored once per pair a <= b:
// images xx, xy, yy; volumes xx, xy, xz, yy, yz, zz.
template <class T, int K, int G>
struct Curvature {
  T h[G * (G + 1) / 2][K];
};
template <int G>
constexpr int pair_index(int a, int b) {
  return a <= b ? a * G - a * (a - 1) / 2 + (b - a) : pair_index<G>(b, a);
}

template <Interpolation M, Padding P, bool kAlign, class T>
void build_curvature(const T* g, const int64_t size[3], Curvature<T, kTaps<M>, 2>* c) {
  if constexpr (M == Interpolation::kBilinear) {
    // Bilinear in (ix, iy): only the mixed derivative, +-1 (tap order of
    // bilinear_taps: (y0, x0), (y0, x0 + 1), (y0 + 1, x0), (y0 + 1, x0 + 1)).
    constexpr T kMixed[4] = {1, -1, -1, 1};
    for (int k = 0; k < 4; ++k) {
      c->h[0][k] = 0;
      c->h[1][k] = kMixed[k];
      c->h[2][k] = 0;
    }
  } else if constexpr (M == Interpolation::kBicubic) {
    T mx = 0, my = 0;
    const T ix = coords::bicubic_source<P>(g[0], size[2], kAlign, &mx);
    const T iy = coords::bicubic_source<P>(g[1], size[1], kAlign, &my);
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
        c->h[0][j * 4 + i] = hcx[i] * cy[j];
        c->h[1][j * 4 + i] = gcx[i] * gcy[j];
        c->h[2][j * 4 + i] = cx[i] * hcy[j];
      }
    }
  } else {
    (void)g, (void)size, (void)c;
  }
}

// Volumes: w = wx wy wz, so a second derivative along two axes is the
// product of their first derivatives and the third axis's weight, and along
// one axis twice that axis's second derivative times the other weights
// (0 for linear weights: trilinear has only the mixed terms). Tap order of
// build_stencil_3d (z, y, x; x fastest).
template <Interpolation M, Padding P, bool kAlign, class T>
void build_curvature(const T* g, const int64_t size[3], Curvature<T, kTaps3<M>, 3>* c) {
  if constexpr (M == Interpolation::kBilinear) {
    T m = 0;
    const T ix = coords::source_index<P>(g[0], size[2], kAlign, &m);
    const T iy = coords::source_index<P>(g[1], size[1], kAlign, &m);
    const T iz = coords::source_index<P>(g[2], size[0], kAlign, &m);
    const T tx = ix - std::floor(ix), ty = iy - std::floor(iy), tz = iz - std::floor(iz);
    const T wx[2] = {T(1) - tx, tx}, wy[2] = {T(1) - ty, ty}, wz[2] = {T(1) - tz, tz};
    const T sign[2] = {T(-1), T(1)};
    for (int k = 0; k < 2; ++k) {
      for (int j = 0; j < 2; ++j) {
        for (int i = 0; i < 2; ++i) {
          const int t = k * 4 + j * 2 + i;
          c->h[0][t] = 0;
          c->h[1][t] = sign[i] * sign[j] * wz[k];
          c->h[2][t] = sign[i] * wy[j] * sign[k];
          c->h[3][t] = 0;
          c->h[4][t] = wx[i] * sign[j] * sign[k];
          c->h[5][t] = 0;
        }
      }
    }
  } else if constexpr (M == Interpolation::kBicubic) {
    T m = 0;
    const T ix = coords::bicubic_source<P>(g[0], size[2], kAlign, &m);
    const T iy = coords::bicubic_source<P>(g[1], size[1], kAlign, &m);
    const T iz = coords::bicubic_source<P>(g[2], size[0], kAlign, &m);
    const T tx = ix - std::floor(ix), ty = iy - std::floor(iy), tz = iz - std::floor(iz);
    T cx[4], cy[4], cz[4], gx[4], gy[4], gz[4], hx[4], hy[4], hz[4];
    coords::cubic_weights(tx, cx);
    coords::cubic_weights(ty, cy);
    coords::cubic_weights(tz, cz);
    coords::cubic_weight_grads(tx, gx);  // minus the first derivatives: pairs of them keep their sign
    coords::cubic_weight_grads(ty, gy);
    coords::cubic_weight_grads(tz, gz);
    coords::cubic_weight_curvatures(tx, hx);
    coords::cubic_weight_curvatures(ty, hy);
    coords::cubic_weight_curvatures(tz, hz);
    for (int k = 0; k < 4; ++k) {
      for (int j = 0; j < 4; ++j) {
        for (int i = 0; i < 4; ++i) {
          const int t = (k * 4 + j) * 4 + i;
          c->h[0][t] = hx[i] * cy[j] * cz[k];
          c->h[1][t] = gx[i] * gy[j] * cz[k];
          c->h[2][t] = gx[i] * cy[j] * gz[k];
          c->h[3][t] = cx[i] * hy[j] * cz[k];
          c->h[4][t] = cx[i] * gy[j] * gz[k];
          c->h[5][t] = cx[i] * cy[j] * hz[k];
        }
      }
    }
  } else {
    (void)g, (void)size, (void)c;
  }
}

// An output pixel (voxel): its spatial index (h, w) or (d, h, w).
template <int G>
struct Pixel {
  int64_t i[G];
};
template <int G>
Pixel<G> pixel_at(const Problem& p, int64_t q) {
  if constexpr (G == 2) {
    return {{q / p.out_w, q % p.out_w}};
  } else {
    const int64_t hw = p.out_h * p.out_w, r = q % hw;
    return {{q / hw, r / p.out_w, r % p.out_w}};
  }
}

// Elements of tensors shaped like input or grad, (n, c, spatial...), and
// like grid, (n, spatial..., component).
template <class S, class V>
auto* elem(const V& t, int64_t n, int64_t c, const int64_t* sp) {
  using Out = std::conditional_t<std::is_const_v<std::remove_pointer_t<decltype(t.data)>>, const S, S>;
  constexpr std::size_t kRank = std::tuple_size_v<decltype(t.strides)>;
  int64_t off = n * t.strides[0] + c * t.strides[1];
  for (std::size_t i = 2; i < kRank; ++i) off += sp[i - 2] * t.strides[i];
  return static_cast<Out*>(t.data) + off;
}
// The first element of plane (n, c).
template <class S, class V>
auto* plane_at(const V& t, int64_t n, int64_t c) {
  using Out = std::conditional_t<std::is_const_v<std::remove_pointer_t<decltype(t.data)>>, const S, S>;
  return static_cast<Out*>(t.data) + n * t.strides[0] + c * t.strides[1];
}
template <class S, class V, int G>
auto* elem(const V& t, int64_t n, int64_t c, const Pixel<G>& px) {
  return elem<S>(t, n, c, px.i);
}
template <class S, class V, int G>
auto* grid_elem(const V& t, int64_t n, const Pixel<G>& px) {
  using Out = std::conditional_t<std::is_const_v<std::remove_pointer_t<decltype(t.data)>>, const S, S>;
  int64_t off = n * t.strides[0];
  for (int i = 0; i < G; ++i) off += px.i[i] * t.strides[1 + i];
  return static_cast<Out*>(t.data) + off;
}
// The spatial strides (depth, height, width) of an input-shaped view.
template <int G, class V>
void spatial_strides(const V& t, int64_t st[3]) {
  st[0] = G == 3 ? t.strides[2] : 0;
  st[1] = t.strides[G];
  st[2] = t.strides[G + 1];
}

// What both drivers build for one output pixel: its stencil, the weights'
// second derivatives, and gg_dgrid in pixel units (0 when unused).
template <class T, int K, int G>
struct PixelStencil {
  StencilG<T, K, G> st;
  Curvature<T, K, G> cv;
  T pg[G] = {};
};

// gg_dgrid of one pixel in pixel units: each component times its multiplier.
template <class S, int G, class T>
[[gnu::always_inline]] inline void gg_dgrid_in_pixels(const InView<G>& gg_dgrid, int64_t n, const Pixel<G>& px,
                                                      const T* mult, T* pg) {
  const S* gg = grid_elem<S>(gg_dgrid, n, px);
  for (int a = 0; a < G; ++a) pg[a] = load(gg[a * gg_dgrid.strides[G + 1]]) * mult[a];
}

// Inlined into the pixel loops: called once per output pixel, and a call
// (with its returned struct) cost 10% more instructions on small problems.
template <class S, Interpolation M, Padding P, bool kAlign, int G>
[[gnu::always_inline]] inline PixelStencil<compute_t<S>, kTapsG<M, G>, G> pixel_stencil(
    const Problem& p, const InView<G>& grid, const InView<G>& gg_dgrid, bool use_v, int64_t n, const Pixel<G>& px) {
  using T = compute_t<S>;
  PixelStencil<T, kTapsG<M, G>, G> ps;
  const S* g2 = grid_elem<S>(grid, n, px);
  T g[G];
  for (int a = 0; a < G; ++a) g[a] = load(g2[a * grid.strides[G + 1]]);
  const int64_t size[3] = {p.in_d, p.in_h, p.in_w};
  if constexpr (G == 2) {
    build_stencil<M, P, kAlign>(g[0], g[1], p.in_h, p.in_w, &ps.st);
  } else {
    build_stencil_3d<M, P, kAlign>(g[0], g[1], g[2], size, &ps.st);
  }
  build_curvature<M, P, kAlign>(g, size, &ps.cv);
  if (use_v) {
    T m[G];
    for (int a = 0; a < G; ++a) m[a] = mult(ps.st, a);
    gg_dgrid_in_pixels<S>(gg_dgrid, n, px, m, ps.pg);
  }
  return ps;
}

// One pixel's taps as the interleaved driver reads them, from the scalar
// stencil or from a tile of the first-order vector builders (whose taps,
// weights and derivatives are the scalar stencil's bits): validity, dense
// [z][y][x] index, weight, its derivatives and the multipliers, with the
// curvature and gg_dgrid in pixel units.
template <class T, int K, int G>
struct PixelTaps {
  bool valid[K];
  int64_t dense[K];
  T w[K];
  T dw[G][K];
  T mult[G];
  Curvature<T, K, G> cv;
  T pg[G] = {};
};

template <class S, Interpolation M, Padding P, bool kAlign, int G>
[[gnu::always_inline]] inline void taps_from_stencil(const Problem& p, const InView<G>& grid,
                                                     const InView<G>& gg_dgrid, bool use_v, int64_t n,
                                                     const Pixel<G>& px, PixelTaps<compute_t<S>, kTapsG<M, G>, G>* pt) {
  const auto ps = pixel_stencil<S, M, P, kAlign>(p, grid, gg_dgrid, use_v, n, px);
  for (int k = 0; k < kTapsG<M, G>; ++k) {
    pt->valid[k] = ps.st.valid[k];
    pt->dense[k] = dense_offset(ps.st, k, p);
    pt->w[k] = ps.st.w[k];
    for (int a = 0; a < G; ++a) pt->dw[a][k] = dw(ps.st, a, k);
  }
  for (int a = 0; a < G; ++a) {
    pt->mult[a] = mult(ps.st, a);
    pt->pg[a] = ps.pg[a];
  }
  pt->cv = ps.cv;
}

// Pixel i of a flat-form tile (images): an invalid tap is the one whose
// index is `plane`.
template <class S, Interpolation M, Padding P, bool kAlign>
[[gnu::always_inline]] inline void taps_from_tile(const Problem& p, const InView<2>& grid, const InView<2>& gg_dgrid,
                                                  bool use_v, int64_t n, const Pixel<2>& px,
                                                  const Tile<compute_t<S>, kTaps<M>>& t, int i,
                                                  PixelTaps<compute_t<S>, kTaps<M>, 2>* pt) {
  using T = compute_t<S>;
  const int64_t plane = p.in_h * p.in_w;
  for (int k = 0; k < kTaps<M>; ++k) {
    pt->valid[k] = t.acc[k][i] != plane;
    pt->dense[k] = t.acc[k][i];
    pt->w[k] = t.w[k][i];
    pt->dw[0][k] = t.dw[0][k][i];
    pt->dw[1][k] = t.dw[1][k][i];
  }
  pt->mult[0] = t.mult[0][i];
  pt->mult[1] = t.mult[1][i];
  if constexpr (M == Interpolation::kBicubic) {
    const S* g2 = grid_elem<S>(grid, n, px);
    const T g[2] = {load(g2[0]), load(g2[grid.strides[3]])};
    const int64_t size[3] = {p.in_d, p.in_h, p.in_w};
    build_curvature<M, P, kAlign>(g, size, &pt->cv);
  } else {
    build_curvature<M, P, kAlign>(static_cast<const T*>(nullptr), nullptr, &pt->cv);
  }
  if (use_v) gg_dgrid_in_pixels<S>(gg_dgrid, n, px, pt->mult, pt->pg);
}

// A pixel's d_grid from one task: stored, or with several channel blocks
// kept as the block's partial sum.
template <class S, int G, class T>
void store_grid(const DoubleBackwardPlan& plan, const OutView<G>& d_grid, T* grid_partials, int64_t n,
                int64_t block, int64_t q, const Pixel<G>& px, const T* dg) {
  const detail::Problem& p = plan.problem;
  if (plan.channel_blocks == 1) {
    S* d = grid_elem<S>(d_grid, n, px);
    for (int a = 0; a < G; ++a) d[a * d_grid.strides[G + 1]] = store<S>(dg[a]);
  } else {
    const int64_t pixels = p.out_d * p.out_h * p.out_w;
    T* d = grid_partials + ((n * plan.channel_blocks + block) * pixels + q) * G;
    for (int a = 0; a < G; ++a) d[a] = dg[a];
  }
}

// The channel blocks' d_grid partial sums added in block order and stored;
// a work-sharing loop of the enclosing parallel region.
template <class S, int G, class T>
void sum_grid_partials(const DoubleBackwardPlan& plan, const T* grid_partials, const OutView<G>& d_grid) {
  const detail::Problem& p = plan.problem;
  const int64_t pixels = p.out_d * p.out_h * p.out_w, blocks = plan.channel_blocks;
#pragma omp for schedule(static)
  for (int64_t nq = 0; nq < p.n * pixels; ++nq) {
    const int64_t n = nq / pixels, q = nq % pixels;
    T sum[G] = {};
    for (int64_t block = 0; block < blocks; ++block) {
      const T* d = grid_partials + ((n * blocks + block) * pixels + q) * G;
      for (int a = 0; a < G; ++a) sum[a] += d[a];
    }
    S* d = grid_elem<S>(d_grid, n, pixel_at<G>(p, q));
    for (int a = 0; a < G; ++a) d[a * d_grid.strides[G + 1]] = store<S>(sum[a]);
  }
}

template <class S, Interpolation M, Padding P, bool kAlign, int G>
void run_planar(const DoubleBackwardPlan& plan, const InView<G>& gg_dx, const InView<G>& gg_dgrid,
                const InView<G>& grad, const InView<G>& input, const InView<G>& grid, const OutView<G>& d_grad,
                const OutView<G>& d_input, const OutView<G>& d_grid, unsigned char* ws) {
  using T = compute_t<S>;
  constexpr int K = kTapsG<M, G>;
  // nearest's weights are piecewise constant: d_input and d_grid get no
  // terms (they are zero, not 0 * grad).
  constexpr bool kSmooth = M != Interpolation::kNearest;
  const Problem& p = plan.problem;
  const DoubleBackwardMask mask = plan.mask;
  const bool use_e = plan.has_gg_dx;  // gg_dx's terms
  const bool use_v = kSmooth;         // gg_dgrid's terms (nearest has none)
  const bool scatter = mask.input && use_v;
  const int64_t pixels = p.out_d * p.out_h * p.out_w, plane = p.in_d * p.in_h * p.in_w;
  const int64_t blocks = plan.channel_blocks, cb = plan.channel_block;
  const int64_t chunks = plan.pixel_chunks, chunk = plan.chunk_pixels;
  T* partials = reinterpret_cast<T*>(ws + plan.input_partials);
  T* grid_partials = reinterpret_cast<T*>(ws + plan.grid_partials);
  int64_t is[3], es[3], as[3];
  spatial_strides<G>(input, is);
  spatial_strides<G>(gg_dx, es);
  if (plan.direct_input) {
    spatial_strides<G>(d_input, as);
  } else {
    as[0] = p.in_h * p.in_w, as[1] = p.in_w, as[2] = 1;
  }

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
        if (plan.direct_input) return reinterpret_cast<T*>(plane_at<S>(d_input, n, c));
        return partials + ((n * p.c + c) * chunks + part) * plane;
      };
      if (mask.input) {
        for (int64_t c = c0; c < c1; ++c) {
          T* a = acc_plane(c);
          for (int64_t z = 0; z < p.in_d; ++z) {
            for (int64_t y = 0; y < p.in_h; ++y) {
              for (int64_t x = 0; x < p.in_w; ++x) a[z * as[0] + y * as[1] + x * as[2]] = T(0);
            }
          }
        }
      }
      for (int64_t q = q0; q < q1; ++q) {
        const Pixel<G> px = pixel_at<G>(p, q);
        const PixelStencil<T, K, G> ps = pixel_stencil<S, M, P, kAlign>(p, grid, gg_dgrid, use_v, n, px);
        const StencilG<T, K, G>& st = ps.st;
        const Curvature<T, K, G>& cv = ps.cv;
        const T* pg = ps.pg;
        // Per tap: v (d_grad's and d_input's weight), the curvature terms of
        // d_grid, and where it lives in input, gg_dx and the accumulators.
        T v[K], s[G][K];
        int64_t in_off[K] = {}, e_off[K] = {}, a_off[K] = {};
        int valid[K] = {};
        int taps = 0;
        for (int k = 0; k < K; ++k) {
          if (!st.valid[k]) continue;
          valid[taps] = k;
          in_off[taps] = tap_offset(st, k, is);
          e_off[taps] = tap_offset(st, k, es);
          a_off[taps] = tap_offset(st, k, as);
          T vk = pg[0] * dw(st, 0, k);
          for (int a = 1; a < G; ++a) vk += pg[a] * dw(st, a, k);
          v[taps] = vk;
          for (int b = 0; b < G; ++b) {
            T sb = pg[0] * cv.h[pair_index<G>(0, b)][k];
            for (int a = 1; a < G; ++a) sb += pg[a] * cv.h[pair_index<G>(a, b)][k];
            s[b][taps] = sb;
          }
          ++taps;
        }
        T tg[G] = {};
        for (int64_t c = c0; c < c1; ++c) {
          const T g = load(*elem<S>(grad, n, c, px));
          const S* xin = plane_at<S>(input, n, c);
          const S* e = use_e ? plane_at<S>(gg_dx, n, c) : nullptr;
          T* acc = scatter ? acc_plane(c) : nullptr;
          T dg = 0, eg[G] = {}, vg[G] = {};
          for (int t = 0; t < taps; ++t) {
            const int k = valid[t];
            if (use_e) {
              const T ev = load(e[e_off[t]]);
              dg += st.w[k] * ev;
              if constexpr (kSmooth) {
                for (int a = 0; a < G; ++a) eg[a] += ev * dw(st, a, k);
              }
            }
            if (use_v) {
              const T xv = load(xin[in_off[t]]);
              dg += v[t] * xv;
              for (int a = 0; a < G; ++a) vg[a] += xv * s[a][t];
              if (scatter) acc[a_off[t]] += v[t] * g;
            }
          }
          if (mask.grad) *elem<S>(d_grad, n, c, px) = store<S>(dg);
          if constexpr (kSmooth) {
            for (int a = 0; a < G; ++a) tg[a] += g * (eg[a] + vg[a]);
          }
        }
        if (mask.grid) {
          T dgrid[G];
          for (int a = 0; a < G; ++a) dgrid[a] = mult(st, a) * tg[a];
          store_grid<S, G>(plan, d_grid, grid_partials, n, block, q, px, dgrid);
        }
      }
    }

    // Fixed-order sums of what spans tasks (the barrier of the loop above
    // has made every partial visible).
    if (mask.input && !plan.direct_input) {
      const int64_t rows = p.in_d * p.in_h;
#pragma omp for schedule(static)
      for (int64_t nc = 0; nc < p.n * p.c; ++nc) {
        const int64_t n = nc / p.c, c = nc % p.c;
        const T* first = partials + nc * chunks * plane;
        for (int64_t r = 0; r < rows; ++r) {
          const int64_t sp[3] = {r / p.in_h, r % p.in_h, 0};
          S* row = elem<S>(d_input, n, c, G == 3 ? sp : sp + 1);
          for (int64_t x = 0; x < p.in_w; ++x) {
            T sum = scatter ? first[r * p.in_w + x] : T(0);
            for (int64_t part = 1; scatter && part < chunks; ++part) sum += first[part * plane + r * p.in_w + x];
            row[x * d_input.strides[G + 1]] = store<S>(sum);
          }
        }
      }
    }
    if (mask.grid && blocks > 1) sum_grid_partials<S, G>(plan, grid_partials, d_grid);
  }
}

// The interleaved driver: the same sums as run_planar, per tap a loop over
// the block's channels through contiguous rows of the copies.
template <class S, Interpolation M, Padding P, bool kAlign, int G>
void run_interleaved(const DoubleBackwardPlan& plan, const InView<G>& gg_dx, const InView<G>& gg_dgrid,
                     const InView<G>& grad, const InView<G>& input, const InView<G>& grid,
                     const OutView<G>& d_grad, const OutView<G>& d_input, const OutView<G>& d_grid,
                     unsigned char* ws) {
  using T = compute_t<S>;
  constexpr int K = kTapsG<M, G>;
  constexpr bool kSmooth = M != Interpolation::kNearest;
  const Problem& p = plan.problem;
  const DoubleBackwardMask mask = plan.mask;
  const bool use_e = plan.has_gg_dx;
  const bool use_v = kSmooth;
  const bool scatter = mask.input && use_v;
  const int64_t pixels = p.out_d * p.out_h * p.out_w, plane = p.in_d * p.in_h * p.in_w;
  const int64_t rows = p.in_d * p.in_h;  // input rows (z, y)
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
    for (int64_t task = 0; task < p.n * blocks * rows; ++task) {
      const int64_t nb = task / rows, r = task % rows;
      const int64_t sp[3] = {r / p.in_h, r % p.in_h, 0};
      const int64_t n = nb / blocks, c0 = (nb % blocks) * cb, c1 = std::min(p.c, c0 + cb);
      for (int a = 0; a < 2; ++a) {
        if (a == 0 ? !use_v : !use_e) continue;
        const InView<G>& t = a == 0 ? input : gg_dx;
        T* out = (a == 0 ? values : gg_values) + nb * slab + r * p.in_w * cb;
        for (int64_t c = c0; c < c1; ++c) {
          const S* src = elem<S>(t, n, c, G == 3 ? sp : sp + 1);
          for (int64_t x = 0; x < p.in_w; ++x) out[x * cb + (c - c0)] = load(src[x * t.strides[G + 1]]);
        }
      }
    }

    SecondOrderTaps<T> taps;
    T tv[G * kMaxBlock];
    // A tile's grad and d_grad, [pixel][channel], its pixels, and where each
    // is in their planes.
    auto grad_rows = std::make_unique<T[]>(kTile * kMaxBlock);
    auto d_grad_rows = std::make_unique<T[]>(kTile * kMaxBlock);
    Pixel<G> pixels_at[kTile];
    std::ptrdiff_t grad_at[kTile], d_grad_at[kTile];
    // Images: each thread's tile of stencils from the first-order vector
    // builder (flat form), built for kTile pixels at a time.
    std::unique_ptr<Tile<T, K>> tile;
    TileSource src;
    if constexpr (G == 2) {
      if (plan.build != nullptr) {
        tile = std::make_unique<Tile<T, K>>();
        src = tile_source(p, grid, grad.strides, input.strides, /*derivatives=*/true, /*wide_indices=*/true);
      }
    }
#pragma omp for schedule(static)
    for (int64_t task = 0; task < p.n * blocks * chunks; ++task) {
      const int64_t nb = task / chunks, part = task % chunks;
      const int64_t n = nb / blocks, block = nb % blocks;
      const int64_t c0 = block * cb, c1 = std::min(p.c, c0 + cb), nc = c1 - c0;
      const int64_t q0 = part * chunk, q1 = std::min(pixels, q0 + chunk);
      // (only the copies that exist: without them the workspace may be null)
      const T* X = use_v ? values + nb * slab : nullptr;
      const T* E = use_e ? gg_values + nb * slab : nullptr;
      T* A = scatter ? partials + task * slab : nullptr;
      if (scatter) std::fill_n(A, slab, T(0));
      for (int64_t qt = q0; qt < q1; qt += kTile) {
        const int count = static_cast<int>(std::min<int64_t>(kTile, q1 - qt));
        if constexpr (G == 2) {
          if (tile) plan.build(src, n, qt, count, tile.get());
        }
        // The tile's grad, channel-minor, read along the planes' rows: one
        // element per plane and pixel would touch a cache line per channel,
        // and planes a power of two apart share cache sets. A grad whose
        // channels are adjacent (channel-minor already, as the gradient of
        // a contraction over channels often is) is read pixel by pixel.
        for (int i = 0; i < count; ++i) {
          const Pixel<G>& px = pixels_at[i] = pixel_at<G>(p, qt + i);
          grad_at[i] = elem<S>(grad, n, 0, px) - plane_at<S>(grad, n, 0);
          if (mask.grad) d_grad_at[i] = elem<S>(d_grad, n, 0, px) - plane_at<S>(d_grad, n, 0);
        }
        if (grad.strides[1] == 1) {
          const S* gp = plane_at<S>(grad, n, c0);
          for (int i = 0; i < count; ++i) {
            const S* from = gp + grad_at[i];
            T* to = grad_rows.get() + i * kMaxBlock;
            for (int64_t c = 0; c < nc; ++c) to[c] = load(from[c]);
          }
        } else {
          for (int64_t c = 0; c < nc; ++c) {
            const S* gp = plane_at<S>(grad, n, c0 + c);
            for (int i = 0; i < count; ++i) grad_rows[i * kMaxBlock + c] = load(gp[grad_at[i]]);
          }
        }
        for (int i = 0; i < count; ++i) {
          const int64_t q = qt + i;
          const Pixel<G>& px = pixels_at[i];
          PixelTaps<T, K, G> pt;
          if constexpr (G == 2) {
            if (tile) {
              taps_from_tile<S, M, P, kAlign>(p, grid, gg_dgrid, use_v, n, px, *tile, i, &pt);
            } else {
              taps_from_stencil<S, M, P, kAlign>(p, grid, gg_dgrid, use_v, n, px, &pt);
            }
          } else {
            taps_from_stencil<S, M, P, kAlign>(p, grid, gg_dgrid, use_v, n, px, &pt);
          }
          const Curvature<T, K, G>& cv = pt.cv;
          const T* pg = pt.pg;
          // The valid taps' scalars, for the channel loop (second_order-inl.h).
          taps.count = 0;
          for (int k = 0; k < K; ++k) {
            if (!pt.valid[k]) continue;
            const int j = taps.count++;
            taps.off[j] = pt.dense[k] * cb;
            taps.w[j] = pt.w[k];
            for (int a = 0; a < G; ++a) taps.dw[a][j] = pt.dw[a][k];
            if (use_v) {
              T v = pg[0] * pt.dw[0][k];
              for (int a = 1; a < G; ++a) v += pg[a] * pt.dw[a][k];
              taps.v[j] = v;
              for (int b = 0; b < G; ++b) {
                T sv = pg[0] * cv.h[pair_index<G>(0, b)][k];
                for (int a = 1; a < G; ++a) sv += pg[a] * cv.h[pair_index<G>(a, b)][k];
                taps.sv[b][j] = sv;
              }
            }
          }
          const T* Gc = grad_rows.get() + i * kMaxBlock;
          T* dg = d_grad_rows.get() + i * kMaxBlock;
          if (plan.channels != nullptr) {
            plan.channels(&taps, X, E, A, Gc, nc, dg, tv);
          } else {
            std::fill_n(dg, nc, T(0));  // no terms (nearest without gg_dx)
          }
          if (mask.grid) {
            T tg[G] = {};
            if constexpr (kSmooth) {
              for (int64_t c = 0; c < nc; ++c) {
                for (int a = 0; a < G; ++a) tg[a] += tv[a * kMaxBlock + c];
              }
            }
            T dgrid[G];
            for (int a = 0; a < G; ++a) dgrid[a] = pt.mult[a] * tg[a];
            store_grid<S, G>(plan, d_grid, grid_partials, n, block, q, px, dgrid);
          }
        }
        if (mask.grad) {
          for (int64_t c = 0; c < nc; ++c) {
            S* dp = plane_at<S>(d_grad, n, c0 + c);
            for (int i = 0; i < count; ++i) dp[d_grad_at[i]] = store<S>(d_grad_rows[i * kMaxBlock + c]);
          }
        }
      }
    }

    // d_input: the chunks' channel-minor sums in chunk order (whole rows of
    // lanes at a time), rounded once into d_input's layout; tasks (n, block,
    // input row).
    if (mask.input) {
#pragma omp for schedule(static)
      for (int64_t task = 0; task < p.n * blocks * rows; ++task) {
        const int64_t nb = task / rows, r = task % rows;
        const int64_t sp[3] = {r / p.in_h, r % p.in_h, 0};
        const int64_t n = nb / blocks, c0 = (nb % blocks) * cb, nc = std::min(p.c, c0 + cb) - c0;
        // Channel by channel, along d_input's rows (the copies' rows of
        // lanes stay in cache across the channels).
        // With several chunks, their rows are added in chunk order into
        // the first's, a whole row of lanes per chunk (contiguous, so the
        // additions vectorise; each element's sum keeps the chunk order).
        T* first = scatter ? partials + nb * chunks * slab + r * p.in_w * cb : nullptr;
        const int64_t lanes = p.in_w * cb;
        for (int64_t part = 1; scatter && part < chunks; ++part) {
          const T* a = first + part * slab;
          for (int64_t j = 0; j < lanes; ++j) first[j] += a[j];
        }
        S* row = elem<S>(d_input, n, c0, G == 3 ? sp : sp + 1);
        for (int64_t c = 0; c < nc; ++c) {
          S* out = row + c * d_input.strides[1];
          for (int64_t x = 0; x < p.in_w; ++x) {
            out[x * d_input.strides[G + 1]] = store<S>(scatter ? first[x * cb + c] : T(0));
          }
        }
      }
    }
    if (mask.grid && blocks > 1) sum_grid_partials<S, G>(plan, grid_partials, d_grid);
  }
}

template <class S, Interpolation M, Padding P, bool kAlign, int G>
void run(const DoubleBackwardPlan& plan, const InView<G>& gg_dx, const InView<G>& gg_dgrid, const InView<G>& grad,
         const InView<G>& input, const InView<G>& grid, const OutView<G>& d_grad, const OutView<G>& d_input,
         const OutView<G>& d_grid, unsigned char* ws) {
  if (plan.interleaved) {
    run_interleaved<S, M, P, kAlign, G>(plan, gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid, ws);
  } else {
    run_planar<S, M, P, kAlign, G>(plan, gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid, ws);
  }
}

template <int G>
using RunFn = void (*)(const DoubleBackwardPlan&, const InView<G>&, const InView<G>&, const InView<G>&,
                       const InView<G>&, const InView<G>&, const OutView<G>&, const OutView<G>&, const OutView<G>&,
                       unsigned char*);

template <class S, int G, Interpolation M, Padding P>
RunFn<G> pick_align(bool align) {
  return align ? &run<S, M, P, true, G> : &run<S, M, P, false, G>;
}
template <class S, int G, Interpolation M>
RunFn<G> pick_padding(const Options& o) {
  switch (o.padding) {
    case Padding::kZeros: return pick_align<S, G, M, Padding::kZeros>(o.align_corners);
    case Padding::kBorder: return pick_align<S, G, M, Padding::kBorder>(o.align_corners);
    case Padding::kReflection: break;
  }
  return pick_align<S, G, M, Padding::kReflection>(o.align_corners);
}
template <class S, int G>
RunFn<G> pick_mode(const Options& o) {
  switch (o.interpolation) {
    case Interpolation::kBilinear: return pick_padding<S, G, Interpolation::kBilinear>(o);
    case Interpolation::kNearest: return pick_padding<S, G, Interpolation::kNearest>(o);
    case Interpolation::kBicubic: break;
  }
  return pick_padding<S, G, Interpolation::kBicubic>(o);
}

template <int G>
void run_any(const DoubleBackwardPlan& plan, const InView<G>& gg_dx, const InView<G>& gg_dgrid, const InView<G>& grad,
             const InView<G>& input, const InView<G>& grid, const OutView<G>& d_grad, const OutView<G>& d_input,
             const OutView<G>& d_grid, void* workspace) {
  const auto addr = reinterpret_cast<std::uintptr_t>(workspace);
  auto* aligned = workspace == nullptr ? nullptr : reinterpret_cast<unsigned char*>((addr + 63) / 64 * 64);
  const RunFn<G> fn =
      visit_dtype(plan.problem.dtype, [&](auto tag) { return pick_mode<decltype(tag), G>(plan.problem.options); });
  fn(plan, gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid, aligned);
}

}  // namespace

DoubleBackwardPlan plan_double_backward(const Problem& p, DoubleBackwardMask mask, bool has_gg_dx) {
  DoubleBackwardPlan plan;
  plan.problem = p;
  plan.mask = mask;
  plan.has_gg_dx = has_gg_dx;
  const int64_t pixels = p.out_d * p.out_h * p.out_w;
  const uint64_t elem = p.dtype == DType::kFloat64 ? sizeof(double) : sizeof(float);
  const uint64_t planes_bytes = mul(mul(mul(static_cast<uint64_t>(p.n), static_cast<uint64_t>(p.c)),
                                        static_cast<uint64_t>(p.in_d * p.in_h * p.in_w)),
                                    elem);
  // Pixel chunks first (no stencil is built twice), as many as the
  // accumulators they need allow; then channel blocks.
  int64_t chunks = 1;
  if (p.n > 0 && p.n < split::kMinTasks && pixels >= 2 * split::kMinChunkPixels) {
    chunks = std::min((split::kMinTasks + p.n - 1) / p.n, pixels / split::kMinChunkPixels);
    if (mask.input) {
      const uint64_t fit = planes_bytes == 0 ? 1 : split::kMaxPartialBytes / planes_bytes;
      chunks = std::max<int64_t>(1, std::min<int64_t>(chunks, static_cast<int64_t>(std::min<uint64_t>(fit, 1 << 20))));
    }
  }
  plan.pixel_chunks = chunks;
  plan.chunk_pixels = (pixels + chunks - 1) / chunks;
  int64_t blocks = 1;
  if (p.n > 0 && p.n * chunks < split::kMinTasks && p.c > 1 && pixels > 0) {
    blocks = std::min(p.c, (split::kMinTasks + p.n * chunks - 1) / (p.n * chunks));
  }
  plan.channel_block = std::max<int64_t>(1, (p.c + blocks - 1) / blocks);
  plan.channel_blocks = std::max<int64_t>(1, (p.c + plan.channel_block - 1) / plan.channel_block);
  const bool compute_type = p.dtype == DType::kFloat32 || p.dtype == DType::kFloat64;
  const bool smooth = p.options.interpolation != Interpolation::kNearest;
  const bool scatter = mask.input && smooth;
  const bool need_values = smooth;
  const auto plane = static_cast<uint64_t>(p.in_d * p.in_h * p.in_w);
  // The interleaved split: blocks of at most kMaxBlock channels, split
  // further for tasks while blocks keep 8 channels or more (a narrower run
  // gains little over planes; blocks cost no memory, unlike pixel chunks,
  // each of which needs accumulators as large as the block's copy), then
  // pixel chunks as the accumulators' bound allows.
  int64_t i_blocks = 1, i_block = 1, i_chunks = 1;
  uint64_t copy_bytes = 0, i_bytes = kSaturated;
  if (p.c >= 2 && p.n > 0 && pixels > 0) {
    i_blocks = std::max((p.c + kMaxBlock - 1) / kMaxBlock,
                        std::min((split::kMinTasks / 2 + p.n - 1) / p.n, std::max<int64_t>(1, p.c / 32)));
    i_block = (p.c + i_blocks - 1) / i_blocks;
    i_blocks = (p.c + i_block - 1) / i_block;
    copy_bytes = mul(mul(mul(static_cast<uint64_t>(p.n), static_cast<uint64_t>(i_blocks)),
                         mul(plane, static_cast<uint64_t>(i_block))),
                     elem);
    if (p.n * i_blocks < split::kMinTasks / 2 && pixels >= 2 * split::kMinChunkPixels) {
      i_chunks = std::min((split::kMinTasks / 2 + p.n * i_blocks - 1) / (p.n * i_blocks), pixels / split::kMinChunkPixels);
      if (scatter) {
        const uint64_t fit = copy_bytes == 0 ? 1 : split::kMaxPartialBytes / copy_bytes;
        i_chunks = std::clamp<int64_t>(static_cast<int64_t>(std::min<uint64_t>(fit, 1 << 20)), 1, i_chunks);
      }
    }
    i_bytes = mul(copy_bytes, (need_values ? 1 : 0) + (has_gg_dx ? 1 : 0) +
                                  (scatter ? static_cast<uint64_t>(i_chunks) : 0));
  }
  plan.interleaved = i_bytes <= split::kMaxInterleavedBytes;
  // Images' interleaved tasks take their stencils from the first-order
  // vector builders (flat indices: the copies are dense planes), where the
  // target has vectors (the one-lane target's builders make each tap with
  // the scalar stencil and copy it: slower than the stencil alone).
  // The channel loop for the terms present (none: nearest without gg_dx).
  if (plan.interleaved) {
    const KernelTable table = kernels(p.dtype);
    if (!p.volume && vector_target()) plan.build = builder(table, p.options, TapForm::kFlat);
    if (has_gg_dx || smooth) {
      const SecondOrderTerms terms = !smooth      ? SecondOrderTerms::kGgDx
                                     : has_gg_dx ? SecondOrderTerms::kBoth
                                                 : SecondOrderTerms::kGgDgrid;
      plan.channels = table.second_order[p.volume ? 1 : 0][static_cast<int>(terms)][scatter ? 1 : 0];
    }
  }
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
                                 (p.volume ? 3 : 2) * elem));
  }
  plan.workspace_bytes = bytes == 64 ? 0 : (bytes >= kSaturated ? SIZE_MAX : static_cast<std::size_t>(bytes));
  return plan;
}

void run_double_backward(const DoubleBackwardPlan& plan, const TensorView& gg_dx, const TensorView& gg_dgrid,
                         const TensorView& grad, const TensorView& input, const TensorView& grid,
                         const MutableTensorView& d_grad, const MutableTensorView& d_input,
                         const MutableTensorView& d_grid, void* workspace) {
  run_any<2>(plan, gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid, workspace);
}

void run_double_backward(const DoubleBackwardPlan& plan, const VolumeView& gg_dx, const VolumeView& gg_dgrid,
                         const VolumeView& grad, const VolumeView& input, const VolumeView& grid,
                         const MutableVolumeView& d_grad, const MutableVolumeView& d_input,
                         const MutableVolumeView& d_grid, void* workspace) {
  run_any<3>(plan, gg_dx, gg_dgrid, grad, input, grid, d_grad, d_input, d_grid, workspace);
}

}  // namespace gridsampler::cpu
