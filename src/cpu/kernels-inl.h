// Every kernel of one storage type S for the SIMD target being compiled:
// the pieces by concern, and the table that exports them (dispatch.hpp).
// Included by kernels_<dtype>.cpp through Highway's foreach_target.

// Target-independent includes (normal include guards).
#include "cpu/dispatch.hpp"
#include "cpu/stencil.hpp"

// Each piece re-includes itself once per target.
#include "cpu/builders-inl.h"
#include "cpu/builders_3d-inl.h"
#include "cpu/layout-inl.h"
#include "cpu/microkernels-inl.h"
#include "cpu/fused-inl.h"
#include "cpu/fused_bicubic-inl.h"
#include "cpu/prefetch-inl.h"
#include "cpu/window-inl.h"
#include "cpu/forward-inl.h"
#include "cpu/backward-inl.h"
#include "cpu/second_order-inl.h"

#if defined(GRIDSAMPLER_CPU_KERNELS_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_KERNELS_INL_H_
#undef GRIDSAMPLER_CPU_KERNELS_INL_H_
#else
#define GRIDSAMPLER_CPU_KERNELS_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {

// Drivers per mode (which fixes the stencil size) and path; builders per
// mode, padding, align_corners and tap form.
template <class S, Interpolation M>
void fill_mode(KernelTable* table) {
  constexpr int K = kTaps<M>;
  constexpr int m = static_cast<int>(M);
  table->forward[m][static_cast<int>(Path::kPlanar)] = &forward<S, K, 1>;
  table->forward[m][static_cast<int>(Path::kNarrowLanes)] = &forward<S, K, kNarrowLanes>;
  table->forward[m][static_cast<int>(Path::kLanes)] = &forward<S, K, kLanes>;
  table->backward[m][static_cast<int>(Path::kPlanar)] = &backward<S, K, 1>;
  table->backward[m][static_cast<int>(Path::kNarrowLanes)] = &backward<S, K, kNarrowLanes>;
  table->backward[m][static_cast<int>(Path::kLanes)] = &backward<S, K, kLanes>;
  fill_builders<S, M>(table);
  // Volumes: the same drivers over Tile<T, K, 3> (three grid components).
  constexpr int K3 = kTaps3<M>;
  table->forward_3d[m][static_cast<int>(Path::kPlanar)] = &forward<S, K3, 1, 3>;
  table->forward_3d[m][static_cast<int>(Path::kNarrowLanes)] = &forward<S, K3, kNarrowLanes, 3>;
  table->forward_3d[m][static_cast<int>(Path::kLanes)] = &forward<S, K3, kLanes, 3>;
  table->backward_3d[m][static_cast<int>(Path::kPlanar)] = &backward<S, K3, 1, 3>;
  table->backward_3d[m][static_cast<int>(Path::kNarrowLanes)] = &backward<S, K3, kNarrowLanes, 3>;
  table->backward_3d[m][static_cast<int>(Path::kLanes)] = &backward<S, K3, kLanes, 3>;
  fill_builders_3d<S, M>(table);
}

template <class S>
void fill_table(KernelTable* table) {
  fill_mode<S, Interpolation::kBilinear>(table);
  fill_mode<S, Interpolation::kNearest>(table);
  fill_mode<S, Interpolation::kBicubic>(table);
  fill_fused<S>(table);
  fill_fused_bicubic<S>(table);
  fill_second_order<S>(table);
}

}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#endif  // GRIDSAMPLER_CPU_KERNELS_INL_H_
