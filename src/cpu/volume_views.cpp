// 5-D views as merged 4-D views, or packed copies (volume_views.hpp).
#include "cpu/volume_views.hpp"

#include <cstring>
#include <new>

#include "core/dtype.hpp"
#include "core/memory.hpp"

namespace gridsampler::cpu {
namespace {

// Calls f(offset a, offset b) in elements for every element of `shape`,
// walking two views of that shape at once.
template <class F>
void for_each_element(const Shape5& shape, const Shape5& sa, const Shape5& sb, F&& f) {
  for (int64_t i0 = 0; i0 < shape[0]; ++i0) {
    for (int64_t i1 = 0; i1 < shape[1]; ++i1) {
      for (int64_t i2 = 0; i2 < shape[2]; ++i2) {
        for (int64_t i3 = 0; i3 < shape[3]; ++i3) {
          const int64_t a = i0 * sa[0] + i1 * sa[1] + i2 * sa[2] + i3 * sa[3];
          const int64_t b = i0 * sb[0] + i1 * sb[1] + i2 * sb[2] + i3 * sb[3];
          for (int64_t i4 = 0; i4 < shape[4]; ++i4) f(a + i4 * sa[4], b + i4 * sb[4]);
        }
      }
    }
  }
}

template <class Ptr>
BasicTensorView<Ptr> merged(Ptr data, DType dtype, const Shape5& shape, const Shape5& strides, int dim) {
  BasicTensorView<Ptr> v;
  v.data = data;
  v.dtype = dtype;
  for (int i = 0, j = 0; i < 5; ++i, ++j) {
    if (i == dim) {
      v.shape[j] = shape[dim] * shape[dim + 1];
      v.strides[j] = shape[dim + 1] == 1 ? strides[dim] : strides[dim + 1];
      ++i;
    } else {
      v.shape[j] = shape[i];
      v.strides[j] = strides[i];
    }
  }
  return v;
}

}  // namespace

Shape4 merged_strides(const Shape5& shape, const Shape5& strides, int dim) {
  const Shape5& s = dims_merge(shape, strides, dim) ? strides : contiguous_strides_5d(shape);
  return merged(static_cast<const void*>(nullptr), DType::kFloat32, shape, s, dim).strides;
}

bool dims_merge(const Shape5& shape, const Shape5& strides, int dim) {
  return shape[dim] == 1 || shape[dim + 1] == 1 || strides[dim] == shape[dim + 1] * strides[dim + 1];
}

namespace {

// Bytes of a dense copy of a view of `shape`; -1 where that overflows 64
// bits or exceeds this machine's memory (then no copy can be made).
int64_t packed_bytes(const Shape5& shape, DType dtype) {
  auto bytes = static_cast<int64_t>(dtype_size(dtype));
  for (int64_t d : shape) {
    if (__builtin_mul_overflow(bytes, d, &bytes)) return -1;
  }
  return detail::beyond_physical_memory(static_cast<std::size_t>(bytes)) ? -1 : bytes;
}

}  // namespace

bool mergeable_or_packable(const Shape5& shape, const Shape5& strides, DType dtype, int dim) {
  return dims_merge(shape, strides, dim) || packed_bytes(shape, dtype) >= 0;
}

void* VolumeViews::pack(const VolumeView& v, bool copy_in, const MutableVolumeView* target) {
  // A valid view may reach few elements through zero strides and still
  // have more than fit in memory, or in 64 bits: then no copy.
  const auto elem = static_cast<int64_t>(dtype_size(v.dtype));
  const int64_t bytes = packed_bytes(v.shape, v.dtype);
  if (bytes < 0) return nullptr;
  Packed p;
  p.data.reset(new (std::nothrow) unsigned char[static_cast<std::size_t>(bytes)]);
  if (p.data == nullptr) return nullptr;
  if (copy_in) {
    const auto* from = static_cast<const unsigned char*>(v.data);
    unsigned char* to = p.data.get();
    for_each_element(v.shape, v.strides, contiguous_strides_5d(v.shape), [&](int64_t a, int64_t b) {
      std::memcpy(to + b * elem, from + a * elem, static_cast<std::size_t>(elem));
    });
  }
  if (target != nullptr) {
    p.target = *target;
    p.is_output = true;
  }
  void* data = p.data.get();
  packed_.push_back(std::move(p));
  return data;
}

bool VolumeViews::input(const VolumeView& v, int dim, TensorView* out) {
  if (dims_merge(v.shape, v.strides, dim)) {
    *out = merged(v.data, v.dtype, v.shape, v.strides, dim);
    return true;
  }
  const void* data = pack(v, true, nullptr);
  if (data == nullptr) return false;
  *out = merged(data, v.dtype, v.shape, contiguous_strides_5d(v.shape), dim);
  return true;
}

bool VolumeViews::output(const MutableVolumeView& v, int dim, MutableTensorView* out) {
  if (dims_merge(v.shape, v.strides, dim)) {
    *out = merged(v.data, v.dtype, v.shape, v.strides, dim);
    return true;
  }
  void* data = pack(v, false, &v);
  if (data == nullptr) return false;
  *out = merged(data, v.dtype, v.shape, contiguous_strides_5d(v.shape), dim);
  return true;
}

void VolumeViews::finish() {
  for (const Packed& p : packed_) {
    if (!p.is_output) continue;
    const auto elem = static_cast<int64_t>(dtype_size(p.target.dtype));
    auto* to = static_cast<unsigned char*>(p.target.data);
    const unsigned char* from = p.data.get();
    for_each_element(p.target.shape, p.target.strides, contiguous_strides_5d(p.target.shape),
                     [&](int64_t a, int64_t b) {
                       std::memcpy(to + a * elem, from + b * elem, static_cast<std::size_t>(elem));
                     });
  }
}

}  // namespace gridsampler::cpu
