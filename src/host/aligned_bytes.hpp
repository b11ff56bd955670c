// Byte storage on 64-byte (cache-line) boundaries, so that every SIMD load of
// a row starts where a dense tensor's row does and benchmarks do not depend on
// where malloc happened to put a buffer. Shared by host tensors and the .npy
// arrays they are read from and written to, so that buffers move between the
// two without a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace gridsampler::host {

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::size_t kAlignment = 64;

  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT(google-explicit-constructor)

  // Through the global operator new, so that programs which replace it (the
  // tests that track allocations) see these too.
  T* allocate(std::size_t n) {
    if (n > SIZE_MAX / sizeof(T)) throw std::bad_array_new_length();
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t{kAlignment}));
  }
  void deallocate(T* p, std::size_t) { ::operator delete(p, std::align_val_t{kAlignment}); }

  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
};

using Bytes = std::vector<std::byte, CacheLineAllocator<std::byte>>;

}  // namespace gridsampler::host
