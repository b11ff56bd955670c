// A 4-D tensor that owns its memory, for the programs around the library: the
// command-line tool, the demo, the benchmarks, the tests and the fuzzers.
// Any strides (in elements; padded, permuted and negative ones included) over
// a storage of its own; elements are read and written as double.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <vector>

#include "gridsampler/gridsampler.hpp"
#include "host/aligned_bytes.hpp"
#include "host/element_access.hpp"

namespace gridsampler::host {

class Tensor {
 public:
  Tensor() = default;
  // Dense row-major (C order), zero-filled.
  Tensor(DType dtype, const Shape4& shape);
  // Any strides, over a zero-filled storage of exactly the elements they reach.
  Tensor(DType dtype, const Shape4& shape, const Shape4& strides);
  // Any strides, element (0, 0, 0, 0) at element `offset` of a zero-filled
  // storage of `storage_elements` elements. Throws std::invalid_argument when
  // the view does not lie inside the storage.
  Tensor(DType dtype, const Shape4& shape, const Shape4& strides, int64_t offset, int64_t storage_elements);
  // Dense row-major over `data`, which must hold exactly the elements of `shape`.
  Tensor(DType dtype, const Shape4& shape, Bytes data);

  // A dense row-major tensor, zero-filled, or an error naming `name` when its
  // size overflows ("input: shape too large") or memory runs out.
  static Status allocate(std::string_view name, DType dtype, const Shape4& shape, Tensor* out);

  DType dtype() const { return dtype_; }
  const Shape4& shape() const { return shape_; }
  const Shape4& strides() const { return strides_; }
  int64_t offset() const { return offset_; }  // in elements, of (0, 0, 0, 0) in the storage
  int64_t numel() const { return shape_[0] * shape_[1] * shape_[2] * shape_[3]; }

  TensorView view() const;
  MutableTensorView mutable_view();

  // Element access as double; set rounds once to the dtype.
  double get(int64_t n, int64_t c, int64_t h, int64_t w) const;
  void set(int64_t n, int64_t c, int64_t h, int64_t w, double v);

  // Every element in logical (row-major) order, as double.
  std::vector<double> values() const;
  // Sets the elements in logical order from `v` (as many as both hold).
  void assign(const std::vector<double>& v);
  void fill(double v);
  // Copies the values of `from` (same shape, any dtype and layout), each
  // rounded once to this tensor's dtype.
  void assign_from(const Tensor& from);
  // Sets every element slot of the storage, in memory order, to next().
  template <class Next>
  void fill_storage(Next&& next);

  // The whole storage, gaps and all; release() hands it over and leaves the
  // tensor empty.
  const Bytes& storage() const { return storage_; }
  Bytes& storage() { return storage_; }
  Bytes release();

 private:
  std::byte* element(int64_t n, int64_t c, int64_t h, int64_t w);
  const std::byte* element(int64_t n, int64_t c, int64_t h, int64_t w) const;
  template <class F>
  void for_each_index(F&& f) const;

  DType dtype_ = DType::kFloat32;
  Shape4 shape_{};
  Shape4 strides_{};
  int64_t offset_ = 0;
  Bytes storage_;
};

template <class Next>
void Tensor::fill_storage(Next&& next) {
  // One dtype dispatch for the whole storage, not one per element.
  visit_dtype(dtype_, [&](auto tag) {
    using S = decltype(tag);
    for (std::size_t at = 0; at + sizeof(S) <= storage_.size(); at += sizeof(S)) {
      const S s = element_from_double<S>(next());
      std::memcpy(storage_.data() + at, &s, sizeof s);
    }
  });
}

}  // namespace gridsampler::host
