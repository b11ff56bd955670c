// Tensors that own their memory, for the programs around the library: the
// command-line tool, the demo, the benchmarks, the tests and the fuzzers.
// host::Tensor is 4-D (images), host::VolumeTensor 5-D (volumes); both are
// StridedTensor<Rank>, which holds everything. Any strides (in elements;
// padded, permuted and negative ones included) over a storage of its own;
// elements are read and written as double.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

#include "gridsampler/gridsampler.hpp"
#include "host/aligned_bytes.hpp"
#include "host/element_access.hpp"

namespace gridsampler::host {

template <std::size_t Rank>
class StridedTensor {
 public:
  using Shape = std::array<int64_t, Rank>;
  using View = BasicTensorView<const void*, Rank>;
  using MutableView = BasicTensorView<void*, Rank>;

  StridedTensor() = default;
  // Dense row-major (C order), zero-filled.
  StridedTensor(DType dtype, const Shape& shape);
  // Any strides, over a zero-filled storage of exactly the elements they reach.
  StridedTensor(DType dtype, const Shape& shape, const Shape& strides);
  // Any strides, the first element at element `offset` of a zero-filled
  // storage of `storage_elements` elements. Throws std::invalid_argument when
  // the view does not lie inside the storage.
  StridedTensor(DType dtype, const Shape& shape, const Shape& strides, int64_t offset, int64_t storage_elements);
  // Dense row-major over `data`, which must hold exactly the elements of `shape`.
  StridedTensor(DType dtype, const Shape& shape, Bytes data);

  // A dense row-major tensor, zero-filled, or an error naming `name` when its
  // size overflows ("input: shape too large") or memory runs out.
  static Status allocate(std::string_view name, DType dtype, const Shape& shape, StridedTensor* out);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  const Shape& strides() const { return strides_; }
  int64_t offset() const { return offset_; }  // in elements, of the first element in the storage
  int64_t numel() const;

  View view() const;
  MutableView mutable_view();

  // Element access as double, one index per dimension; set rounds once to
  // the dtype.
  template <class... I>
  double get(I... index) const {
    static_assert(sizeof...(I) == Rank, "one index per dimension");
    return load_element(element({static_cast<int64_t>(index)...}), dtype_);
  }
  template <class... I>
  void set(I... index_then_value) {
    static_assert(sizeof...(I) == Rank + 1, "one index per dimension, then the value");
    set_at(std::forward_as_tuple(index_then_value...), std::make_index_sequence<Rank>{});
  }

  // Every element in logical (row-major) order, as double.
  std::vector<double> values() const;
  // Sets the elements in logical order from `v` (as many as both hold).
  void assign(const std::vector<double>& v);
  void fill(double v);
  // Copies the values of `from` (same shape, any dtype and layout), each
  // rounded once to this tensor's dtype.
  void assign_from(const StridedTensor& from);
  // Sets every element slot of the storage, in memory order, to next().
  template <class Next>
  void fill_storage(Next&& next);

  // The whole storage, gaps and all; release() hands it over and leaves the
  // tensor empty.
  const Bytes& storage() const { return storage_; }
  Bytes& storage() { return storage_; }
  Bytes release();

 private:
  template <class Tuple, std::size_t... K>
  void set_at(const Tuple& t, std::index_sequence<K...>) {
    store_element(element({static_cast<int64_t>(std::get<K>(t))...}), dtype_,
                  static_cast<double>(std::get<Rank>(t)));
  }
  std::byte* element(const Shape& index);
  const std::byte* element(const Shape& index) const;
  template <class F>
  void for_each_index(F&& f) const;
  bool dense_row_major() const;

  DType dtype_ = DType::kFloat32;
  Shape shape_{};
  Shape strides_{};
  int64_t offset_ = 0;
  Bytes storage_;
};

extern template class StridedTensor<4>;
extern template class StridedTensor<5>;

// (N, C, H, W) images.
class Tensor : public StridedTensor<4> {
 public:
  using StridedTensor<4>::StridedTensor;
  Tensor() = default;
  Tensor(StridedTensor<4>&& t) : StridedTensor<4>(std::move(t)) {}  // NOLINT(google-explicit-constructor)
};

// (N, C, D, H, W) volumes, and their (N, D, H, W, 3) grids.
class VolumeTensor : public StridedTensor<5> {
 public:
  using StridedTensor<5>::StridedTensor;
  VolumeTensor() = default;
  VolumeTensor(StridedTensor<5>&& t) : StridedTensor<5>(std::move(t)) {}  // NOLINT(google-explicit-constructor)
};

template <std::size_t Rank>
template <class Next>
void StridedTensor<Rank>::fill_storage(Next&& next) {
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
