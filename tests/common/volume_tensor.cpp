#include "common/volume_tensor.hpp"

#include <cstring>

#include "host/element_access.hpp"

namespace gstest {

using gridsampler::DType;
using gridsampler::Shape5;

const char* to_string(VolLayout layout) {
  switch (layout) {
    case VolLayout::kContiguous: return "ncdhw";
    case VolLayout::kChannelsLast: return "ndhwc";
    case VolLayout::kPaddedRows: return "padded_rows";
    case VolLayout::kSlicedH: return "sliced_h";
    case VolLayout::kNegativeW: return "negative_w";
    case VolLayout::kNegativeD: return "negative_d";
  }
  return "?";
}

namespace {

// Calls f(index) for every index of `shape` in row-major order.
template <class F>
void for_each_index(const Shape5& s, F&& f) {
  Shape5 i{};
  for (i[0] = 0; i[0] < s[0]; ++i[0])
    for (i[1] = 0; i[1] < s[1]; ++i[1])
      for (i[2] = 0; i[2] < s[2]; ++i[2])
        for (i[3] = 0; i[3] < s[3]; ++i[3])
          for (i[4] = 0; i[4] < s[4]; ++i[4]) f(i);
}

}  // namespace

VolTensor::VolTensor(DType dtype, const Shape5& shape, VolLayout layout) : dtype_(dtype), shape_(shape) {
  Shape5 alloc = shape;  // the dense buffer the view lies in (logical order N, C, D, H, W)
  if (layout == VolLayout::kPaddedRows) alloc[4] += 3;
  if (layout == VolLayout::kSlicedH) alloc[3] = 2 * shape[3];
  int64_t elements = 1;
  for (int64_t d : alloc) elements *= d;
  if (layout == VolLayout::kChannelsLast) {
    strides_ = gridsampler::channels_last_strides_5d(alloc);
  } else {
    strides_ = gridsampler::contiguous_strides_5d(alloc);
  }
  if (layout == VolLayout::kSlicedH) strides_[3] *= 2;
  if (layout == VolLayout::kNegativeW && shape[4] > 0) {
    origin_ = (shape[4] - 1) * strides_[4];
    strides_[4] = -strides_[4];
  }
  if (layout == VolLayout::kNegativeD && shape[2] > 0) {
    origin_ = (shape[2] - 1) * strides_[2];
    strides_[2] = -strides_[2];
  }
  storage_.assign(static_cast<std::size_t>(std::max<int64_t>(elements, 1)) * gridsampler::dtype_size(dtype), 0xA5);
}

int64_t VolTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape_) n *= d;
  return n;
}

int64_t VolTensor::offset_of(const Shape5& i) const {
  int64_t o = origin_;
  for (int k = 0; k < 5; ++k) o += i[k] * strides_[k];
  return o;
}

gridsampler::VolumeView VolTensor::view() const {
  const auto* base = storage_.data() + origin_ * static_cast<int64_t>(gridsampler::dtype_size(dtype_));
  return {base, dtype_, shape_, strides_};
}

gridsampler::MutableVolumeView VolTensor::mutable_view() {
  auto* base = storage_.data() + origin_ * static_cast<int64_t>(gridsampler::dtype_size(dtype_));
  return {base, dtype_, shape_, strides_};
}

double VolTensor::get(const Shape5& i) const {
  return gridsampler::host::load_element(
      storage_.data() + offset_of(i) * static_cast<int64_t>(gridsampler::dtype_size(dtype_)), dtype_);
}

void VolTensor::set(const Shape5& i, double v) {
  gridsampler::host::store_element(
      storage_.data() + offset_of(i) * static_cast<int64_t>(gridsampler::dtype_size(dtype_)), dtype_, v);
}

std::vector<double> VolTensor::values() const {
  std::vector<double> v;
  v.reserve(static_cast<std::size_t>(numel()));
  for_each_index(shape_, [&](const Shape5& i) { v.push_back(get(i)); });
  return v;
}

void VolTensor::assign(const std::vector<double>& v) {
  std::size_t k = 0;
  for_each_index(shape_, [&](const Shape5& i) {
    if (k < v.size()) set(i, v[k++]);
  });
}

void VolTensor::fill(double v) {
  for_each_index(shape_, [&](const Shape5& i) { set(i, v); });
}

void VolTensor::fill_uniform(std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  for_each_index(shape_, [&](const Shape5& i) { set(i, u(rng)); });
}

VolTensor VolTensor::relayout(VolLayout layout) const {
  VolTensor t(dtype_, shape_, layout);
  t.assign(values());  // exact: the values are already in the dtype
  return t;
}

bool VolTensor::outside_untouched() const {
  const auto elem = static_cast<int64_t>(gridsampler::dtype_size(dtype_));
  std::vector<bool> inside(storage_.size(), false);
  for_each_index(shape_, [&](const Shape5& i) {
    for (int64_t b = 0; b < elem; ++b) inside[static_cast<std::size_t>(offset_of(i) * elem + b)] = true;
  });
  for (std::size_t b = 0; b < storage_.size(); ++b) {
    if (!inside[b] && storage_[b] != 0xA5) return false;
  }
  return true;
}

std::vector<unsigned char> VolTensor::element_bytes() const {
  const auto elem = static_cast<int64_t>(gridsampler::dtype_size(dtype_));
  std::vector<unsigned char> out;
  for_each_index(shape_, [&](const Shape5& i) {
    const unsigned char* p = storage_.data() + offset_of(i) * elem;
    out.insert(out.end(), p, p + elem);
  });
  return out;
}

}  // namespace gstest
