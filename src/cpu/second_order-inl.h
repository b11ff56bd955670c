// The double backward's channel loop (second order, double_backward.cpp):
// one output pixel's valid taps applied to a block of channels in
// [pixel][channel] copies, accumulators in vector registers. The driver
// prepares each tap's scalars (weight, gg_dgrid's weight v and curvature
// terms sv); this loop does, per channel c and in tap order, exactly the
// driver's scalar arithmetic (separate multiplies and adds, no fused ones):
//   d_grad[c]    += w * gg_dx[c] + v * x[c]        (terms present)
//   d_input[c]   += v * grad[c]                    (scattered when wanted)
//   tv[a][c]     += grad[c] * (gg_dx[c] * dw_a + x[c] * sv_a)
// so every target gives the scalar loop's bits. Whole vectors first, then
// narrower ones and single lanes for the channels left (the same operations
// on fewer lanes), so nothing is read or written past a pixel's channels.

// Target-independent includes (normal include guards).
#include <cstdint>

#include "cpu/double_backward.hpp"

// Per-target part: re-included once for every target.
#if defined(GRIDSAMPLER_CPU_SECOND_ORDER_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_SECOND_ORDER_INL_H_
#undef GRIDSAMPLER_CPU_SECOND_ORDER_INL_H_
#else
#define GRIDSAMPLER_CPU_SECOND_ORDER_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
namespace {

// Channels [c, c + Lanes(d)) of one pixel. kE: gg_dx's terms; kV: gg_dgrid's
// (smooth modes); kScatter: d_input's accumulators are written.
template <int G, bool kE, bool kV, bool kScatter, class D, class T = hwy::HWY_NAMESPACE::TFromD<D>>
HWY_INLINE void second_order_group(D d, const SecondOrderTaps<T>& t, const T* X, const T* E, T* A, const T* Gc,
                                   int64_t c, T* dg, T* tv) {
  namespace hn = hwy::HWY_NAMESPACE;
  using V = hn::Vec<D>;
  const V g = hn::LoadU(d, Gc + c);
  V sum = hn::Zero(d);
  V acc[G];
  for (int a = 0; a < G; ++a) acc[a] = hn::Zero(d);
  for (int k = 0; k < t.count; ++k) {
    const int64_t off = t.off[k] + c;
    if constexpr (kV) {
      const V v = hn::Set(d, t.v[k]);
      const V x = hn::LoadU(d, X + off);
      if constexpr (kE) {
        const V e = hn::LoadU(d, E + off);
        sum = hn::Add(sum, hn::Add(hn::Mul(hn::Set(d, t.w[k]), e), hn::Mul(v, x)));
        for (int a = 0; a < G; ++a) {
          const V inner = hn::Add(hn::Mul(e, hn::Set(d, t.dw[a][k])), hn::Mul(x, hn::Set(d, t.sv[a][k])));
          acc[a] = hn::Add(acc[a], hn::Mul(g, inner));
        }
      } else {
        sum = hn::Add(sum, hn::Mul(v, x));
        for (int a = 0; a < G; ++a) acc[a] = hn::Add(acc[a], hn::Mul(g, hn::Mul(x, hn::Set(d, t.sv[a][k]))));
      }
      if constexpr (kScatter) hn::StoreU(hn::Add(hn::LoadU(d, A + off), hn::Mul(v, g)), d, A + off);
    } else {
      sum = hn::Add(sum, hn::Mul(hn::Set(d, t.w[k]), hn::LoadU(d, E + off)));
    }
  }
  hn::StoreU(sum, d, dg + c);
  if constexpr (kV) {
    for (int a = 0; a < G; ++a) hn::StoreU(acc[a], d, tv + a * kSecondOrderMaxBlock + c);
  }
}

template <class T, int G, bool kE, bool kV, bool kScatter>
void second_order_channels(const void* taps, const void* X, const void* E, void* A, const void* Gc, int64_t nc,
                           void* dg, void* tv) {
  namespace hn = hwy::HWY_NAMESPACE;
  const auto& t = *static_cast<const SecondOrderTaps<T>*>(taps);
  const auto* x = static_cast<const T*>(X);
  const auto* e = static_cast<const T*>(E);
  auto* acc = static_cast<T*>(A);
  const auto* g = static_cast<const T*>(Gc);
  auto* sums = static_cast<T*>(dg);
  auto* terms = static_cast<T*>(tv);
#if HWY_TARGET == HWY_SCALAR
  // One lane: plain loops, channels innermost, which the compiler vectorises
  // for the baseline instruction set (the one-lane "vectors" below would run
  // one channel at a time). The sums live in local arrays, which nothing
  // else can alias: with the caller's pointers instead the compiler guarded
  // its vector loop with overlap checks, and the scalar version ran.
  T gl[kSecondOrderMaxBlock], dl[kSecondOrderMaxBlock], tl[G][kSecondOrderMaxBlock];
  for (int64_t c = 0; c < nc; ++c) {
    gl[c] = g[c];
    dl[c] = T(0);
    for (int a = 0; a < G; ++a) tl[a][c] = T(0);
  }
  for (int k = 0; k < t.count; ++k) {
    const T* xr = kV ? x + t.off[k] : nullptr;
    const T* er = kE ? e + t.off[k] : nullptr;
    T* ar = kScatter ? acc + t.off[k] : nullptr;
    const T wk = t.w[k], v = kV ? t.v[k] : T(0);  // (v and sv are set only with gg_dgrid's terms)
    T ad[G], sv[G];
    for (int a = 0; a < G; ++a) ad[a] = t.dw[a][k], sv[a] = kV ? t.sv[a][k] : T(0);
    for (int64_t c = 0; c < nc; ++c) {
      if constexpr (kV) {
        if constexpr (kE) {
          dl[c] += wk * er[c] + v * xr[c];
          for (int a = 0; a < G; ++a) tl[a][c] += gl[c] * (er[c] * ad[a] + xr[c] * sv[a]);
        } else {
          dl[c] += v * xr[c];
          for (int a = 0; a < G; ++a) tl[a][c] += gl[c] * (xr[c] * sv[a]);
        }
        if constexpr (kScatter) ar[c] += v * gl[c];
      } else {
        dl[c] += wk * er[c];
      }
    }
  }
  for (int64_t c = 0; c < nc; ++c) {
    sums[c] = dl[c];
    for (int a = 0; kV && a < G; ++a) terms[a * kSecondOrderMaxBlock + c] = tl[a][c];
  }
#else
  // Whole vectors, then narrower ones (8 and 4 lanes: a block of 8 channels
  // on AVX-512), then single lanes.
  const hn::ScalableTag<T> d;
  const hn::CappedTag<T, 8> d8;
  const hn::CappedTag<T, 4> d4;
  const hn::CappedTag<T, 1> d1;
  int64_t c = 0;
  for (const auto lanes = static_cast<int64_t>(hn::Lanes(d)); c + lanes <= nc; c += lanes) {
    second_order_group<G, kE, kV, kScatter>(d, t, x, e, acc, g, c, sums, terms);
  }
  if (hn::Lanes(d8) < hn::Lanes(d) && c + 8 <= nc) {
    second_order_group<G, kE, kV, kScatter>(d8, t, x, e, acc, g, c, sums, terms);
    c += 8;
  }
  if (hn::Lanes(d4) < hn::Lanes(d) && c + 4 <= nc) {
    second_order_group<G, kE, kV, kScatter>(d4, t, x, e, acc, g, c, sums, terms);
    c += 4;
  }
  for (; c < nc; ++c) second_order_group<G, kE, kV, kScatter>(d1, t, x, e, acc, g, c, sums, terms);
#endif
}

// Table entries by grid components (images, volumes), terms and scatter.
template <class T, int G>
void fill_second_order(SecondOrderFn (*entry)[2]) {
  entry[static_cast<int>(SecondOrderTerms::kBoth)][0] = &second_order_channels<T, G, true, true, false>;
  entry[static_cast<int>(SecondOrderTerms::kBoth)][1] = &second_order_channels<T, G, true, true, true>;
  entry[static_cast<int>(SecondOrderTerms::kGgDgrid)][0] = &second_order_channels<T, G, false, true, false>;
  entry[static_cast<int>(SecondOrderTerms::kGgDgrid)][1] = &second_order_channels<T, G, false, true, true>;
  // gg_dx alone (nearest): no d_input to scatter.
  entry[static_cast<int>(SecondOrderTerms::kGgDx)][0] = &second_order_channels<T, G, true, false, false>;
  entry[static_cast<int>(SecondOrderTerms::kGgDx)][1] = &second_order_channels<T, G, true, false, false>;
}

template <class S>
void fill_second_order(KernelTable* table) {
  using T = compute_t<S>;
  fill_second_order<T, 2>(table->second_order[0]);
  fill_second_order<T, 3>(table->second_order[1]);
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#endif  // GRIDSAMPLER_CPU_SECOND_ORDER_INL_H_
