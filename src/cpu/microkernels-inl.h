// Microkernels: apply a tile's taps (tile.hpp) to one channel plane, or to
// a block of L channels in [pixel][lane] order. Templated on the storage
// type, the stencil size K, the grid components G, the lanes L and which
// outputs are wanted; nothing here knows the interpolation mode, padding or
// align_corners, so 2-D and 3-D stencils share these loops. Values are
// computed in the compute type T and rounded once when stored (layout-inl.h).

// Target-independent includes (normal include guards).
#include <cstdint>
#include <type_traits>

#include "core/dtype.hpp"
#include "cpu/tile.hpp"
#include "hwy/cache_control.h"

// Per-target part: re-included once for every target.
#if defined(GRIDSAMPLER_CPU_MICROKERNELS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_MICROKERNELS_INL_H_
#undef GRIDSAMPLER_CPU_MICROKERNELS_INL_H_
#else
#define GRIDSAMPLER_CPU_MICROKERNELS_INL_H_
#endif

#include "cpu/layout-inl.h"
#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
namespace {

// A tap's flat indices as planar kernels read them: at the gathers' width
// on dense planes (for float the only form the builders then make), int64
// otherwise.
template <bool kFlat, class T, int K, int G>
inline auto flat_indices(const Tile<T, K, G>& t, int k) {
  if constexpr (kFlat) {
    return gather_indices(&t, k);
  } else {
    return static_cast<const int64_t*>(t.acc[k]);
  }
}

// The values of tap k at a tile's pixels in one channel plane, 0 where the
// tap is invalid. Strided taps read the caller's plane at their offsets;
// flat taps read a dense plane (rows of Win values one after another) at
// their flat index, which is `plane` (outside it, never read) when invalid,
// with vector gathers across the pixels where the storage type is the
// compute type.
template <bool kFlat, class S, class T, int K, int G>
inline void tap_values(const Tile<T, K, G>& t, int k, const S* __restrict ip, int64_t plane, T* __restrict v) {
  const int count = t.count;
  if constexpr (!kFlat) {
    const int64_t* __restrict off = t.in_off[k];
    const bool* __restrict valid = t.valid[k];
    for (int i = 0; i < count; ++i) v[i] = valid[i] ? load(ip[off[i]]) : T(0);
  } else if constexpr (std::is_same_v<S, T>) {
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::ScalableTag<T> d;
    const hn::RebindToSigned<decltype(d)> di;
    using TI = hn::TFromD<decltype(di)>;
    const TI* __restrict idx = gather_indices(&t, k);
    const int n = static_cast<int>(hn::Lanes(d));
    const auto outside = hn::Set(di, static_cast<TI>(plane));
    for (int i = 0; i < count; i += n) {
      const auto index = hn::LoadU(di, idx + i);
      // Lanes past `count` may hold any index: they read element 0.
      const auto valid = hn::And(hn::Ne(index, outside), hn::FirstN(di, static_cast<size_t>(count - i)));
      const auto x = hn::GatherIndex(d, ip, hn::IfThenElseZero(valid, index));
      hn::StoreU(hn::IfThenElseZero(hn::RebindMask(d, valid), x), d, v + i);
    }
  } else if constexpr (kHalvesByVector<S, T>) {
    // float16: the stored values gathered as they are, then widened by
    // vector (widen_halves).
    const auto* __restrict idx = gather_indices(&t, k);
    alignas(64) Half raw[kTile] = {};  // (zeroed: GCC 12 warns that widen_halves may read it unset)
    for (int i = 0; i < count; ++i) raw[i] = idx[i] != plane ? ip[idx[i]] : Half{0};
    widen_halves(raw, count, v);
  } else {
    const auto* __restrict idx = gather_indices(&t, k);
    for (int i = 0; i < count; ++i) v[i] = idx[i] != plane ? load(ip[idx[i]]) : T(0);
  }
}

// g[i] = the grad (forward output) value of a tile's pixel i, widened.
template <class S, class T, int K, int G>
inline void tile_grads(const Tile<T, K, G>& t, const S* __restrict gp, T* __restrict g) {
  const int count = t.count;
  if constexpr (kHalvesByVector<S, T>) {
    if (t.out_dense) {
      widen_halves(gp + t.out_off[0], count, g);
    } else {
      alignas(64) Half raw[kTile];
      for (int i = 0; i < count; ++i) raw[i] = gp[t.out_off[i]];
      widen_halves(raw, count, g);
    }
  } else if (t.out_dense) {
    const S* __restrict gd = gp + t.out_off[0];
    for (int i = 0; i < count; ++i) g[i] = load(gd[i]);
  } else {
    for (int i = 0; i < count; ++i) g[i] = load(gp[t.out_off[i]]);
  }
}

// The values of taps k and k + 1 where the second is the first's right-hand
// neighbour (t.pairs: the bilinear stencil's rows), for flat float taps:
// each pixel's two values are read as one 64-bit pair, half the loads of
// two gathers (a gather costs about what its scalar loads cost). A pair
// never leaves the plane: one starting at -1 (tap k outside, left of pixel
// 0) is read from 0 and one starting at the last pixel is read from the one
// before, taking the wanted value from the other half. Needs plane >= 2.
#if HWY_TARGET != HWY_SCALAR
// Where a vector's pairs start and which half each tap takes: the same for
// every plane of one shape, so that several channels (forward_fused) work
// it out once and read each plane with pair_read.
template <class DI>
struct PairStarts {
  using DF = hwy::HWY_NAMESPACE::RebindToFloat<DI>;
  using DQ = hwy::HWY_NAMESPACE::Repartition<int64_t, DF>;
  hwy::HWY_NAMESPACE::Vec<DQ> lo, hi;  // byte offsets of the pairs, as 64-bit lanes
  hwy::HWY_NAMESPACE::Mask<DF> from_left, from_right, valid0, valid1;
};

template <class DI, class VI = hwy::HWY_NAMESPACE::Vec<DI>, class MI = hwy::HWY_NAMESPACE::Mask<DI>>
HWY_INLINE PairStarts<DI> pair_starts(DI di, VI i0, VI i1, MI valid0, MI valid1, int64_t plane) {
  namespace hn = hwy::HWY_NAMESPACE;
  using DF = typename PairStarts<DI>::DF;
  using DQ = typename PairStarts<DI>::DQ;
  const DF d;
  const DQ dq;
  const hn::Rebind<int32_t, DQ> dh;  // half of di
  const int h = static_cast<int>(hn::Lanes(dq));
  const auto minus_one = hn::Set(di, -1), last = hn::Set(di, static_cast<int32_t>(plane - 1));
  alignas(64) int32_t start[hn::MaxLanes(di)];
  auto first = hn::IfThenElse(valid0, i0, hn::IfThenElseZero(valid1, hn::Add(i1, minus_one)));
  const auto from_left = hn::Eq(first, minus_one), from_right = hn::Eq(first, last);
  first = hn::IfThenElse(from_left, hn::Zero(di), hn::IfThenElse(from_right, hn::Add(last, minus_one), first));
  hn::Store(first, di, start);
  PairStarts<DI> s;
  s.lo = hn::ShiftLeft<2>(hn::PromoteTo(dq, hn::Load(dh, start)));
  s.hi = hn::ShiftLeft<2>(hn::PromoteTo(dq, hn::Load(dh, start + h)));
  s.from_left = hn::RebindMask(d, from_left);
  s.from_right = hn::RebindMask(d, from_right);
  s.valid0 = hn::RebindMask(d, valid0);
  s.valid1 = hn::RebindMask(d, valid1);
  return s;
}

// The two taps' values of one plane at the pairs s describes.
template <class DI>
HWY_INLINE void pair_read(const PairStarts<DI>& s, const float* __restrict ip,
                          hwy::HWY_NAMESPACE::Vec<hwy::HWY_NAMESPACE::RebindToFloat<DI>>* v0,
                          hwy::HWY_NAMESPACE::Vec<hwy::HWY_NAMESPACE::RebindToFloat<DI>>* v1) {
  namespace hn = hwy::HWY_NAMESPACE;
  const typename PairStarts<DI>::DF d;
  const typename PairStarts<DI>::DQ dq;
  const auto* pairs = reinterpret_cast<const int64_t*>(ip);
  const auto pl = hn::BitCast(d, hn::GatherOffset(dq, pairs, s.lo));
  const auto ph = hn::BitCast(d, hn::GatherOffset(dq, pairs, s.hi));
  const auto left = hn::ConcatEven(d, ph, pl), right = hn::ConcatOdd(d, ph, pl);
  const auto a = hn::IfThenElse(s.from_right, right, left);
  const auto b = hn::IfThenElse(s.from_left, left, right);
  *v0 = hn::IfThenElseZero(s.valid0, a);
  *v1 = hn::IfThenElseZero(s.valid1, b);
}

// One vector of pixels: the values at flat indices i0 (where valid0) and i1
// = i0 + 1 (where valid1) of a dense float plane, 0 where not valid; lanes
// valid in neither read nothing that matters (element 0).
template <class DI, class VI = hwy::HWY_NAMESPACE::Vec<DI>, class MI = hwy::HWY_NAMESPACE::Mask<DI>>
inline void pair_lanes(DI di, VI i0, VI i1, MI valid0, MI valid1, const float* __restrict ip, int64_t plane,
                       hwy::HWY_NAMESPACE::Vec<hwy::HWY_NAMESPACE::RebindToFloat<DI>>* v0,
                       hwy::HWY_NAMESPACE::Vec<hwy::HWY_NAMESPACE::RebindToFloat<DI>>* v1) {
  pair_read(pair_starts(di, i0, i1, valid0, valid1, plane), ip, v0, v1);
}

// Taps k and k + 1 of a tile over one plane.
template <class T, int K, int G>
inline void pair_values(const Tile<T, K, G>& t, int k, const float* __restrict ip, int64_t plane,
                        float* __restrict v0, float* __restrict v1) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<float> d;
  const hn::RebindToSigned<decltype(d)> di;
  const int n = static_cast<int>(hn::Lanes(d));
  const auto outside = hn::Set(di, static_cast<int32_t>(plane));
  const int count = t.count;
  for (int i = 0; i < count; i += n) {
    const auto in_tile = hn::FirstN(di, static_cast<size_t>(count - i));
    const auto i0 = hn::LoadU(di, t.acc32[k] + i), i1 = hn::LoadU(di, t.acc32[k + 1] + i);
    const auto valid0 = hn::And(hn::Ne(i0, outside), in_tile), valid1 = hn::And(hn::Ne(i1, outside), in_tile);
    hn::Vec<decltype(d)> a, b;
    pair_lanes(di, i0, i1, valid0, valid1, ip, plane, &a, &b);
    hn::StoreU(a, d, v0 + i);
    hn::StoreU(b, d, v1 + i);
  }
}
#endif

// Calls use(k, values) for each tap of one channel plane in order, reading
// right-hand neighbours in pairs where the tile has them.
template <bool kFlat, class S, class T, int K, int G, class Use>
inline void for_each_tap(const Tile<T, K, G>& t, const S* __restrict ip, int64_t plane, Use&& use) {
  alignas(64) T v[2][kTile] = {};
#if HWY_TARGET != HWY_SCALAR
  if constexpr (kFlat && std::is_same_v<S, float> && std::is_same_v<T, float> && K % 2 == 0) {
    if (t.pairs && plane >= 2) {
      for (int k = 0; k < K; k += 2) {
        pair_values(t, k, ip, plane, v[0], v[1]);
        use(k, v[0]);
        use(k + 1, v[1]);
      }
      return;
    }
  }
#endif
  for (int k = 0; k < K; ++k) {
    tap_values<kFlat>(t, k, ip, plane, v[0]);
    use(k, v[0]);
  }
}

// Forward of one channel plane over a tile: op at each pixel's out_off =
// sum over taps of w * input, in tap order, as multiply-adds (MulAdd: fused
// where the target has FMA), like forward_lanes: every forward path gives
// the same bits, so the planner's choice of path never shows in a result.
// (Whole vectors over the tile's buffers: lanes past `count` are computed
// and not stored.)
template <bool kFlat, class S, class T, int K, int G>
inline void forward_channel(const Tile<T, K, G>& t, const S* __restrict ip, int64_t plane, S* __restrict op) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<T> d;
  const int n = static_cast<int>(hn::Lanes(d));
  const int count = t.count;
  const int vectors = (count + n - 1) / n;
  alignas(64) T acc[kTile];
  for (int j = 0; j < vectors; ++j) hn::Store(hn::Zero(d), d, acc + j * n);
  for_each_tap<kFlat>(t, ip, plane, [&](int k, const T* __restrict v) {
    const T* __restrict w = t.w[k];
    for (int j = 0; j < vectors; ++j) {
      const int i = j * n;
      hn::Store(hn::MulAdd(hn::LoadU(d, w + i), hn::LoadU(d, v + i), hn::Load(d, acc + i)), d, acc + i);
    }
  });
  if constexpr (kHalvesByVector<S, T>) {
    if (t.out_dense) {
      narrow_to_halves(acc, count, op + t.out_off[0]);
    } else {
      alignas(64) Half raw[kTile];
      narrow_to_halves(acc, count, raw);
      for (int i = 0; i < count; ++i) op[t.out_off[i]] = raw[i];
    }
  } else if (t.out_dense) {
    S* __restrict o = op + t.out_off[0];
    for (int i = 0; i < count; ++i) o[i] = store<S>(acc[i]);
  } else {
    for (int i = 0; i < count; ++i) op[t.out_off[i]] = store<S>(acc[i]);
  }
}

#if HWY_ARCH_X86 && HWY_TARGET <= HWY_AVX3
#define GRIDSAMPLER_WINDOW_SCATTER 1
// acc[idx[i]] += p[i] for the 16 pixels of one vector from i, where their
// indices rise strictly and lie within 32 elements of the first (a
// downsampling's taps: a pixel's tap two elements after its
// neighbour's): the window's two vectors loaded, the products spread to
// their elements by expands, added, and stored under the mask of the
// elements hit (no other element is written). Each element gets at most
// one term, in the scalar loop's order, so the bits are the same (where a
// NaN term meets a NaN sum, which NaN's payload survives is the compiler's
// choice on either path). Returns false, touching nothing, for other
// vectors (and for an invalid tap, index `plane`). AVX-512 only: Highway
// 1.0 has no expand.
inline bool window_add(float* __restrict acc, const int32_t* __restrict idx, __m512 p, int64_t plane) {
  const __m512i at = _mm512_loadu_si512(idx);
  const int32_t base = idx[0];
  const __m512i previous = _mm512_permutexvar_epi32(_mm512_set_epi32(14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0), at);
  const __m512i rel = _mm512_sub_epi32(at, _mm512_set1_epi32(base));
  const __mmask16 rising = _mm512_cmpgt_epi32_mask(at, previous) | 1;
  const __mmask16 near = _mm512_cmplt_epi32_mask(rel, _mm512_set1_epi32(32));
  const __mmask16 valid = _mm512_cmplt_epi32_mask(at, _mm512_set1_epi32(static_cast<int32_t>(plane)));
  if ((rising & near & valid) != 0xffff) return false;
  const auto hit = static_cast<uint32_t>(_mm512_reduce_or_epi32(_mm512_sllv_epi32(_mm512_set1_epi32(1), rel)));
  const auto lo = static_cast<__mmask16>(hit & 0xffffu), hi = static_cast<__mmask16>(hit >> 16);
  const int below = __builtin_popcount(hit & 0xffffu);
  const __m512 add_lo = _mm512_maskz_expand_ps(lo, p);
  const __m512 add_hi = _mm512_maskz_expand_ps(hi, _mm512_maskz_compress_ps(static_cast<__mmask16>(0xffffu << below), p));
  float* a = acc + base;
  _mm512_mask_storeu_ps(a, lo, _mm512_add_ps(add_lo, _mm512_maskz_loadu_ps(lo, a)));
  if (hi != 0) _mm512_mask_storeu_ps(a + 16, hi, _mm512_add_ps(add_hi, _mm512_maskz_loadu_ps(hi, a + 16)));
  return true;
}
#endif

// Backward of one channel plane over a tile: dx into `acc` (one
// accumulator plane at flat index times `step`: a scratch plane, step 1, or
// dx's own, its pixels `step` apart), dgrid terms into sums[g]. Separate
// simple loops over the tile's pixels, so that the compiler vectorises the
// ones without scatter conflicts; the dx scatter stays scalar because
// neighbouring pixels may hit the same input pixel.
template <bool kFlat, class S, class T, int K, int G, bool kDx, bool kDgrid>
inline void backward_channel(const Tile<T, K, G>& t, const S* __restrict gp, const S* __restrict ip,
                             int64_t plane, T* __restrict acc, int64_t step, T (*__restrict sums)[kTile]) {
  const int count = t.count;
  alignas(64) T g[kTile];
  tile_grads<S>(t, gp, g);
  if constexpr (kDx) {
    // An invalid tap (index `plane`) adds to a sink: `acc` may be dx itself,
    // with no zero slot after the plane.
    T sink = 0;
    for (int k = 0; k < K; ++k) {
      const auto* __restrict idx = flat_indices<kFlat>(t, k);
      const T* __restrict w = t.w[k];
      if (step != 1) {
        for (int i = 0; i < count; ++i) {
          T* a = idx[i] != plane ? acc + idx[i] * step : &sink;
          *a += w[i] * g[i];
        }
        continue;
      }
      int i = 0;
#ifdef GRIDSAMPLER_WINDOW_SCATTER
      if constexpr (kFlat && std::is_same_v<T, float>) {
        for (; i + 16 <= count; i += 16) {
          const __m512 p = _mm512_mul_ps(_mm512_loadu_ps(w + i), _mm512_loadu_ps(g + i));
          if (window_add(acc, idx + i, p, plane)) continue;
          for (int j = i; j < i + 16; ++j) {
            T* a = idx[j] != plane ? acc + idx[j] : &sink;
            *a += w[j] * g[j];
          }
        }
      }
#endif
      for (; i < count; ++i) {
        T* a = idx[i] != plane ? acc + idx[i] : &sink;
        *a += w[i] * g[i];
      }
    }
  }
  if constexpr (kDgrid) {
    alignas(64) T s[G][kTile] = {};
    for_each_tap<kFlat>(t, ip, plane, [&](int k, const T* __restrict v) {
      for (int c = 0; c < G; ++c) {
        const T* __restrict dw = t.dw[c][k];
        T* __restrict sc = s[c];
        for (int i = 0; i < count; ++i) sc[i] += dw[i] * v[i];
      }
    });
    for (int c = 0; c < G; ++c) {
      T* __restrict out = sums[c];
      const T* __restrict sc = s[c];
      for (int i = 0; i < count; ++i) out[i] += sc[i] * g[i];
    }
  }
}

// Narrow blocks (L lanes filling a part of the target's vector, as 4 floats
// of AVX2's 8 or AVX-512's 16) are worked P = vector / L pixels at a time:
// each pixel's row of L values in its own part of one vector, so a tap
// costs one multiply-add for P pixels instead of one each. Each lane still
// sees the same operations in the same order, so the bits do not change.
// (The one-lane targets, without Combine, work one pixel at a time.)
#if HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
// Only for stencils of up to 8 taps: the rows' inserts and the weights'
// permutation are shuffles, and with bicubic's 16 taps they cost more than
// the multiply-adds saved (docs/performance.md).
template <int L, class T, int K>
constexpr int pixels_per_vector() {
  namespace hn = hwy::HWY_NAMESPACE;
  constexpr int n = static_cast<int>(hn::MaxLanes(hn::ScalableTag<T>()));
  constexpr int p = n % L == 0 ? n / L : 1;
  return p > 1 && L * sizeof(T) >= 16 && K <= 8 ? p : 1;  // rows of whole 128-bit blocks
}

// The rows of L values at rows[0..P) side by side: row j in lanes
// [j * L, (j + 1) * L).
template <int L, class D, class T>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<D> load_rows(D d, const T* const* rows) {
  namespace hn = hwy::HWY_NAMESPACE;
  constexpr int n = static_cast<int>(hn::MaxLanes(d));
  if constexpr (n == L) {
    return hn::LoadU(d, rows[0]);
  } else {
    const hn::Half<D> dh;
    return hn::Combine(d, load_rows<L>(dh, rows + n / L / 2), load_rows<L>(dh, rows));
  }
}

// w[0..P), each repeated over its pixel's L lanes: one 128-bit load and a
// permutation when the P weights fill 128 bits, else broadcasts combined.
template <int L, class D, class T>
HWY_INLINE hwy::HWY_NAMESPACE::Vec<D> spread_weights(D d, const T* w) {
  namespace hn = hwy::HWY_NAMESPACE;
  constexpr int n = static_cast<int>(hn::MaxLanes(d));
  if constexpr (n == L) {
    return hn::Set(d, w[0]);
  } else if constexpr (n / L * sizeof(T) == 16) {
    using TI = hwy::MakeSigned<T>;
    alignas(64) TI idx[n];
    for (int j = 0; j < n; ++j) idx[j] = static_cast<TI>(j / L);
    return hn::TableLookupLanes(hn::LoadDup128(d, w), hn::SetTableIndices(d, idx));
  } else {
    const hn::Half<D> dh;
    return hn::Combine(d, spread_weights<L>(dh, w + n / L / 2), spread_weights<L>(dh, w));
  }
}

#endif

// Forward of a block of L channels over a tile (flat taps into xin, a
// [pixel][lane] copy of the input): ot[pixel][lane]. The interleaved kernels
// read flat indices at the gathers' width (gather_indices: int32 for float,
// whose builders then skip the int64 copy; an interleaved copy is far below
// 2^31 pixels, see kMaxInterleavedBytes).
// Written with Highway's vectors (CappedTag: L / N vectors of N lanes,
// N = 16 floats on AVX-512): left to itself the compiler sometimes unrolls
// these fixed-length loops into scalar code instead of vectorising them.
template <int L, class T, int K, int G>
inline void forward_lanes(const Tile<T, K, G>& t, const T* __restrict xin, T* __restrict ot) {
  namespace hn = hwy::HWY_NAMESPACE;
  using D = hn::CappedTag<T, L>;
  const D d;
  constexpr int N = static_cast<int>(hn::MaxLanes(D()));
  constexpr int V = L / N;
  static_assert(V * N == L);
  int i = 0;
#if HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  constexpr int P = pixels_per_vector<L, T, K>();
  if constexpr (P > 1) {
    const hn::ScalableTag<T> dp;
    // R vectors of P pixels from pixel i: R independent chains of K
    // multiply-adds (one chain alone is bound by their latency), so two at
    // a time, then one.
    auto pixels = [&](auto vectors) {
      constexpr int R = decltype(vectors)::value;
      hn::Vec<decltype(dp)> acc[R];
      for (int r = 0; r < R; ++r) acc[r] = hn::Zero(dp);
      for (int k = 0; k < K; ++k) {
        const T* rows[R * P];
        for (int j = 0; j < R * P; ++j) rows[j] = xin + int64_t{gather_indices(&t, k)[i + j]} * L;
        for (int r = 0; r < R; ++r) {
          acc[r] = hn::MulAdd(spread_weights<L>(dp, &t.w[k][i + r * P]), load_rows<L>(dp, rows + r * P), acc[r]);
        }
      }
      for (int r = 0; r < R; ++r) hn::StoreU(acc[r], dp, ot + (i + r * P) * L);
    };
    for (; i + 2 * P <= t.count; i += 2 * P) pixels(std::integral_constant<int, 2>{});
    for (; i + P <= t.count; i += P) pixels(std::integral_constant<int, 1>{});
  }
#endif
  // R pixels from pixel i, each a chain of K multiply-adds per vector in
  // tap order. Large stencils (tricubic's 64 taps) take several at a time:
  // a pixel's chain is longer than the core can look ahead past, so the
  // chains run side by side (the same bits); the rest one at a time.
  auto group = [&](auto pixels) {
    constexpr int R = decltype(pixels)::value;
    hn::Vec<D> acc[R][V];
    for (int r = 0; r < R; ++r) {
      for (int v = 0; v < V; ++v) acc[r][v] = hn::Zero(d);
    }
    for (int k = 0; k < K; ++k) {
      const auto* __restrict idx = gather_indices(&t, k);
      for (int r = 0; r < R; ++r) {
        const T* __restrict x = xin + int64_t{idx[i + r]} * L;
        const auto w = hn::Set(d, t.w[k][i + r]);
        for (int v = 0; v < V; ++v) acc[r][v] = hn::MulAdd(w, hn::LoadU(d, x + v * N), acc[r][v]);
      }
    }
    for (int r = 0; r < R; ++r) {
      for (int v = 0; v < V; ++v) hn::Store(acc[r][v], d, ot + (i + r) * L + v * N);
    }
  };
  constexpr int R = K >= 64 ? (V >= 4 ? 1 : 4 / V) : 1;
  if constexpr (R > 1) {
    for (; i + R <= t.count; i += R) group(std::integral_constant<int, R>{});
  }
  for (; i < t.count; ++i) group(std::integral_constant<int, 1>{});
}

// Backward of a block of L channels over a tile: gt holds the tile's grad
// as [pixel][lane], xin the input values and acc the dx accumulators, both
// [pixel][lane] with flat taps; dgrid terms, summed over the lanes, are
// added to sums[g].
template <int L, class T, int K, int G, bool kDx, bool kDgrid>
inline void backward_lanes(const Tile<T, K, G>& t, const T* __restrict gt, const T* __restrict xin,
                           T* __restrict acc, T (*__restrict sums)[kTile]) {
  namespace hn = hwy::HWY_NAMESPACE;
  using D = hn::CappedTag<T, L>;
  const D d;
  constexpr int N = static_cast<int>(hn::MaxLanes(D()));
  constexpr int V = L / N;
  static_assert(V * N == L);
  constexpr int kPrefetch = 8;
  using Vec = hn::Vec<D>;
  // Four lanes in one vector: their per-pixel sums are kept and added up
  // for the whole tile afterwards (a lane sum per pixel costs more than
  // the pixel's taps).
  constexpr bool kBatchSums = L == 4 && N == 4;
  alignas(64) T lane[G][kBatchSums ? kTile * L : 1];
  const int count = t.count;
  int i = 0;
#if HWY_TARGET != HWY_SCALAR && HWY_TARGET != HWY_EMU128
  // dgrid alone with narrow blocks: P pixels per vector, as forward_lanes
  // (the lane sums below take the same [pixel][lane] products).
  constexpr int P = pixels_per_vector<L, T, K>();
  if constexpr (kDgrid && !kDx && kBatchSums && P > 1) {
    const hn::ScalableTag<T> dp;
    for (; i + P <= count; i += P) {
      if (i + P + kPrefetch <= count) {
        for (int k = 0; k < K; k += (K >= 16 ? 4 : 1)) {
          const auto* __restrict idx = gather_indices(&t, k);
          for (int j = 0; j < P; ++j) hwy::Prefetch(xin + int64_t{idx[i + P + kPrefetch - 1 - j]} * L);
        }
      }
      hn::Vec<decltype(dp)> s[G];
      for (int c = 0; c < G; ++c) s[c] = hn::Zero(dp);
      for (int k = 0; k < K; ++k) {
        const T* rows[P];
        for (int j = 0; j < P; ++j) rows[j] = xin + int64_t{gather_indices(&t, k)[i + j]} * L;
        const auto xv = load_rows<L>(dp, rows);
        for (int c = 0; c < G; ++c) s[c] = hn::MulAdd(spread_weights<L>(dp, &t.dw[c][k][i]), xv, s[c]);
      }
      const auto gv = hn::LoadU(dp, gt + i * L);
      for (int c = 0; c < G; ++c) hn::Store(hn::Mul(s[c], gv), dp, lane[c] + i * L);
    }
  }
#endif
  // The taps of pixel j, whose lines are likely not in L1 (or L2) when the
  // grid jumps about; one per row of a 4 x 4 stencil.
  auto prefetch = [&](int j) {
    for (int k = 0; k < K; k += (K >= 16 ? 4 : 1)) {
      const int64_t q = gather_indices(&t, k)[j];
      if constexpr (kDx) hwy::Prefetch(acc + q * L);
      if constexpr (kDgrid) hwy::Prefetch(xin + q * L);
    }
  };
  // Pixel j's dx taps, in tap order.
  auto add_dx = [&](int j, const Vec* gv) {
    for (int k = 0; k < K; ++k) {
      T* __restrict a = acc + int64_t{gather_indices(&t, k)[j]} * L;
      const Vec w = hn::Set(d, t.w[k][j]);
      for (int v = 0; v < V; ++v) hn::StoreU(hn::MulAdd(w, gv[v], hn::LoadU(d, a + v * N)), d, a + v * N);
    }
  };
  // Pixel j's dgrid terms from its per-lane sums s: summed over the lanes,
  // vectors in order, then the target's lane sum (a fixed order for a given
  // target).
  auto finish = [&](int j, const Vec* gv, const Vec (*s)[V]) {
    for (int c = 0; c < G; ++c) {
      Vec total = hn::Mul(s[c][0], gv[0]);
      for (int v = 1; v < V; ++v) total = hn::MulAdd(s[c][v], gv[v], total);
      if constexpr (kBatchSums) {
        hn::Store(total, d, lane[c] + j * L);
      } else {
        sums[c][j] += hn::GetLane(hn::SumOfLanes(d, total));
      }
    }
  };
  // Large stencils (tricubic's 64 taps): a pixel's dgrid sums are G chains
  // of K dependent multiply-adds, and its taps take more instructions than
  // the core can look ahead, so the next pixel cannot hide their latency. R
  // pixels at a time then: their dx taps pixel after pixel (the order every
  // accumulator sees is unchanged) and their dgrid chains side by side, each
  // in tap order: the same bits. R as large as 12 accumulator vectors allow.
  constexpr int R = kDgrid && K >= 64 ? (G * V >= 12 ? 1 : 12 / (G * V)) : 1;
  if constexpr (R > 1) {
    for (; i + R <= count; i += R) {
      for (int r = 0; r < R; ++r) {
        if (i + r + kPrefetch < count) prefetch(i + r + kPrefetch);
      }
      Vec gv[R][V], s[R][G][V];
      for (int r = 0; r < R; ++r) {
        for (int v = 0; v < V; ++v) {
          gv[r][v] = hn::LoadU(d, gt + (i + r) * L + v * N);
          for (int c = 0; c < G; ++c) s[r][c][v] = hn::Zero(d);
        }
      }
      if constexpr (kDx) {
        for (int r = 0; r < R; ++r) add_dx(i + r, gv[r]);
      }
      for (int k = 0; k < K; ++k) {
        const auto* __restrict idx = gather_indices(&t, k);
        for (int r = 0; r < R; ++r) {
          const T* __restrict x = xin + int64_t{idx[i + r]} * L;
          for (int v = 0; v < V; ++v) {
            const Vec xv = hn::LoadU(d, x + v * N);
            for (int c = 0; c < G; ++c) s[r][c][v] = hn::MulAdd(hn::Set(d, t.dw[c][k][i + r]), xv, s[r][c][v]);
          }
        }
      }
      for (int r = 0; r < R; ++r) finish(i + r, gv[r], s[r]);
    }
  }
  for (; i < count; ++i) {
    if (i + kPrefetch < count) prefetch(i + kPrefetch);
    const T* __restrict g = gt + i * L;
    Vec gv[V], s[G][V];
    for (int v = 0; v < V; ++v) {
      gv[v] = hn::LoadU(d, g + v * N);
      for (int c = 0; c < G; ++c) s[c][v] = hn::Zero(d);
    }
    for (int k = 0; k < K; ++k) {
      const int64_t q = gather_indices(&t, k)[i];
      if constexpr (kDx) {
        T* __restrict a = acc + q * L;
        const Vec w = hn::Set(d, t.w[k][i]);
        for (int v = 0; v < V; ++v) hn::StoreU(hn::MulAdd(w, gv[v], hn::LoadU(d, a + v * N)), d, a + v * N);
      }
      if constexpr (kDgrid) {
        const T* __restrict x = xin + q * L;
        Vec dw[G];
        for (int c = 0; c < G; ++c) dw[c] = hn::Set(d, t.dw[c][k][i]);
        for (int v = 0; v < V; ++v) {
          const Vec xv = hn::LoadU(d, x + v * N);
          for (int c = 0; c < G; ++c) s[c][v] = hn::MulAdd(dw[c], xv, s[c][v]);
        }
      }
    }
    if constexpr (kDgrid) finish(i, gv, s);
  }
  if constexpr (kDgrid && kBatchSums) {
    // The four lanes of many pixels at once: (l0 + l1) + (l2 + l3), the same
    // order in the vector loop and the tail.
    const hn::ScalableTag<T> dw;
    const int nw = static_cast<int>(hn::Lanes(dw));
#pragma GCC unroll 4
    for (int c = 0; c < G; ++c) {
      const T* lanes = lane[c];
      T* out = sums[c];
      int i = 0;
      for (; i + nw <= count; i += nw) {
        hn::Vec<decltype(dw)> l0, l1, l2, l3;
        hn::LoadInterleaved4(dw, lanes + i * 4, l0, l1, l2, l3);
        hn::StoreU(hn::Add(hn::LoadU(dw, out + i), hn::Add(hn::Add(l0, l1), hn::Add(l2, l3))), dw, out + i);
      }
      for (; i < count; ++i) {
        const T* l = lanes + i * 4;
        out[i] += (l[0] + l[1]) + (l[2] + l[3]);
      }
    }
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#undef GRIDSAMPLER_WINDOW_SCATTER

#endif  // GRIDSAMPLER_CPU_MICROKERNELS_INL_H_
