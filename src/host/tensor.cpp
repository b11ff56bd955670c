#include "host/tensor.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/validate.hpp"

namespace gridsampler::host {
namespace {

template <std::size_t Rank>
bool any_zero(const std::array<int64_t, Rank>& shape) {
  return std::find(shape.begin(), shape.end(), 0) != shape.end();
}

template <std::size_t Rank>
bool has_negative(const std::array<int64_t, Rank>& shape) {
  return std::any_of(shape.begin(), shape.end(), [](int64_t d) { return d < 0; });
}

template <std::size_t Rank>
int64_t product(const std::array<int64_t, Rank>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

template <std::size_t Rank>
std::array<int64_t, Rank> row_major_strides(const std::array<int64_t, Rank>& shape) {
  std::array<int64_t, Rank> strides{};
  int64_t step = 1;
  for (std::size_t d = Rank; d-- > 0;) {
    strides[d] = step;
    step *= shape[d];
  }
  return strides;
}

std::size_t storage_bytes(DType dtype, int64_t elements) {
  std::size_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::size_t>(elements), dtype_size(dtype), &bytes)) {
    throw std::length_error("host::Tensor: storage too large");
  }
  return bytes;
}

}  // namespace

template <std::size_t Rank>
StridedTensor<Rank>::StridedTensor(DType dtype, const Shape& shape)
    : StridedTensor(dtype, shape, row_major_strides(shape), 0, any_zero(shape) ? 0 : product(shape)) {}

template <std::size_t Rank>
StridedTensor<Rank>::StridedTensor(DType dtype, const Shape& shape, const Shape& strides)
    : dtype_(dtype), shape_(shape), strides_(strides) {
  if (any_zero(shape)) return;
  int64_t lo = 0, hi = 0, span = 0;
  if (has_negative(shape) || !detail::stride_reach(shape, strides, 0, &lo, &hi) ||
      __builtin_sub_overflow(hi, lo, &span) || span == std::numeric_limits<int64_t>::max()) {
    throw std::length_error("host::Tensor: strides reach too far");
  }
  offset_ = -lo;
  storage_.assign(storage_bytes(dtype, span + 1), std::byte{0});
}

template <std::size_t Rank>
StridedTensor<Rank>::StridedTensor(DType dtype, const Shape& shape, const Shape& strides, int64_t offset,
                                   int64_t storage_elements)
    : dtype_(dtype), shape_(shape), strides_(strides), offset_(offset) {
  if (storage_elements < 0) throw std::invalid_argument("host::Tensor: negative storage size");
  if (!any_zero(shape)) {
    int64_t lo = 0, hi = 0;
    if (has_negative(shape) || !detail::stride_reach(shape, strides, offset, &lo, &hi) || lo < 0 ||
        hi >= storage_elements) {
      throw std::invalid_argument("host::Tensor: view outside its storage");
    }
  }
  storage_.assign(storage_bytes(dtype, storage_elements), std::byte{0});
}

template <std::size_t Rank>
StridedTensor<Rank>::StridedTensor(DType dtype, const Shape& shape, Bytes data)
    : dtype_(dtype), shape_(shape), strides_(row_major_strides(shape)), storage_(std::move(data)) {
  if (storage_.size() != storage_bytes(dtype, numel())) {
    throw std::invalid_argument("host::Tensor: data size does not match the shape");
  }
}

template <std::size_t Rank>
Status StridedTensor<Rank>::allocate(std::string_view name, DType dtype, const Shape& shape, StridedTensor* out) {
  uint64_t bytes = dtype_size(dtype);
  const auto too_large = [&] { return Status(StatusCode::kInvalidArgument, std::string(name) + ": shape too large"); };
  for (int64_t d : shape) {
    if (d < 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) return too_large();
  }
  if (bytes > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return too_large();
  try {
    *out = StridedTensor(dtype, shape);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kInternal,
                  std::string(name) + ": out of memory allocating " + std::to_string(bytes) + " bytes");
  } catch (const std::length_error&) {
    return Status(StatusCode::kInternal,
                  std::string(name) + ": out of memory allocating " + std::to_string(bytes) + " bytes");
  }
  return Status::Ok();
}

template <std::size_t Rank>
int64_t StridedTensor<Rank>::numel() const {
  return product(shape_);
}

template <std::size_t Rank>
typename StridedTensor<Rank>::View StridedTensor<Rank>::view() const {
  return {storage_.data() + offset_ * static_cast<int64_t>(dtype_size(dtype_)), dtype_, shape_, strides_};
}

template <std::size_t Rank>
typename StridedTensor<Rank>::MutableView StridedTensor<Rank>::mutable_view() {
  return {storage_.data() + offset_ * static_cast<int64_t>(dtype_size(dtype_)), dtype_, shape_, strides_};
}

template <std::size_t Rank>
const std::byte* StridedTensor<Rank>::element(const Shape& index) const {
  int64_t at = offset_;
  for (std::size_t d = 0; d < Rank; ++d) at += index[d] * strides_[d];
  return storage_.data() + at * static_cast<int64_t>(dtype_size(dtype_));
}

template <std::size_t Rank>
std::byte* StridedTensor<Rank>::element(const Shape& index) {
  return const_cast<std::byte*>(std::as_const(*this).element(index));
}

// Calls f(index) for every index in row-major order.
template <std::size_t Rank>
template <class F>
void StridedTensor<Rank>::for_each_index(F&& f) const {
  if (any_zero(shape_) || has_negative(shape_)) return;
  Shape index{};
  for (;;) {
    f(index);
    std::size_t d = Rank;
    while (d-- > 0) {
      if (++index[d] < shape_[d]) break;
      index[d] = 0;
    }
    if (d == static_cast<std::size_t>(-1)) return;
  }
}

// Row-major with no gaps: the elements in index order are the storage's
// slots in order (the tests' tensors, mostly; the per-index walk was most of
// a threaded test's time under the sanitizers).
template <std::size_t Rank>
bool StridedTensor<Rank>::dense_row_major() const {
  return offset_ == 0 && !any_zero(shape_) && strides_ == row_major_strides(shape_) &&
         storage_.size() == storage_bytes(dtype_, numel());
}

template <std::size_t Rank>
std::vector<double> StridedTensor<Rank>::values() const {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(std::max<int64_t>(numel(), 0)));
  if (dense_row_major()) {
    const std::size_t size = dtype_size(dtype_);
    for (std::size_t at = 0; at < storage_.size(); at += size) {
      out.push_back(load_element(storage_.data() + at, dtype_));
    }
    return out;
  }
  for_each_index([&](const Shape& i) { out.push_back(load_element(element(i), dtype_)); });
  return out;
}

template <std::size_t Rank>
void StridedTensor<Rank>::assign(const std::vector<double>& v) {
  std::size_t k = 0;
  for_each_index([&](const Shape& i) {
    if (k < v.size()) store_element(element(i), dtype_, v[k++]);
  });
}

template <std::size_t Rank>
void StridedTensor<Rank>::fill(double v) {
  if (dense_row_major()) {
    fill_storage([v] { return v; });
    return;
  }
  for_each_index([&](const Shape& i) { store_element(element(i), dtype_, v); });
}

template <std::size_t Rank>
void StridedTensor<Rank>::assign_from(const StridedTensor& from) {
  if (from.shape_ != shape_) throw std::invalid_argument("host::Tensor::assign_from: shapes differ");
  for_each_index([&](const Shape& i) { store_element(element(i), dtype_, load_element(from.element(i), from.dtype_)); });
}

template <std::size_t Rank>
Bytes StridedTensor<Rank>::release() {
  Bytes out = std::move(storage_);
  *this = StridedTensor();
  return out;
}

template class StridedTensor<4>;
template class StridedTensor<5>;

}  // namespace gridsampler::host
