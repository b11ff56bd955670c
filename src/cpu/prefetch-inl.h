// Prefetching the next task's window. Many small images, each sampled at
// a few output pixels (attention glimpses, correlation lookups), read a
// small window of a plane that no earlier task touched: the first gathers
// of every task wait for memory, and the hardware prefetchers cannot guess
// gather addresses. The backward calls prefetch_window for the next task
// before running the current one, so that its lines arrive meanwhile (the
// forward measured no gain from it: docs/performance.md). A hint only: no
// value depends on it.

// Target-independent includes (normal include guards).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cpu/tile.hpp"
#include "cpu/tuning.hpp"

// Per-target part: re-included once for every target.
#if defined(GRIDSAMPLER_CPU_PREFETCH_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_PREFETCH_INL_H_
#undef GRIDSAMPLER_CPU_PREFETCH_INL_H_
#else
#define GRIDSAMPLER_CPU_PREFETCH_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
namespace {

// Prefetches the lines of the dense plane at `plane` (Hin x Win values of
// T, rows Win apart) that output pixels [p0, p0 + count) of image n can
// read: the box of their grid points, widened by two pixels on every side
// (any stencil's reach, under either align_corners), cut to the plane. Does
// nothing where the box spans more than kMaxPrefetchLines lines (a large
// window streams by itself) or a point is not finite. Images only (two
// grid components, dense points).
template <class T>
void prefetch_window(const TileSource& src, int64_t n, int64_t p0, int64_t count, const T* plane) {
  namespace hn = hwy::HWY_NAMESPACE;
  const hn::ScalableTag<T> d;
  const auto lanes = static_cast<int64_t>(hn::Lanes(d));
  const T* g = static_cast<const T*>(src.grid) + n * src.grid_strides[0] + 2 * p0;
  const int64_t values = 2 * count;
  // Whole vectors hold (x, y) pairs: x in the even lanes, y in the odd ones.
  auto lo = hn::Set(d, hwy::HighestValue<T>()), hi = hn::Set(d, hwy::LowestValue<T>());
  int64_t i = 0;
  for (; i + lanes <= values; i += lanes) {
    const auto v = hn::LoadU(d, g + i);
    lo = hn::Min(lo, v);
    hi = hn::Max(hi, v);
  }
  alignas(64) T lo_lanes[hn::MaxLanes(d)], hi_lanes[hn::MaxLanes(d)];
  hn::Store(lo, d, lo_lanes);
  hn::Store(hi, d, hi_lanes);
  double min[2] = {HUGE_VAL, HUGE_VAL}, max[2] = {-HUGE_VAL, -HUGE_VAL};
  for (int64_t l = 0; l < std::min(lanes, values); ++l) {
    min[l % 2] = std::min<double>(min[l % 2], lo_lanes[l]);
    max[l % 2] = std::max<double>(max[l % 2], hi_lanes[l]);
  }
  for (; i < values; ++i) {
    min[i % 2] = std::min<double>(min[i % 2], g[i]);
    max[i % 2] = std::max<double>(max[i % 2], g[i]);
  }
  // (NaN fails every comparison: a NaN point leaves its lane's bounds or
  // makes them NaN, and a NaN bound fails the finiteness test.)
  const int64_t size[2] = {src.in_w, src.in_h};
  int64_t first[2], last[2];
  for (int a = 0; a < 2; ++a) {
    if (!std::isfinite(min[a]) || !std::isfinite(max[a])) return;
    const double scale = 0.5 * static_cast<double>(size[a]);
    const double from = std::floor((min[a] + 1) * scale) - 2, to = std::ceil((max[a] + 1) * scale) + 2;
    first[a] = static_cast<int64_t>(std::clamp<double>(from, 0, static_cast<double>(size[a] - 1)));
    last[a] = static_cast<int64_t>(std::clamp<double>(to, 0, static_cast<double>(size[a] - 1)));
  }
  constexpr int64_t kLine = 64;
  const int64_t row_bytes = (last[0] - first[0] + 1) * static_cast<int64_t>(sizeof(T));
  const int64_t lines_per_row = row_bytes / kLine + 2;
  if ((last[1] - first[1] + 1) * lines_per_row > kMaxPrefetchLines) return;
  for (int64_t y = first[1]; y <= last[1]; ++y) {
    const char* begin = reinterpret_cast<const char*>(plane + y * src.in_w + first[0]);
    const char* end = reinterpret_cast<const char*>(plane + y * src.in_w + last[0]);
    const auto at = reinterpret_cast<std::uintptr_t>(begin) / kLine * kLine;
    for (auto line = at; line <= reinterpret_cast<std::uintptr_t>(end); line += kLine) {
      hwy::Prefetch(reinterpret_cast<const char*>(line));
    }
  }
}

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#endif  // GRIDSAMPLER_CPU_PREFETCH_INL_H_
