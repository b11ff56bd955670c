#include "common/tensor.hpp"

#include <cmath>
#include <cstring>
#include <stdexcept>

namespace gstest {

using gridsampler::BFloat16;
using gridsampler::Half;

const char* to_string(Layout layout) {
  switch (layout) {
    case Layout::kContiguous: return "contiguous";
    case Layout::kChannelsLast: return "channels_last";
    case Layout::kPadded: return "padded";
    case Layout::kTransposedHW: return "transposed_hw";
    case Layout::kNegative: return "negative_w";
  }
  return "?";
}

Tensor::Tensor(DType dtype, const Shape4& shape, Layout layout)
    : dtype_(dtype), shape_(shape), layout_(layout) {
  const int64_t n = shape[0], c = shape[1], h = shape[2], w = shape[3];
  int64_t elems = 0;
  switch (layout) {
    case Layout::kContiguous:
      strides_ = gridsampler::contiguous_strides(shape);
      elems = n * c * h * w;
      break;
    case Layout::kChannelsLast:
      strides_ = gridsampler::channels_last_strides(shape);
      elems = n * c * h * w;
      break;
    case Layout::kPadded: {
      // Every dimension padded: W by 3 elements, H by 2 rows, C by one plane.
      const int64_t sw = 2, sh = sw * (w + 3), sc = sh * (h + 2), sn = sc * (c + 1);
      strides_ = {sn, sc, sh, sw};
      elems = sn * (n + 1);
      break;
    }
    case Layout::kTransposedHW:
      // Memory is N, C, W, H.
      strides_ = {c * h * w, h * w, 1, h};
      elems = n * c * h * w;
      break;
    case Layout::kNegative:
      // W runs backwards in memory.
      strides_ = {c * h * w, h * w, w, -1};
      base_ = w - 1;
      elems = n * c * h * w;
      break;
  }
  storage_.assign(static_cast<size_t>(std::max<int64_t>(elems, 1)) * gridsampler::dtype_size(dtype),
                  0);
  fill_storage_bytes(0xA5);
}

void Tensor::fill_storage_bytes(unsigned char byte) { std::memset(storage_.data(), byte, storage_.size()); }

int64_t Tensor::offset(int64_t a, int64_t b, int64_t c, int64_t d) const {
  return base_ + a * strides_[0] + b * strides_[1] + c * strides_[2] + d * strides_[3];
}

gridsampler::TensorView Tensor::view() const {
  const auto* p = storage_.data() + base_ * static_cast<int64_t>(gridsampler::dtype_size(dtype_));
  return {p, dtype_, shape_, strides_};
}

gridsampler::MutableTensorView Tensor::mutable_view() {
  auto* p = storage_.data() + base_ * static_cast<int64_t>(gridsampler::dtype_size(dtype_));
  return {p, dtype_, shape_, strides_};
}

double Tensor::get(int64_t a, int64_t b, int64_t c, int64_t d) const {
  const unsigned char* p = storage_.data() + offset(a, b, c, d) * gridsampler::dtype_size(dtype_);
  switch (dtype_) {
    case DType::kFloat16: { Half v; std::memcpy(&v, p, 2); return gridsampler::half_to_double(v); }
    case DType::kBFloat16: { BFloat16 v; std::memcpy(&v, p, 2); return gridsampler::bfloat16_to_double(v); }
    case DType::kFloat32: { float v; std::memcpy(&v, p, 4); return v; }
    case DType::kFloat64: { double v; std::memcpy(&v, p, 8); return v; }
  }
  throw std::logic_error("bad dtype");
}

void Tensor::set(int64_t a, int64_t b, int64_t c, int64_t d, double v) {
  unsigned char* p = storage_.data() + offset(a, b, c, d) * gridsampler::dtype_size(dtype_);
  switch (dtype_) {
    case DType::kFloat16: { Half h = gridsampler::half_from_double(v); std::memcpy(p, &h, 2); return; }
    case DType::kBFloat16: { BFloat16 h = gridsampler::bfloat16_from_double(v); std::memcpy(p, &h, 2); return; }
    case DType::kFloat32: { float f = static_cast<float>(v); std::memcpy(p, &f, 4); return; }
    case DType::kFloat64: std::memcpy(p, &v, 8); return;
  }
}

std::vector<double> Tensor::values() const {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(numel()));
  for (int64_t a = 0; a < shape_[0]; ++a)
    for (int64_t b = 0; b < shape_[1]; ++b)
      for (int64_t c = 0; c < shape_[2]; ++c)
        for (int64_t d = 0; d < shape_[3]; ++d) out.push_back(get(a, b, c, d));
  return out;
}

void Tensor::fill_uniform(std::mt19937_64& rng, double lo, double hi) {
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t a = 0; a < shape_[0]; ++a)
    for (int64_t b = 0; b < shape_[1]; ++b)
      for (int64_t c = 0; c < shape_[2]; ++c)
        for (int64_t d = 0; d < shape_[3]; ++d) set(a, b, c, d, dist(rng));
}

void Tensor::fill(double v) {
  for (int64_t a = 0; a < shape_[0]; ++a)
    for (int64_t b = 0; b < shape_[1]; ++b)
      for (int64_t c = 0; c < shape_[2]; ++c)
        for (int64_t d = 0; d < shape_[3]; ++d) set(a, b, c, d, v);
}

Tensor Tensor::relayout(Layout layout) const {
  Tensor t(dtype_, shape_, layout);
  for (int64_t a = 0; a < shape_[0]; ++a)
    for (int64_t b = 0; b < shape_[1]; ++b)
      for (int64_t c = 0; c < shape_[2]; ++c)
        for (int64_t d = 0; d < shape_[3]; ++d) t.set(a, b, c, d, get(a, b, c, d));
  return t;
}

Diff compare(const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() != b.size()) throw std::logic_error("compare: size mismatch");
  Diff d;
  for (size_t i = 0; i < a.size(); ++i) {
    if (!std::isnan(b[i])) d.max_ref = std::max(d.max_ref, std::fabs(b[i]));
    double e = std::fabs(a[i] - b[i]);
    if (std::isnan(a[i]) || std::isnan(b[i])) e = std::isnan(a[i]) == std::isnan(b[i]) ? 0 : INFINITY;
    if (e > d.max_abs) {
      d.max_abs = e;
      d.index = static_cast<int64_t>(i);
    }
  }
  return d;
}

}  // namespace gstest
