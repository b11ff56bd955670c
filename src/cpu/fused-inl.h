// Fused tiles: one channel plane sampled bilinearly (trilinearly for
// volumes) with each vector of output pixels' stencil kept in registers,
// from the grid values to the taps' reads, instead of going through a Tile
// in memory. Tiles also work a few planes with each stencil: forwards where
// the planner says so (plan.cpp, fused_planes_pay), planar backwards of
// volumes and double images (plan.cpp, fused_applies).
//
// Why: with one channel a tile's stencils serve a single plane, so writing
// them out and reading them back (indices, weights, derivatives, the padded
// coordinates before them) is not amortised over channels. Measured
// (docs/performance.md, "Fused one-channel tiles" and "Fused tiles for
// images again"): a single 128^3 registration volume 1.2x (forward) and 1.3x
// (backward) faster; one-channel images 1.1x-1.4x on a Zen 4 (AVX-512 and
// AVX2 alike), a wash (0.94x-1.07x) on a Zen 3. Nearest has them too: the
// forward (one gather per vector; "Fused nearest forward": 1.04x-1.3x) and
// the backward (a scatter of grad; "Fused nearest backward").
//
// A fused tile computes what the builder (builders-inl.h) and the planar
// microkernel (microkernels-inl.h) compute for the same tile, from the same
// per-vector pieces (SourceIndexLanes, bilinear_lanes or trilinear_lanes,
// pair_lanes), in the same order: the same bits, which tests check on every
// target. Window reads (window_values) take the same tap values from plain
// loads instead of gathers where the pixels sit close together. The
// drivers (forward-inl.h, backward-inl.h) call one per tile in place of the
// builder and the microkernel when the plan has one (dense float or double
// planes, bilinear, trilinear or nearest: one channel, or up to
// kMaxFusedForwardChannels in a forward and kMaxFusedBackwardChannels in a
// planar backward) and, in the forward, the output is dense.
// They hand a tile its pixels' grid points and grad values in pixel order:
// in place, or copied from a strided grid or grad. Everything around the tile (tasks, accumulators,
// dgrid stores, fixed-order sums) is the drivers'.

// Target-independent includes (normal include guards).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/coords.hpp"
#include "cpu/dispatch.hpp"
#include "cpu/tile.hpp"

// Per-target part: re-included once for every target.
#if defined(GRIDSAMPLER_CPU_FUSED_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_FUSED_INL_H_
#undef GRIDSAMPLER_CPU_FUSED_INL_H_
#else
#define GRIDSAMPLER_CPU_FUSED_INL_H_
#endif

#include "cpu/microkernels-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
namespace {

#if HWY_TARGET != HWY_SCALAR

// Where the G values per pixel of pixels [i, i + lanes) of a dense run of
// `count` pixels at v start: in place, or, for the run's last partial
// vector, in `tail` (at least G * lanes elements), copied there with zeros
// after the run's end, so that lanes past `count` read 0.
template <int G, class T>
inline const T* vector_values(const T* v, int i, int count, int lanes, T* tail) {
  const T* from = v + G * i;
  if (i + lanes <= count) return from;
  std::fill(tail, tail + G * lanes, T(0));
  std::copy(from, v + G * count, tail);
  return tail;
}

// The padded coordinates and linear taps (bilinear for G = 2 components,
// trilinear for G = 3) of one vector of pixels: lanes from `i` of a tile
// whose grid values start at g, dense (x, y[, z]) points; lanes past `count`
// read grid value 0. Also the coordinates' multipliers.
template <Padding P, bool kAlign, class D, int G>
struct FusedStencil {
  using T = hwy::HWY_NAMESPACE::TFromD<D>;
  using V = hwy::HWY_NAMESPACE::Vec<D>;
  using Taps = LinearLanes<D, G == 2 ? 4 : 8, G>;
  D d;
  SourceIndexLanes<P, kAlign, D> axis[G];  // x, y[, z]
  int64_t size[3];                         // Win, Hin, Din

  FusedStencil(D tag, const TileSource& src) : d(tag), size{src.in_w, src.in_h, src.in_d} {
    for (int a = 0; a < G; ++a) axis[a] = SourceIndexLanes<P, kAlign, D>(tag, size[a]);
  }

  void load_points(const T* from, V c[G]) const {
    if constexpr (G == 2) {
      hwy::HWY_NAMESPACE::LoadInterleaved2(d, from, c[0], c[1]);
    } else {
      hwy::HWY_NAMESPACE::LoadInterleaved3(d, from, c[0], c[1], c[2]);
    }
  }

  // Always inlined: out of line, its 8-tap result (volumes) went back
  // through memory, 18% of a 128^3 registration's backward in perf. So are
  // the padded coordinates of volumes (their backward left padded() out of
  // line, another 9.5%); images' stay as the compiler chooses (forced, the
  // one-channel forwards ran 0.97x). Both: docs/performance.md, "Fused
  // stencils inlined".
  template <bool kMult = true>
  HWY_INLINE Taps operator()(const T* g, int i, int count, V mult[G]) const {
    V x[G];
    if constexpr (G == 3) {
      padded_inline<kMult>(g, i, count, mult, x);
    } else {
      padded<kMult>(g, i, count, mult, x);
    }
    if constexpr (G == 2) {
      return bilinear_lanes(d, x[0], x[1], size[1], size[0]);
    } else {
      return trilinear_lanes(d, x[0], x[1], x[2], size[2], size[1], size[0]);
    }
  }

  // The padded source coordinates x[G] alone, and with kMult their
  // multipliers (mult is left unset without).
  template <bool kMult = true>
  void padded(const T* g, int i, int count, V mult[G], V x[G]) const {
    padded_inline<kMult>(g, i, count, mult, x);
  }
  // ... always inlined (volumes' stencils).
  template <bool kMult = true>
  HWY_INLINE void padded_inline(const T* g, int i, int count, V mult[G], V x[G]) const {
    namespace hn = hwy::HWY_NAMESPACE;
    const int n = static_cast<int>(hn::Lanes(d));
    alignas(64) T tail[G * hn::MaxLanes(D())];
    const T* from = vector_values<G>(g, i, count, n, tail);
    V c[G];
    load_points(from, c);
    // An axis the vector fold cannot take (vector_ok false: a one-pixel
    // reflected axis, whose span is 0) is not run through it at all: its
    // flip count would be NaN, and converting NaN to an integer is
    // undefined on the scalar (EMU128) target. Every axis is computed before
    // the one test: a loop that stops early is not unrolled, and x then
    // lives in memory.
    bool exact = true;
    for (int a = 0; a < G; ++a) exact = exact && axis[a].vector_ok;
    if (exact) {
      auto all = hn::FirstN(d, static_cast<size_t>(n));
      for (int a = 0; a < G; ++a) {
        hn::Mask<D> fast;
        x[a] = axis[a].template operator()<kMult>(c[a], &mult[a], &fast);
        all = hn::And(all, fast);
      }
      exact = hn::AllTrue(d, all);
    }
    if (!exact) {
      // The scalar policy for the whole vector (its bits, as the builder's
      // per-lane fallback gives). Its results come back through buffers of
      // its own: had x or mult's address reached an out-of-line call, the
      // compiler would keep them in memory on the fast path too (a store
      // and reload per vector; without them one-channel forwards ran
      // 1.02x-1.38x faster, docs/performance.md).
      alignas(64) T xs[G][hn::MaxLanes(D())], ms[G][hn::MaxLanes(D())];
      scalar_padded(from, size[0], size[1], size[2], xs, ms);
      for (int a = 0; a < G; ++a) {
        x[a] = hn::Load(d, xs[a]);
        if constexpr (kMult) mult[a] = hn::Load(d, ms[a]);
      }
    }
  }

  // The scalar policy for one vector of points at `from` (static, with the
  // sizes by value: a call taking `this` would keep the stencil in memory).
  static HWY_NOINLINE void scalar_padded(const T* from, int64_t w, int64_t h, int64_t depth,
                                         T (*xs)[hwy::HWY_NAMESPACE::MaxLanes(D())],
                                         T (*ms)[hwy::HWY_NAMESPACE::MaxLanes(D())]) {
    const int n = static_cast<int>(hwy::HWY_NAMESPACE::Lanes(D()));
    const int64_t size[3] = {w, h, depth};
    for (int a = 0; a < G; ++a) {
      for (int l = 0; l < n; ++l) xs[a][l] = coords::source_index<P>(from[G * l + a], size[a], kAlign, &ms[a][l]);
    }
  }
};

// Window reads (below) need a lookup in a table of two vectors that is one
// instruction: AVX-512's two-table permute. On AVX2 (two permutes and a
// blend, 8 lanes) they were slower than the gathers on a Zen 4 (0.85x-0.92x
// on stn_digits, ram_glimpse, raft_corr_lookup_9x9), so other targets keep
// the gathers (docs/performance.md, "Window reads").
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
#define GRIDSAMPLER_WINDOW_READS 1

// Window reads take vectors whose pixels' first rows differ by at most
// this (with 16 lanes, 1 covered 77% of RAFT's 7x7 windows' vectors and 2
// all of them). Vectors within 1 row take fewer loads and permutes.
constexpr int kWindowRows = 2;

// Lane i of the result is lane rel[i] % 32 of the 32-lane table (lo, hi)
// of floats. (Highway 1.0 has no two-table lookup.)
template <class D, class VI>
inline hwy::HWY_NAMESPACE::Vec<D> lookup_pair(hwy::HWY_NAMESPACE::Vec<D> lo, hwy::HWY_NAMESPACE::Vec<D> hi, VI rel) {
  static_assert(sizeof(hwy::HWY_NAMESPACE::TFromD<D>) == 4 && hwy::HWY_NAMESPACE::MaxLanes(D()) == 16);
  return hwy::HWY_NAMESPACE::Vec<D>{_mm512_permutex2var_ps(lo.raw, rel.raw, hi.raw)};
}

// The taps of window_values for lanes whose first row is r0 + dr, dr in
// [0, R], and first column c0 + rel: row r0 + q's window, q = 0..R + 1,
// its start clamped into the plane (a valid tap lies in the plane, so it is
// still in the window, at lane rel + shift), its values at rel and rel + 1,
// and tap (j, a) of a lane the value of row dr + j. (Invalid taps get some
// element of the windows.)
template <int R, class D, class VI, class T>
HWY_INLINE void window_rows(D d, VI rel, hwy::HWY_NAMESPACE::Vec<D> dr, T r0, T c0, const T* __restrict ip,
                            int64_t plane, int64_t in_w, hwy::HWY_NAMESPACE::Vec<D> v[4]) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::RebindToSigned<D> di;
  using TI = hn::TFromD<decltype(di)>;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const auto one = hn::Set(di, TI(1));
  hn::Vec<D> at_col[R + 2][2];
  for (int q = 0; q < R + 2; ++q) {
    const int64_t want = (static_cast<int64_t>(r0) + q) * in_w + static_cast<int64_t>(c0);
    const int64_t start = std::clamp<int64_t>(want, 0, plane - 2 * n);
    const auto lo = hn::LoadU(d, ip + start), hi = hn::LoadU(d, ip + start + n);
    const auto at = hn::Add(rel, hn::Set(di, static_cast<TI>(want - start)));
    at_col[q][0] = lookup_pair<D>(lo, hi, at);
    at_col[q][1] = lookup_pair<D>(lo, hi, hn::Add(at, one));
  }
  for (int j = 0; j < 2; ++j) {
    for (int a = 0; a < 2; ++a) {
      auto value = at_col[j][a];
      for (int m = 1; m <= R; ++m) {
        value = hn::IfThenElse(hn::Eq(dr, hn::Set(d, static_cast<T>(m))), at_col[j + m][a], value);
      }
      v[2 * j + a] = value;
    }
  }
}

// The bilinear taps' values (0 where invalid) of one vector of N pixels
// read from windows of 2N consecutive elements by permutes of two plain
// loads, instead of gathers. Where a vector's pixels sit close together in
// the image (affine warps with little rotation, zooms near 1, correlation
// windows and glimpses) their first rows lie in r0..r0 + kWindowRows and
// their columns within 2N - 1 from c0; then the window of each row from r0
// to r0 + kWindowRows + 1 starting at column c0 holds every tap, and a
// tap's value is a permute of its row's window, chosen by the lane's row.
// Two loads and a permute per row cost far less than a gather per tap
// (docs/performance.md, "Window reads"). The values are the plane's
// elements themselves: the same bits as gathers. Returns false, with v
// unspecified, when the pixels are further apart. Needs plane >= 2N.
// Lanes from `live` on are the padding of a partial vector: whatever they
// get is not used (here, 0).
template <class D, class T>
HWY_INLINE bool window_values(D d, const LinearLanes<D, 4, 2>& t, int live, const T* __restrict ip, int64_t plane,
                              int64_t in_w, hwy::HWY_NAMESPACE::Vec<D> v[4]) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::RebindToSigned<D> di;
  const int64_t n = static_cast<int64_t>(hn::Lanes(d));
  const auto in_vector = hn::FirstN(d, static_cast<size_t>(live));
  const auto any = hn::And(in_vector, hn::Or(hn::Or(t.valid[0], t.valid[1]), hn::Or(t.valid[2], t.valid[3])));
  if (hn::AllFalse(d, any)) {  // no tap to read
    for (int k = 0; k < 4; ++k) v[k] = hn::Zero(d);
    return true;
  }
  const auto far = hn::Set(d, hwy::HighestValue<T>());
  const T r0 = hn::GetLane(hn::MinOfLanes(d, hn::IfThenElse(any, t.row, far)));
  const T c0 = hn::GetLane(hn::MinOfLanes(d, hn::IfThenElse(any, t.col, far)));
  const auto dr = hn::Sub(t.row, hn::Set(d, r0)), dc = hn::Sub(t.col, hn::Set(d, c0));
  const auto near = hn::And(hn::Le(dr, hn::Set(d, static_cast<T>(kWindowRows))),
                            hn::Le(dc, hn::Set(d, static_cast<T>(2 * n - 2))));
  if (!hn::AllTrue(d, hn::Or(hn::Not(any), near))) return false;
  const auto rel = hn::ConvertTo(di, dc);
  const auto spread_one = hn::AllTrue(d, hn::Or(hn::Not(any), hn::Le(dr, hn::Set(d, T(1)))));
  if (spread_one) {
    window_rows<1>(d, rel, dr, r0, c0, ip, plane, in_w, v);
  } else {
    window_rows<kWindowRows>(d, rel, dr, r0, c0, ip, plane, in_w, v);
  }
  for (int k = 0; k < 4; ++k) v[k] = hn::IfThenElseZero(hn::And(in_vector, t.valid[k]), v[k]);
  return true;
}
#endif

// Whether window reads are compiled for T: float only. With double's 8
// lanes the gathers they replace are fewer and cheaper, and a smooth
// registration (registration_f64) ran 0.94x-0.98x with them.
template <class T>
#ifdef GRIDSAMPLER_WINDOW_READS
constexpr bool kWindowReads = std::is_same_v<T, float>;
#else
constexpr bool kWindowReads = false;
#endif

// Whether to try window reads for the next vector of pixels: after a vector
// they did not cover, the next 1, 2, 4, ... 64 vectors (doubling while they
// keep failing) take the gathers, so a scattered grid wastes little on
// them. (A backward tile is 4 vectors, so there each tile tries at least
// once.)
class WindowBackoff {
 public:
  explicit WindowBackoff(bool enabled) : skip_(enabled ? 0 : -1) {}
  bool attempt() {
    if (skip_ < 0) return false;
    if (skip_ == 0) return true;
    --skip_;
    return false;
  }
  void result(bool covered) {
    if (covered) {
      wait_ = 1;
    } else {
      skip_ = wait_;
      wait_ = std::min(2 * wait_, 64);
    }
  }

 private:
  int skip_;
  int wait_ = 1;
};

// The taps' values (0 where invalid) in one plane, for the first `live`
// lanes (the rest are a partial vector's padding): from windows if `windows`
// and they cover the vector; else each row's two taps as a pair for float
// planes of two pixels or more, one gather per tap otherwise. Returns
// whether the windows covered it (which depends on the stencil alone, not
// on the plane).
template <class D, int K, int G, class T>
HWY_INLINE bool stencil_values(D d, const LinearLanes<D, K, G>& t, int live, const T* __restrict ip, int64_t plane,
                               int64_t in_w, int64_t in_hw, bool windows, hwy::HWY_NAMESPACE::Vec<D> v[K]) {
  namespace hn = hwy::HWY_NAMESPACE;
#ifdef GRIDSAMPLER_WINDOW_READS
  if constexpr (K == 4 && kWindowReads<T>) {
    if (windows && window_values(d, t, live, ip, plane, in_w, v)) return true;
  }
#else
  (void)live;
  (void)windows;
#endif
  const hn::RebindToSigned<D> di;
  if constexpr (std::is_same_v<T, float>) {
    if (plane >= 2) {
      for (int k = 0; k < K; k += 2) {
        pair_lanes(di, linear_tap_index(di, t.base, k, in_w, in_hw), linear_tap_index(di, t.base, k + 1, in_w, in_hw),
                   hn::RebindMask(di, t.valid[k]), hn::RebindMask(di, t.valid[k + 1]), ip, plane, &v[k], &v[k + 1]);
      }
      return false;
    }
  }
  for (int k = 0; k < K; ++k) {
    const auto valid = hn::RebindMask(di, t.valid[k]);
    const auto index = hn::IfThenElseZero(valid, linear_tap_index(di, t.base, k, in_w, in_hw));
    v[k] = hn::IfThenElseZero(t.valid[k], hn::GatherIndex(d, ip, index));
  }
  return false;
}

// stencil_values as the backoff says: windows tried where it asks for them,
// and their outcome reported.
template <class D, int K, int G, class T>
HWY_INLINE void fused_values(D d, const LinearLanes<D, K, G>& t, int live, const T* __restrict ip, int64_t plane,
                             int64_t in_w, int64_t in_hw, WindowBackoff* windows, hwy::HWY_NAMESPACE::Vec<D> v[K]) {
  const bool attempt = windows->attempt();
  const bool covered = stencil_values(d, t, live, ip, plane, in_w, in_hw, attempt, v);
  if (attempt) windows->result(covered);
}

// A run of pixels across tiny images (TileSource::image_pixels > 0): per
// lane, where its image's plane starts relative to the run's first image,
// for the run's vectors in order. The run starts at pixel p0 of its first
// image and has `count` pixels; planes are `stride` elements apart. Lanes
// past the run's end (a partial vector's padding, which reads grid value
// 0, a valid tap) stay in its last image: past it there may be no plane.
template <class DI>
class ImageOffsets {
 public:
  ImageOffsets(int64_t image_pixels, int64_t p0, int64_t count, int64_t stride)
      : pixels_(image_pixels), stride_(stride), count_(count), next_(image_pixels - p0) {}

  // The offsets of the run's lanes [i, i + Lanes), i ascending.
  hwy::HWY_NAMESPACE::Vec<DI> at(int64_t i) {
    namespace hn = hwy::HWY_NAMESPACE;
    using TI = hn::TFromD<DI>;
    const DI di;
    const auto lanes = static_cast<int64_t>(hn::Lanes(di));
    while (next_ <= i) {  // (next_: the run's first lane in the next image)
      ++image_;
      next_ += pixels_;
    }
    auto offsets = hn::Set(di, static_cast<TI>(image_ * stride_));
    const auto lane = hn::Iota(di, 0), step = hn::Set(di, static_cast<TI>(stride_));
    for (int64_t b = next_; b < std::min(i + lanes, count_); b += pixels_) {
      offsets = hn::Add(offsets, hn::IfThenElseZero(hn::Gt(lane, hn::Set(di, static_cast<TI>(b - i - 1))), step));
    }
    return offsets;
  }

 private:
  int64_t pixels_, stride_, count_, next_, image_ = 0;
};

// Stores the first `count` lanes of v at out.
template <class D, class T>
inline void store_lanes_n(D d, hwy::HWY_NAMESPACE::Vec<D> v, int count, T* out) {
  namespace hn = hwy::HWY_NAMESPACE;
  if (count >= static_cast<int>(hn::Lanes(d))) {
    hn::StoreU(v, d, out);
    return;
  }
  alignas(64) T tail[hn::MaxLanes(D())];
  hn::Store(v, d, tail);
  std::copy(tail, tail + count, out);
}

// The forward of output pixels [p0, p0 + count) of image (volume) n in
// `channels` channels: op[p0 + i] = sum over taps of w * value, in tap order
// from 0, as multiply-adds (as forward_channel), each vector's stencil
// computed once for all channels. kNearest: the nearest tap alone, 0 + w *
// value with w = 1 where it is valid, one gather per vector and channel.
// With src.image_pixels, one channel's pixels from p0 on may run into the
// next images (their points, and output values, follow on): each lane's
// taps are offset to its image's plane, and the run reads no windows.
template <class T, Padding P, bool kAlign, int G, bool kNearest = false>
void forward_fused(const TileSource& src, int64_t, int64_t p0, int64_t count, int64_t channels, const void* points,
                   const void* input, void* output) {
  namespace hn = hwy::HWY_NAMESPACE;
  using D = hn::ScalableTag<T>;
  const D d;
  const int lanes = static_cast<int>(hn::Lanes(d));
  const T* g = static_cast<const T*>(points);
  const T* ip = static_cast<const T*>(input);
  T* op = static_cast<T*>(output) + p0;
  const int64_t in_channel = src.in_strides[1], out_channel = src.out_strides[1];
  const int64_t in_hw = src.in_h * src.in_w, plane = src.in_d * in_hw;
  const FusedStencil<P, kAlign, D, G> stencil(d, src);
  constexpr int K = FusedStencil<P, kAlign, D, G>::Taps::kTaps;
  const int c = static_cast<int>(count);
  const int64_t per_image = src.image_pixels;
  ImageOffsets<hn::RebindToSigned<D>> images(per_image, p0, count, src.in_strides[0]);
  // The elements the taps may read, from ip: the plane, or across images up
  // to the end of the run's last one (where the pair reads stop).
  const int64_t reach = per_image > 0 ? (p0 + count - 1) / per_image * src.in_strides[0] + plane : plane;
  WindowBackoff windows(src.window_reads && per_image == 0 && !kNearest && kWindowReads<T> && plane >= 2 * lanes);
  const NearestLanes<D, G, P != Padding::kZeros> nearest(d, stencil.size);
  for (int i = 0; i < c; i += lanes) {
    hn::Vec<D> mult[G];
    if constexpr (kNearest) {
      hn::Vec<D> x[G];
      stencil.template padded<false>(g, i, c, mult, x);
      auto t = nearest(x);
      if (per_image > 0) t.index = hn::Add(t.index, images.at(i));
      for (int64_t ch = 0; ch < channels; ++ch) {
        // 0 + 1 * value where valid (the tile path's sum), which is value +
        // 0: -0 becomes +0, and NaN stays NaN.
        const auto v = hn::Add(hn::GatherIndex(d, ip + ch * in_channel, t.index), hn::Zero(d));
        store_lanes_n(d, hn::IfThenElseZero(t.valid, v), c - i, op + ch * out_channel + i);
      }
    } else if (channels == 1) {
      // One plane (the most common call): no channel loop, so the stencil's
      // weights and masks stay in registers.
      auto t = stencil.template operator()<false>(g, i, c, mult);
      if (per_image > 0) t.base = hn::Add(t.base, images.at(i));
      hn::Vec<D> v[K];
      fused_values(d, t, std::min(lanes, c - i), ip, reach, src.in_w, in_hw, &windows, v);
      auto acc = hn::Zero(d);
      for (int k = 0; k < K; ++k) acc = hn::MulAdd(hn::IfThenElseZero(t.valid[k], t.w[k]), v[k], acc);
      store_lanes_n(d, acc, c - i, op + i);
    } else {
      auto t = stencil.template operator()<false>(g, i, c, mult);
      if (per_image > 0) t.base = hn::Add(t.base, images.at(i));
      const int live = std::min(lanes, c - i);
      // Windows cover a vector in every plane or in none: the first
      // channel's try decides for all.
      const bool attempt = windows.attempt();
      if constexpr (std::is_same_v<T, float>) {
        if (!attempt && reach >= 2) {
          // Pair reads (stencil_values), their starts worked out once for
          // every channel: per channel only the gathers and the sum. Worked
          // out per channel, the starts' index work and masks beside the
          // inlined stencil outgrew the registers, and 3-channel volumes ran
          // at half the speed (docs/performance.md, "Two forward
          // regressions, found by A/B against older builds").
          const hn::RebindToSigned<D> di;
          PairStarts<hn::RebindToSigned<D>> starts[K / 2];
          for (int k = 0; k < K; k += 2) {
            starts[k / 2] = pair_starts(di, linear_tap_index(di, t.base, k, src.in_w, in_hw),
                                        linear_tap_index(di, t.base, k + 1, src.in_w, in_hw),
                                        hn::RebindMask(di, t.valid[k]), hn::RebindMask(di, t.valid[k + 1]), reach);
          }
          hn::Vec<D> w[K];
          for (int k = 0; k < K; ++k) w[k] = hn::IfThenElseZero(t.valid[k], t.w[k]);
          for (int64_t ch = 0; ch < channels; ++ch) {
            hn::Vec<D> v[K];
            for (int k = 0; k < K; k += 2) pair_read(starts[k / 2], ip + ch * in_channel, &v[k], &v[k + 1]);
            auto acc = hn::Zero(d);
            for (int k = 0; k < K; ++k) acc = hn::MulAdd(w[k], v[k], acc);
            store_lanes_n(d, acc, c - i, op + ch * out_channel + i);
          }
          continue;
        }
      }
      bool covered = attempt;
      for (int64_t ch = 0; ch < channels; ++ch) {
        hn::Vec<D> v[K];
        covered = stencil_values(d, t, live, ip + ch * in_channel, reach, src.in_w, in_hw, covered, v);
        if (ch == 0 && attempt) windows.result(covered);
        auto acc = hn::Zero(d);
        for (int k = 0; k < K; ++k) acc = hn::MulAdd(hn::IfThenElseZero(t.valid[k], t.w[k]), v[k], acc);
        store_lanes_n(d, acc, c - i, op + ch * out_channel + i);
      }
    }
  }
}

// Whether a tile's pixels mostly hit the same elements as their
// neighbours (a small window, a zoom into the image), judged from a few
// neighbouring pairs of one tap's indices (the taps of a pixel move
// together). The answer changes no bit, only which loop adds.
template <class TI>
inline bool mostly_runs(const TI* idx, int count) {
  int probes = 0, repeats = 0;
  for (int i = 0; i + 1 < count; i += 16) {
    ++probes;
    repeats += idx[i] == idx[i + 1] ? 1 : 0;
  }
  return 2 * repeats > probes;
}

// acc[idx[i]] += add[i] for i in [0, count), in that order. With `runs`,
// a run of equal indices is summed in a register: each += would otherwise
// wait for the previous one's store to reach its load. The same additions
// in the same order (the same bits); where runs are short, the plain loop
// is faster (the run loop's branch mispredicts).
template <class T, class TI>
inline void scatter_add(T* __restrict acc, const TI* __restrict idx, const T* __restrict add, int count, bool runs) {
  if (!runs) {
    int i = 0;
#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
    // Vectors whose indices rise strictly within a window (downsampling)
    // add by windows, as the planar microkernel's scatter does (window_add:
    // the same terms in the same order).
    if constexpr (std::is_same_v<T, float> && std::is_same_v<TI, int32_t>) {
      for (; i + 16 <= count; i += 16) {
        if (window_add(acc, idx + i, _mm512_loadu_ps(add + i), INT32_MAX)) continue;
        for (int j = i; j < i + 16; ++j) acc[idx[j]] += add[j];
      }
    }
#endif
    for (; i < count; ++i) acc[idx[i]] += add[i];
    return;
  }
  TI at = idx[0];
  T run = acc[at];
  for (int i = 0; i < count; ++i) {
    if (idx[i] != at) {
      acc[at] = run;
      at = idx[i];
      run = acc[at];
    }
    run += add[i];
  }
  acc[at] = run;
}

// The backward of the same pixels: dx contributions w * grad added into
// `acc` (a plane of dx or an accumulator; tap-major over the tile, pixels in
// order, as backward_channel), the dgrid sums (sum over taps of dw * value,
// times grad) into sums[G][kTile], and the coordinates' multipliers into
// mult[G][kTile].
template <class T, Padding P, bool kAlign, int G, bool kDx, bool kDgrid>
void backward_fused_tile(const TileSource& src, int count, const T* g, const T* gp, const T* ip, T* acc,
                         T (*sums)[kTile], T (*mult)[kTile]) {
  namespace hn = hwy::HWY_NAMESPACE;
  using D = hn::ScalableTag<T>;
  const D d;
  const hn::RebindToSigned<D> di;
  using TI = hn::TFromD<decltype(di)>;
  const int lanes = static_cast<int>(hn::Lanes(d));
  const int64_t in_hw = src.in_h * src.in_w, plane = src.in_d * in_hw;
  const FusedStencil<P, kAlign, D, G> stencil(d, src);
  constexpr int K = FusedStencil<P, kAlign, D, G>::Taps::kTaps;
  // An invalid tap adds +0 to element 0: it changes no value there (no
  // accumulator is -0; they start at +0, and a sum from +0 never becomes -0).
  alignas(64) TI index[K][kTile];
  alignas(64) T product[K][kTile];
  WindowBackoff windows(src.window_reads && kWindowReads<T> && plane >= 2 * lanes);
  for (int i = 0; i < count; i += lanes) {
    hn::Vec<D> m[G], grad;
    const auto t = stencil(g, i, count, m);
    alignas(64) T tail[hn::MaxLanes(D())];
    grad = hn::LoadU(d, vector_values<1>(gp, i, count, lanes, tail));
    for (int a = 0; a < G; ++a) hn::StoreU(m[a], d, mult[a] + i);
    if constexpr (kDx) {
      for (int k = 0; k < K; ++k) {
        const auto valid = hn::RebindMask(di, t.valid[k]);
        hn::StoreU(hn::IfThenElseZero(valid, linear_tap_index(di, t.base, k, src.in_w, in_hw)), di, index[k] + i);
        hn::StoreU(hn::IfThenElseZero(t.valid[k], hn::Mul(t.w[k], grad)), d, product[k] + i);
      }
    }
    if constexpr (kDgrid) {
      hn::Vec<D> v[K], s[G];
      fused_values(d, t, std::min(lanes, count - i), ip, plane, src.in_w, in_hw, &windows, v);
      for (int a = 0; a < G; ++a) s[a] = hn::Zero(d);
      for (int k = 0; k < K; ++k) {
        for (int a = 0; a < G; ++a) s[a] = hn::Add(s[a], hn::Mul(hn::IfThenElseZero(t.valid[k], t.dw[a][k]), v[k]));
      }
      for (int a = 0; a < G; ++a) hn::StoreU(hn::Add(hn::Zero(d), hn::Mul(s[a], grad)), d, sums[a] + i);
    }
  }
  if constexpr (kDx) {
    const bool runs = mostly_runs(index[0], count);
    for (int k = 0; k < K; ++k) scatter_add(acc, index[k], product[k], count, runs);
  }
}

// backward_fused_tile over several channel planes (FusedPlanes), each
// vector's stencil computed once for all of them: per channel the same
// operations as the one-channel tile, and the channels' dgrid terms added
// in channel order (as backward_tile adds the planar microkernel's), so the
// same bits as the planar path. A separate loop from the one-channel tile,
// whose stencil then stays in registers: one loop for both (the channel
// count a template flag) ran one-channel volume backwards 0.79x-0.91x
// (docs/performance.md, "Fused tiles of several channels backward").
template <class T, Padding P, bool kAlign, int G, bool kDx, bool kDgrid>
void backward_fused_planes(const TileSource& src, int count, const T* g, const FusedPlanes& planes, T (*sums)[kTile],
                           T (*mult)[kTile]) {
  namespace hn = hwy::HWY_NAMESPACE;
  using D = hn::ScalableTag<T>;
  const D d;
  const hn::RebindToSigned<D> di;
  using TI = hn::TFromD<decltype(di)>;
  const int lanes = static_cast<int>(hn::Lanes(d));
  const int64_t in_hw = src.in_h * src.in_w, plane = src.in_d * in_hw;
  const int64_t channels = planes.channels, in_step = src.in_strides[1];
  const T* gp = static_cast<const T*>(planes.grad);
  const T* ip = static_cast<const T*>(planes.input);
  const FusedStencil<P, kAlign, D, G> stencil(d, src);
  constexpr int K = FusedStencil<P, kAlign, D, G>::Taps::kTaps;
  alignas(64) TI index[K][kTile];
  alignas(64) T product[kMaxFusedBackwardChannels][K][kTile];
  WindowBackoff windows(src.window_reads && kWindowReads<T> && plane >= 2 * lanes);
  for (int i = 0; i < count; i += lanes) {
    hn::Vec<D> m[G];
    const auto t = stencil(g, i, count, m);
    for (int a = 0; a < G; ++a) hn::StoreU(m[a], d, mult[a] + i);
    if constexpr (kDx) {
      for (int k = 0; k < K; ++k) {
        const auto valid = hn::RebindMask(di, t.valid[k]);
        hn::StoreU(hn::IfThenElseZero(valid, linear_tap_index(di, t.base, k, src.in_w, in_hw)), di, index[k] + i);
      }
    }
    const int live = std::min(lanes, count - i);
    // Windows cover a vector in every plane or in none: the first
    // channel's try decides for all.
    const bool attempt = kDgrid && windows.attempt();
    bool covered = attempt;
    hn::Vec<D> total[G];
    for (int a = 0; a < G; ++a) total[a] = hn::Zero(d);
    for (int64_t c = 0; c < channels; ++c) {
      alignas(64) T tail[hn::MaxLanes(D())];
      const auto grad = hn::LoadU(d, vector_values<1>(gp + c * planes.grad_step, i, count, lanes, tail));
      if constexpr (kDx) {
        for (int k = 0; k < K; ++k) {
          hn::StoreU(hn::IfThenElseZero(t.valid[k], hn::Mul(t.w[k], grad)), d, product[c][k] + i);
        }
      }
      if constexpr (kDgrid) {
        hn::Vec<D> v[K], s[G];
        covered = stencil_values(d, t, live, ip + c * in_step, plane, src.in_w, in_hw, covered, v);
        if (c == 0 && attempt) windows.result(covered);
        for (int a = 0; a < G; ++a) s[a] = hn::Zero(d);
        for (int k = 0; k < K; ++k) {
          for (int a = 0; a < G; ++a) s[a] = hn::Add(s[a], hn::Mul(hn::IfThenElseZero(t.valid[k], t.dw[a][k]), v[k]));
        }
        for (int a = 0; a < G; ++a) total[a] = hn::Add(total[a], hn::Mul(s[a], grad));
      }
    }
    if constexpr (kDgrid) {
      for (int a = 0; a < G; ++a) hn::StoreU(total[a], d, sums[a] + i);
    }
  }
  if constexpr (kDx) {
    const bool runs = mostly_runs(index[0], count);
    T* acc = static_cast<T*>(planes.acc);
    for (int64_t c = 0; c < channels; ++c) {
      for (int k = 0; k < K; ++k) scatter_add(acc + c * planes.acc_step, index[k], product[c][k], count, runs);
    }
  }
}

// As a table entry: the wanted outputs chosen at run time.
template <class T, Padding P, bool kAlign, int G>
void backward_fused(const TileSource& src, int64_t, int64_t, int count, const void* points, const FusedPlanes& planes,
                    bool want_dx, bool want_dgrid, void* sums, void* mult) {
  const T* g = static_cast<const T*>(points);
  auto* s = static_cast<T(*)[kTile]>(sums);
  auto* m = static_cast<T(*)[kTile]>(mult);
  if (planes.channels > 1) {
    if (want_dx && want_dgrid) {
      backward_fused_planes<T, P, kAlign, G, true, true>(src, count, g, planes, s, m);
    } else if (want_dx) {
      backward_fused_planes<T, P, kAlign, G, true, false>(src, count, g, planes, s, m);
    } else {
      backward_fused_planes<T, P, kAlign, G, false, true>(src, count, g, planes, s, m);
    }
    return;
  }
  const T* gp = static_cast<const T*>(planes.grad);
  const T* ip = static_cast<const T*>(planes.input);
  T* a = static_cast<T*>(planes.acc);
  if (want_dx && want_dgrid) {
    backward_fused_tile<T, P, kAlign, G, true, true>(src, count, g, gp, ip, a, s, m);
  } else if (want_dx) {
    backward_fused_tile<T, P, kAlign, G, true, false>(src, count, g, gp, ip, a, s, m);
  } else {
    backward_fused_tile<T, P, kAlign, G, false, true>(src, count, g, gp, ip, a, s, m);
  }
}

// The nearest backward of the same pixels: each channel's grad (kSeveral:
// FusedPlanes' channels; else one) added into its dx target at each
// pixel's nearest element, pixels in order
// (backward_channel with the one tap of weight 1 adds 1 * grad, which is
// grad), and the multipliers into mult. Nearest has no dgrid sums: they
// stay the zeros the driver set, so dgrid is mult * 0 as on the tile path.
template <class T, Padding P, bool kAlign, int G, bool kDx, bool kSeveral>
void backward_nearest_tile(const TileSource& src, int count, const T* g, const FusedPlanes& planes,
                           T (*mult)[kTile]) {
  namespace hn = hwy::HWY_NAMESPACE;
  using D = hn::ScalableTag<T>;
  const D d;
  const hn::RebindToSigned<D> di;
  using TI = hn::TFromD<decltype(di)>;
  const int lanes = static_cast<int>(hn::Lanes(d));
  const FusedStencil<P, kAlign, D, G> stencil(d, src);
  const NearestLanes<D, G, P != Padding::kZeros> nearest(d, stencil.size);
  const T* gp = static_cast<const T*>(planes.grad);
  const int64_t channels = kSeveral ? planes.channels : 1, grad_step = planes.grad_step;
  // An invalid tap adds +0 to element 0 (its index there is 0), as in
  // backward_fused_tile.
  alignas(64) TI index[kTile];
  alignas(64) T add[kSeveral ? kMaxFusedBackwardChannels : 1][kTile];
  for (int i = 0; i < count; i += lanes) {
    hn::Vec<D> m[G], x[G];
    stencil.template padded<true>(g, i, count, m, x);
    for (int a = 0; a < G; ++a) hn::StoreU(m[a], d, mult[a] + i);
    if constexpr (kDx) {
      const auto t = nearest(x);
      hn::StoreU(hn::IfThenElseZero(hn::RebindMask(di, t.valid), t.index), di, index + i);
      for (int64_t c = 0; c < channels; ++c) {
        alignas(64) T tail[hn::MaxLanes(D())];
        const auto grad = hn::LoadU(d, vector_values<1>(gp + c * grad_step, i, count, lanes, tail));
        hn::StoreU(hn::IfThenElseZero(t.valid, grad), d, add[c] + i);
      }
    }
  }
  if constexpr (kDx) {
    const bool runs = mostly_runs(index, count);
    T* acc = static_cast<T*>(planes.acc);
    for (int64_t c = 0; c < channels; ++c) scatter_add(acc + c * planes.acc_step, index, add[c], count, runs);
  }
}

// As a table entry (backward_fused's signature; nearest reads no input).
template <class T, Padding P, bool kAlign, int G>
void backward_fused_nearest(const TileSource& src, int64_t, int64_t, int count, const void* points,
                            const FusedPlanes& planes, bool want_dx, bool, void*, void* mult) {
  const T* g = static_cast<const T*>(points);
  auto* m = static_cast<T(*)[kTile]>(mult);
  if (!want_dx) {
    backward_nearest_tile<T, P, kAlign, G, false, false>(src, count, g, planes, m);
  } else if (planes.channels > 1) {
    backward_nearest_tile<T, P, kAlign, G, true, true>(src, count, g, planes, m);
  } else {
    backward_nearest_tile<T, P, kAlign, G, true, false>(src, count, g, planes, m);
  }
}

template <class S, Padding P, bool kAlign>
void fill_fused(KernelTable* table) {
  if constexpr (std::is_same_v<S, compute_t<S>>) {
    const int p = static_cast<int>(P), a = kAlign ? 1 : 0;
    table->fused_forward[p][a] = &forward_fused<S, P, kAlign, 2>;
    table->fused_backward[p][a] = &backward_fused<S, P, kAlign, 2>;
    table->fused_forward_3d[p][a] = &forward_fused<S, P, kAlign, 3>;
    table->fused_backward_3d[p][a] = &backward_fused<S, P, kAlign, 3>;
    table->fused_forward_nearest[p][a] = &forward_fused<S, P, kAlign, 2, true>;
    table->fused_forward_nearest_3d[p][a] = &forward_fused<S, P, kAlign, 3, true>;
    table->fused_backward_nearest[p][a] = &backward_fused_nearest<S, P, kAlign, 2>;
    table->fused_backward_nearest_3d[p][a] = &backward_fused_nearest<S, P, kAlign, 3>;
  }
}

#endif  // HWY_TARGET != HWY_SCALAR

// The fused tiles of storage type S (float and double; none for 16-bit
// storage, which the microkernels widen, nor for the scalar target).
template <class S>
void fill_fused(KernelTable* table) {
#if HWY_TARGET != HWY_SCALAR
  fill_fused<S, Padding::kZeros, false>(table);
  fill_fused<S, Padding::kZeros, true>(table);
  fill_fused<S, Padding::kBorder, false>(table);
  fill_fused<S, Padding::kBorder, true>(table);
  fill_fused<S, Padding::kReflection, false>(table);
  fill_fused<S, Padding::kReflection, true>(table);
#else
  (void)table;
#endif
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#undef GRIDSAMPLER_WINDOW_READS

#endif  // GRIDSAMPLER_CPU_FUSED_INL_H_
