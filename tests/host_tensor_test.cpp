// Host tensors (src/host/tensor.*): the 4-D image tensor and the 5-D volume
// tensor share one implementation; these check its facilities on both ranks.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <vector>

#include "host/tensor.hpp"

namespace gridsampler::host {
namespace {

std::vector<double> iota(int64_t n, double start = 1) {
  std::vector<double> v(static_cast<std::size_t>(n));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = start + static_cast<double>(i);
  return v;
}

TEST(VolumeTensor, DenseIsRowMajorAndZeroFilled) {
  VolumeTensor t(DType::kFloat32, {2, 3, 4, 5, 6});
  EXPECT_EQ(t.numel(), 720);
  EXPECT_EQ(t.strides(), (Shape5{360, 120, 30, 6, 1}));
  EXPECT_EQ(t.strides(), contiguous_strides_5d(t.shape()));
  EXPECT_EQ(t.offset(), 0);
  EXPECT_EQ(t.storage().size(), 720u * 4);
  for (double v : t.values()) ASSERT_EQ(v, 0.0);
  t.assign(iota(720));
  // Logical order is row-major: element (n, c, d, h, w) is the flat index.
  EXPECT_EQ(t.get(1, 2, 3, 4, 5), 720.0);
  EXPECT_EQ(t.get(0, 1, 2, 3, 4), 1.0 + 120 + 60 + 18 + 4);
  t.set(1, 0, 2, 1, 3, -2.5);
  EXPECT_EQ(t.values()[360 + 60 + 6 + 3], -2.5);
  const VolumeView v = t.view();
  EXPECT_EQ(v.data, t.storage().data());
  EXPECT_EQ(v.shape, t.shape());
  EXPECT_EQ(v.strides, t.strides());
  EXPECT_EQ(v.dtype, DType::kFloat32);
  EXPECT_EQ(static_cast<const float*>(v.data)[719], 720.0f);
  MutableVolumeView m = t.mutable_view();
  static_cast<float*>(m.data)[0] = 9;
  EXPECT_EQ(t.get(0, 0, 0, 0, 0), 9.0);
}

// Any strides: channels-last, negative (the first element at the far end of
// the storage), padded; the logical values do not depend on the layout.
TEST(VolumeTensor, AnyStridesKeepLogicalValues) {
  const Shape5 shape{2, 3, 2, 3, 4};
  VolumeTensor dense(DType::kFloat64, shape);
  dense.assign(iota(dense.numel(), -20));
  const Shape5 last = channels_last_strides_5d(shape);
  const Shape5 negative{-72, -24, -12, -4, -1};
  const Shape5 padded{300, 96, 40, 10, 2};
  for (const Shape5& strides : {last, negative, padded}) {
    VolumeTensor t(DType::kFloat64, shape, strides);
    EXPECT_EQ(t.strides(), strides);
    t.assign_from(dense);
    EXPECT_EQ(t.values(), dense.values());
    EXPECT_EQ(t.get(1, 2, 1, 2, 3), dense.get(1, 2, 1, 2, 3));
    // The view's data pointer is the first element.
    const auto* first = static_cast<const double*>(t.view().data);
    EXPECT_EQ(*first, -20.0);
  }
  VolumeTensor neg(DType::kFloat64, shape, negative);
  EXPECT_EQ(neg.offset(), 143);
  EXPECT_EQ(neg.storage().size(), 144u * 8);
}

TEST(VolumeTensor, OffsetAndStorage) {
  // A (1, 1, 2, 2, 2) view at offset 3 with stride 5 between depths, in a
  // storage of 20 elements.
  VolumeTensor t(DType::kFloat32, {1, 1, 2, 2, 2}, {8, 8, 5, 2, 1}, 3, 20);
  EXPECT_EQ(t.storage().size(), 80u);
  EXPECT_EQ(t.offset(), 3);
  t.fill(1.5);
  int ones = 0;
  for (std::size_t i = 0; i < 20; ++i) {
    float f;
    std::memcpy(&f, t.storage().data() + 4 * i, 4);
    ones += f == 1.5f;
    const bool in_view = i == 3 || i == 4 || i == 5 || i == 6 || i == 8 || i == 9 || i == 10 || i == 11;
    EXPECT_EQ(f, in_view ? 1.5f : 0.0f) << i;
  }
  EXPECT_EQ(ones, 8);
  EXPECT_THROW(VolumeTensor(DType::kFloat32, {1, 1, 2, 2, 2}, {8, 8, 5, 2, 1}, 3, 11), std::invalid_argument);
  EXPECT_THROW(VolumeTensor(DType::kFloat32, {1, 1, 2, 2, 2}, {8, 8, -5, 2, 1}, 3, 20), std::invalid_argument);
  EXPECT_THROW(VolumeTensor(DType::kFloat32, {1, 1, 2, 2, 2}, {8, 8, 5, 2, 1}, 0, -1), std::invalid_argument);
  // An empty view fits anywhere.
  VolumeTensor empty(DType::kFloat32, {1, 0, 2, 2, 2}, {8, 8, 5, 2, 1}, 1000, 4);
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_TRUE(empty.values().empty());
}

TEST(VolumeTensor, OwnsGivenBytes) {
  Bytes data(2 * 3 * 1 * 1 * 2 * 2, std::byte{0});
  const uint16_t one = 0x3c00;  // float16 1.0
  std::memcpy(data.data() + 2 * 5, &one, 2);
  VolumeTensor t(DType::kFloat16, {2, 3, 1, 1, 2}, std::move(data));
  EXPECT_EQ(t.get(0, 2, 0, 0, 1), 1.0);
  EXPECT_THROW(VolumeTensor(DType::kFloat16, {2, 3, 1, 1, 3}, Bytes(24)), std::invalid_argument);
  const Bytes taken = t.release();
  EXPECT_EQ(taken.size(), 24u);
  EXPECT_EQ(t.numel(), 0);
  EXPECT_TRUE(t.storage().empty());
}

TEST(VolumeTensor, AllocateNamesItsErrors) {
  VolumeTensor t;
  ASSERT_TRUE(VolumeTensor::allocate("input", DType::kBFloat16, {1, 2, 3, 4, 5}, &t).ok());
  EXPECT_EQ(t.shape(), (Shape5{1, 2, 3, 4, 5}));
  EXPECT_EQ(t.dtype(), DType::kBFloat16);
  EXPECT_EQ(t.storage().size(), 240u);
  const int64_t big = int64_t{1} << 20;
  Status s = VolumeTensor::allocate("grid", DType::kFloat32, {big, big, big, 1, 3}, &t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "grid: shape too large");
  s = VolumeTensor::allocate("dx", DType::kFloat32, {1, 1, -1, 1, 1}, &t);
  EXPECT_EQ(s.message(), "dx: shape too large");
  EXPECT_EQ(t.shape(), (Shape5{1, 2, 3, 4, 5}));  // untouched on error
}

// Values round once to the dtype; fill_storage writes every slot, gaps too.
TEST(VolumeTensor, RoundingAndStorageFill) {
  VolumeTensor h(DType::kFloat16, {1, 1, 1, 1, 3});
  h.assign({1.0 + 1.0 / 2048, 70000.0, std::numeric_limits<double>::quiet_NaN()});
  EXPECT_EQ(h.get(0, 0, 0, 0, 0), 1.0);  // a tie, to even
  EXPECT_TRUE(std::isinf(h.get(0, 0, 0, 0, 1)));
  EXPECT_TRUE(std::isnan(h.get(0, 0, 0, 0, 2)));

  VolumeTensor t(DType::kFloat64, {1, 1, 1, 2, 2}, {4, 4, 4, 2, 1}, 1, 6);
  double next = 0;
  t.fill_storage([&] { return next += 1; });
  EXPECT_EQ(next, 6.0);
  EXPECT_EQ(t.values(), (std::vector<double>{2, 3, 4, 5}));
  VolumeTensor other(DType::kFloat32, {1, 1, 1, 2, 3});
  EXPECT_THROW(other.assign_from(t), std::invalid_argument);
}

// The image tensor keeps its interface: 4 indices, 4-D views.
TEST(ImageTensor, SameFacilitiesOnFourDimensions) {
  Tensor t(DType::kFloat32, {2, 3, 4, 5}, channels_last_strides({2, 3, 4, 5}));
  t.assign(iota(120));
  EXPECT_EQ(t.get(1, 2, 3, 4), 120.0);
  EXPECT_EQ(t.get(0, 1, 0, 0), 21.0);
  const TensorView v = t.view();
  EXPECT_EQ(v.strides, channels_last_strides({2, 3, 4, 5}));
  EXPECT_EQ(static_cast<const float*>(v.data)[1], 21.0f);  // channels are adjacent
  Tensor dense(DType::kFloat64, {2, 3, 4, 5});
  dense.assign_from(t);
  EXPECT_EQ(dense.values(), iota(120));
  Tensor a;
  EXPECT_EQ(Tensor::allocate("output", DType::kFloat32, {int64_t{1} << 62, 4, 1, 1}, &a).message(),
            "output: shape too large");
}

}  // namespace
}  // namespace gridsampler::host
