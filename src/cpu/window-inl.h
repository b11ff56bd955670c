// Sliding windows of input rows for interleaved backward tasks. A task's
// dx accumulators and input values, [pixel][lane] copies of its channel
// block, would take a plane's worth each; but a smooth warp's or an affine
// crop's tiles, taken in output order, reach a band of input rows that moves
// down the plane. A window keeps only that band, in ring buffers of `cap`
// rows: rows enter (accumulators zeroed, values copied) when a tile first
// reaches them, and leave, written to dx, once no later tile can reach them
// (reach.hpp estimates that from the grid before the task starts). Every dx
// value is the same sum in the same order as with whole planes, so the bits
// are the same; only which memory holds it, and for how long, differs.

// Target-independent includes (normal include guards).
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "core/dtype.hpp"
#include "core/zero_fill.hpp"
#include "cpu/plan.hpp"
#include "cpu/reach.hpp"
#include "cpu/tile.hpp"

// Per-target part: re-included once for every target.
#if defined(GRIDSAMPLER_CPU_WINDOW_INL_H_) == defined(HWY_TARGET_TOGGLE)
#ifdef GRIDSAMPLER_CPU_WINDOW_INL_H_
#undef GRIDSAMPLER_CPU_WINDOW_INL_H_
#else
#define GRIDSAMPLER_CPU_WINDOW_INL_H_
#endif

#include "hwy/highway.h"

HWY_BEFORE_NAMESPACE();
namespace gridsampler::cpu {
namespace HWY_NAMESPACE {
namespace {

// One task's window: channels [c0, c1) of image n in sub-blocks of L lanes,
// rows [lo, hi) live, those below lo written out. Ring row r % cap holds
// row r; a sub-block's ring is `ring` pixels and a zero slot, `sub` values.
// `acc` is null when dx is not wanted, `values` when the task reads none.
//
// A task that is one of several pixel chunks of its (n, block) writes the
// rows that only its own reach covers (`spans`, one per chunk, from
// row_window) straight to dx, and the rest to its partial accumulators
// (`partial`, a plane's worth in [pixel][lane] order, sub-blocks `slot`
// pixels apart) for the fixed-order sums after the chunks.
template <int L, class S>
struct RowWindow {
  using T = compute_t<S>;
  const detail::Problem& p;
  const TensorView& input;
  const MutableTensorView& dx;
  int64_t n, c0, c1;
  T* acc;
  T* values;
  int64_t cap;
  int64_t width = p.in_w, rows = in_rows(p), ring = cap * width, sub = ring_values(p, 1, cap);
  int64_t lo = 0, hi = 0;
  int64_t batch = batch_rows(p);
  // Rows past `limit` are never taken in (a chunk's reach ends there).
  int64_t limit = rows;
  // (chunks only)
  const RowSpan* spans = nullptr;
  int64_t chunks = 1, part = 0;
  T* partial = nullptr;

  // Rows move in and out kWindowBatch pixels at a time at least.
  static int64_t batch_rows(const detail::Problem& p) { return std::max<int64_t>(kWindowBatch / p.in_w, 1); }
  // The ring a task that needs `need` rows at once takes: two batches more
  // (rows written out late and brought in early), at most the plane.
  static int64_t ring_rows(const detail::Problem& p, int64_t need) {
    return std::min(in_rows(p), need + 2 * batch_rows(p));
  }
  // The values of `blocks` sub-blocks' rings of `ring_rows` rows.
  static int64_t ring_values(const detail::Problem& p, int64_t blocks, int64_t ring_rows) {
    return blocks * (ring_rows * p.in_w + 1) * L;
  }

  int64_t blocks() const { return (c1 - c0 + L - 1) / L; }

  // The zero slots: where invalid taps read values (and add nothing).
  void start() {
    for (int64_t b = 0; b < blocks(); ++b) {
      if (acc != nullptr) std::fill_n(acc + b * sub + ring * L, L, T(0));
      if (values != nullptr) std::fill_n(values + b * sub + ring * L, L, T(0));
    }
  }

  // f(r0, r1, at): rows [r0, r1) split where the ring wraps, `at` the ring
  // pixel of r0.
  template <class F>
  void pieces(int64_t r0, int64_t r1, F&& f) const {
    while (r0 < r1) {
      const int64_t at = r0 % cap, m = std::min(r1 - r0, cap - at);
      f(r0, r0 + m, at * width);
      r0 += m;
    }
  }

  // The end of the run of rows from r (at most `to`) whose cover by the
  // other chunks' reach does not change, and whether it is covered.
  int64_t run_end(int64_t r, int64_t to, bool* shared) const {
    *shared = false;
    int64_t end = to;
    for (int64_t j = 0; j < chunks; ++j) {
      if (j == part || spans[j].empty()) continue;
      *shared = *shared || (spans[j].lo <= r && r < spans[j].hi);
      if (spans[j].lo > r) end = std::min(end, spans[j].lo);
      if (spans[j].hi > r) end = std::min(end, spans[j].hi);
    }
    return end;
  }

  // Rows [r0, r1) (live from the ring up to hi, zeros past it) to dx, or
  // to the partial accumulators where other chunks reach them too.
  void write_rows(int64_t r0, int64_t r1, bool shared) {
    const int64_t live = std::clamp(hi, r0, r1);
    if (shared) {
      const int64_t slot = in_plane(p) + 1;
      for (int64_t b = 0; b < blocks(); ++b) {
        T* to = partial + b * slot * L;
        pieces(r0, live, [&](int64_t q0, int64_t q1, int64_t at) {
          std::copy_n(acc + b * sub + at * L, (q1 - q0) * width * L, to + q0 * width * L);
        });
        std::fill(to + live * width * L, to + r1 * width * L, T(0));
      }
      return;
    }
    pieces(r0, live, [&](int64_t q0, int64_t q1, int64_t at) {
      store_lanes<L, S>(dx, width, ring + 1, n, c0, c1, acc + at * L, q0 * width, q1 * width);
    });
    if (live < r1) {
      const Shape4& ds = dx.strides;
      S* d = static_cast<S*>(dx.data) + n * ds[0] + c0 * ds[1] + live * ds[2];
      detail::zero_fill<3>(d, sizeof(S), {c1 - c0, r1 - live, width}, {ds[1], ds[2], ds[3]});
    }
  }

  // Writes rows [lo, to) out (rows never reached: zeros) and drops them,
  // once they make a batch (or `all`).
  void retire(int64_t to, bool all = false) {
    to = std::min(to, rows);
    if (to <= lo || (!all && to - lo < batch)) return;
    if (acc != nullptr) {
      for (int64_t r = lo; r < to;) {
        bool shared = false;
        const int64_t end = chunks > 1 ? run_end(r, to, &shared) : to;
        write_rows(r, end, shared);
        r = end;
      }
    }
    lo = to;
    hi = std::max(hi, to);
  }

  // Brings rows up to `to` in: accumulators zeroed, values copied. False
  // when the window would outgrow its ring.
  bool extend(int64_t to) {
    if (to <= hi) return true;
    if (to - lo > cap) return false;
    if (to > limit) return false;
    to = std::min({limit, lo + cap, std::max(to, hi + batch)});
    pieces(hi, to, [&](int64_t r0, int64_t r1, int64_t at) {
      for (int64_t b = 0; b < blocks(); ++b) {
        if (acc != nullptr) std::fill_n(acc + b * sub + at * L, (r1 - r0) * width * L, T(0));
        if (values != nullptr) {
          const int64_t s0 = c0 + b * L, s1 = std::min(c1, s0 + L);
          copy_values_at<L, S>(p, input, n, s0, s1, values + b * sub + at * L, r0 * width, r1 * width);
        }
      }
    });
    hi = to;
    return true;
  }

  // Takes a built tile in: its rows brought in and its flat indices moved
  // into the ring (the zero slot to the ring's). False when the tile reaches
  // a row already written out, past `limit`, or more rows than the ring
  // holds: the task then runs again with whole planes.
  template <int K, int G>
  bool admit(Tile<T, K, G>& t) {
    const int64_t plane = rows * width;
    int64_t q0 = plane, q1 = 0;
    for (int k = 0; k < K; ++k) to_ring(gather_indices(&t, k), t.count, lo / cap * ring, plane, &q0, &q1);
    return q0 >= q1 || (q0 >= lo * width && extend((q1 - 1) / width + 1));
  }

  // idx[i] for i < count, flat indices of a window from row lo, moved to
  // their ring pixels (`base` the pixel that ring pixel 0 held last, the
  // zero slot `plane` to the ring's); *q0 and *q1 widened to the lowest
  // index and one past the highest valid one. One pass, by vector: as
  // scalar code it took a sixth of a 16-channel volume's backward.
  template <class I>
  void to_ring(I* HWY_RESTRICT idx, int count, int64_t base, int64_t plane, int64_t* q0, int64_t* q1) const {
    namespace hn = hwy::HWY_NAMESPACE;
    const hn::ScalableTag<I> d;
    const int n = static_cast<int>(hn::Lanes(d));
    const auto vb = hn::Set(d, static_cast<I>(base)), vr = hn::Set(d, static_cast<I>(ring));
    const auto vz = hn::Set(d, static_cast<I>(plane)), none = hn::Set(d, I{-1});
    auto mn = vz, mx = none;
    auto move = [&](auto q) {
      mn = hn::Min(mn, q);
      const auto valid = hn::Lt(q, vz);
      mx = hn::Max(mx, hn::IfThenElse(valid, q, none));
      const auto r = hn::Sub(q, vb);
      return hn::IfThenElse(valid, hn::IfThenElse(hn::Lt(r, vr), r, hn::Sub(r, vr)), vr);
    };
    int i = 0;
    for (; i + n <= count; i += n) hn::StoreU(move(hn::LoadU(d, idx + i)), d, idx + i);
    int64_t lo_q = hn::GetLane(hn::MinOfLanes(d, mn)), hi_q = hn::GetLane(hn::MaxOfLanes(d, mx));
    for (; i < count; ++i) {  // (a partial tile's last pixels)
      const int64_t q = idx[i], r = q - base;
      lo_q = std::min(lo_q, q);
      if (q < plane) hi_q = std::max(hi_q, q);
      idx[i] = static_cast<I>(q >= plane ? ring : r < ring ? r : r - ring);
    }
    *q0 = std::min(*q0, lo_q);
    *q1 = std::max(*q1, hi_q + 1);
  }
};

}  // namespace
}  // namespace HWY_NAMESPACE
}  // namespace gridsampler::cpu
HWY_AFTER_NAMESPACE();

#endif  // GRIDSAMPLER_CPU_WINDOW_INL_H_
