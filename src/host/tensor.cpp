#include "host/tensor.hpp"

#include <cstdint>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/validate.hpp"

namespace gridsampler::host {
namespace {

bool any_zero(const Shape4& shape) { return shape[0] == 0 || shape[1] == 0 || shape[2] == 0 || shape[3] == 0; }

bool has_negative(const Shape4& shape) { return shape[0] < 0 || shape[1] < 0 || shape[2] < 0 || shape[3] < 0; }

std::size_t storage_bytes(DType dtype, int64_t elements) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(elements), dtype_size(dtype), &bytes)) {
    throw std::length_error("host::Tensor: storage too large");
  }
  return bytes;
}

}  // namespace

Tensor::Tensor(DType dtype, const Shape4& shape)
    : Tensor(dtype, shape, contiguous_strides(shape), 0,
             any_zero(shape) ? 0 : shape[0] * shape[1] * shape[2] * shape[3]) {}

Tensor::Tensor(DType dtype, const Shape4& shape, const Shape4& strides) : dtype_(dtype), shape_(shape), strides_(strides) {
  if (any_zero(shape)) return;
  int64_t lo = 0, hi = 0, span = 0;
  if (has_negative(shape) || !detail::stride_reach(shape, strides, 0, &lo, &hi) ||
      __builtin_sub_overflow(hi, lo, &span) || span == std::numeric_limits<int64_t>::max()) {
    throw std::length_error("host::Tensor: strides reach too far");
  }
  offset_ = -lo;
  storage_.assign(storage_bytes(dtype, span + 1), std::byte{0});
}

Tensor::Tensor(DType dtype, const Shape4& shape, const Shape4& strides, int64_t offset, int64_t storage_elements)
    : dtype_(dtype), shape_(shape), strides_(strides), offset_(offset) {
  if (storage_elements < 0) throw std::invalid_argument("host::Tensor: negative storage size");
  if (!any_zero(shape)) {
    int64_t lo = 0, hi = 0;
    if (has_negative(shape) || !detail::stride_reach(shape, strides, offset, &lo, &hi) || lo < 0 || hi >= storage_elements) {
      throw std::invalid_argument("host::Tensor: view outside its storage");
    }
  }
  storage_.assign(storage_bytes(dtype, storage_elements), std::byte{0});
}

Tensor::Tensor(DType dtype, const Shape4& shape, Bytes data)
    : dtype_(dtype), shape_(shape), strides_(contiguous_strides(shape)), storage_(std::move(data)) {
  if (storage_.size() != storage_bytes(dtype, numel())) {
    throw std::invalid_argument("host::Tensor: data size does not match the shape");
  }
}

Status Tensor::allocate(std::string_view name, DType dtype, const Shape4& shape, Tensor* out) {
  uint64_t bytes = dtype_size(dtype);
  const auto too_large = [&] { return Status(StatusCode::kInvalidArgument, std::string(name) + ": shape too large"); };
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) return too_large();
  }
  if (bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return too_large();
  try {
    *out = Tensor(dtype, shape);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kInternal,
                  std::string(name) + ": out of memory allocating " + std::to_string(bytes) + " bytes");
  } catch (const std::length_error&) {
    return Status(StatusCode::kInternal,
                  std::string(name) + ": out of memory allocating " + std::to_string(bytes) + " bytes");
  }
  return Status::Ok();
}

TensorView Tensor::view() const {
  return {storage_.data() + offset_ * static_cast<int64_t>(dtype_size(dtype_)), dtype_, shape_, strides_};
}

MutableTensorView Tensor::mutable_view() {
  return {storage_.data() + offset_ * static_cast<int64_t>(dtype_size(dtype_)), dtype_, shape_, strides_};
}

const std::byte* Tensor::element(int64_t n, int64_t c, int64_t h, int64_t w) const {
  const int64_t at = offset_ + n * strides_[0] + c * strides_[1] + h * strides_[2] + w * strides_[3];
  return storage_.data() + at * static_cast<int64_t>(dtype_size(dtype_));
}

std::byte* Tensor::element(int64_t n, int64_t c, int64_t h, int64_t w) {
  return const_cast<std::byte*>(std::as_const(*this).element(n, c, h, w));
}

double Tensor::get(int64_t n, int64_t c, int64_t h, int64_t w) const {
  return load_element(element(n, c, h, w), dtype_);
}

void Tensor::set(int64_t n, int64_t c, int64_t h, int64_t w, double v) {
  store_element(element(n, c, h, w), dtype_, v);
}

template <class F>
void Tensor::for_each_index(F&& f) const {
  for (int64_t n = 0; n < shape_[0]; ++n)
    for (int64_t c = 0; c < shape_[1]; ++c)
      for (int64_t h = 0; h < shape_[2]; ++h)
        for (int64_t w = 0; w < shape_[3]; ++w) f(n, c, h, w);
}

std::vector<double> Tensor::values() const {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(numel()));
  for_each_index([&](int64_t n, int64_t c, int64_t h, int64_t w) { out.push_back(get(n, c, h, w)); });
  return out;
}

void Tensor::assign(const std::vector<double>& v) {
  std::size_t i = 0;
  for_each_index([&](int64_t n, int64_t c, int64_t h, int64_t w) {
    if (i < v.size()) set(n, c, h, w, v[i++]);
  });
}

void Tensor::fill(double v) {
  for_each_index([&](int64_t n, int64_t c, int64_t h, int64_t w) { set(n, c, h, w, v); });
}

void Tensor::assign_from(const Tensor& from) {
  if (from.shape_ != shape_) throw std::invalid_argument("host::Tensor::assign_from: shapes differ");
  for_each_index([&](int64_t n, int64_t c, int64_t h, int64_t w) { set(n, c, h, w, from.get(n, c, h, w)); });
}

Bytes Tensor::release() {
  Bytes out = std::move(storage_);
  *this = Tensor();
  return out;
}

}  // namespace gridsampler::host
