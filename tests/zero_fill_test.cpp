// detail::zero_fill (core/zero_fill.hpp), the clearing of outputs that an
// empty problem or a masked computation leaves at zero: every element of
// the view becomes all-zero bits and nothing else in the buffer changes, for
// dense, permuted, padded, negative-stride, broadcast-free and size-1 views of
// every element size.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <vector>

#include "core/zero_fill.hpp"

namespace {

template <std::size_t Rank>
struct View {
  std::array<int64_t, Rank> shape, strides;
  int64_t offset;  // of element 0, in elements from the buffer's start
};

// Marks every element a view reaches (walking it index by index, the slow
// obvious way) in `mask`.
template <std::size_t Rank>
void mark(const View<Rank>& v, std::vector<bool>* mask) {
  int64_t count = 1;
  for (int64_t d : v.shape) count *= d;
  for (int64_t e = 0; e < count; ++e) {
    int64_t rest = e, at = v.offset;
    for (std::size_t d = Rank; d-- > 0;) {
      at += rest % v.shape[d] * v.strides[d];
      rest /= v.shape[d];
    }
    (*mask)[static_cast<std::size_t>(at)] = true;
  }
}

template <std::size_t Rank>
void check(const View<Rank>& v, std::size_t elem, int64_t buffer_elems) {
  std::vector<unsigned char> buf(static_cast<std::size_t>(buffer_elems) * elem);
  std::iota(buf.begin(), buf.end(), static_cast<unsigned char>(1));
  for (auto& b : buf) b |= 0x80;  // no byte is 0 before the fill
  const std::vector<unsigned char> before = buf;
  gridsampler::detail::zero_fill(buf.data() + v.offset * static_cast<int64_t>(elem), elem, v.shape, v.strides);
  std::vector<bool> in_view(static_cast<std::size_t>(buffer_elems), false);
  mark(v, &in_view);
  for (int64_t e = 0; e < buffer_elems; ++e) {
    for (std::size_t b = 0; b < elem; ++b) {
      const std::size_t i = static_cast<std::size_t>(e) * elem + b;
      if (in_view[static_cast<std::size_t>(e)]) {
        ASSERT_EQ(buf[i], 0) << "element " << e << " of the view not cleared (element size " << elem << ")";
      } else {
        ASSERT_EQ(buf[i], before[i]) << "element " << e << " outside the view changed (element size " << elem << ")";
      }
    }
  }
}

TEST(ZeroFill, EveryElementOfTheViewAndNothingElse) {
  for (std::size_t elem : {std::size_t{2}, std::size_t{4}, std::size_t{8}}) {
    // Dense (N, C, H, W) and channels-last strides.
    check<4>({{2, 3, 4, 5}, {60, 20, 5, 1}, 0}, elem, 120);
    check<4>({{2, 3, 4, 5}, {60, 1, 15, 3}, 0}, elem, 120);
    // Rows padded (a gap after each row), a sliced channel range.
    check<4>({{2, 3, 4, 5}, {96, 32, 8, 1}, 0}, elem, 192);
    check<4>({{2, 2, 4, 5}, {60, 20, 5, 1}, 20}, elem, 140);
    // Negative strides: the view starts at its last row and column.
    check<4>({{2, 3, 4, 5}, {60, 20, -5, -1}, 19}, elem, 120);
    check<4>({{2, 3, 4, 5}, {-60, 20, 5, 1}, 60}, elem, 120);
    // Size-1 dimensions with arbitrary strides, a single element.
    check<4>({{1, 3, 1, 5}, {999, 5, 7, 1}, 0}, elem, 15);
    check<4>({{1, 1, 1, 1}, {0, 0, 0, 0}, 3}, elem, 8);
    // A dgrid-like (N, H, W, 2) view with the components as planes.
    check<4>({{2, 3, 4, 2}, {24, 4, 1, 12}, 0}, elem, 48);
    // Volumes: dense, channels-last, strided x.
    check<5>({{2, 3, 2, 3, 4}, {72, 24, 12, 4, 1}, 0}, elem, 144);
    check<5>({{2, 3, 2, 3, 4}, {72, 1, 36, 12, 3}, 0}, elem, 144);
    check<5>({{1, 2, 2, 3, 4}, {96, 48, 24, 8, 2}, 1}, elem, 97);
  }
}

TEST(ZeroFill, EmptyViewsTouchNothing) {
  // A zero-sized dimension: nothing is written, whatever the data pointer.
  gridsampler::detail::zero_fill<4>(nullptr, 4, {3, 0, 5, 5}, {0, 0, 0, 0});
  // ... also when a negative stride comes before the empty dimension (the
  // lowest address of a null view is not computed: UBSan checks).
  gridsampler::detail::zero_fill<4>(nullptr, 4, {3, 5, 0, 5}, {-8, 1, 0, 2});
  std::vector<unsigned char> buf(64, 0xAB);
  gridsampler::detail::zero_fill<5>(buf.data(), 4, {2, 2, 0, 2, 2}, {8, 4, 4, 2, 1});
  for (unsigned char b : buf) ASSERT_EQ(b, 0xAB);
}

}  // namespace
