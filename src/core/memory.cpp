#include "core/memory.hpp"

#include <cstdint>
#include <cstdlib>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace gridsampler::detail {

void* allocate_workspace(std::size_t bytes, bool huge_pages) {
  constexpr std::size_t kLine = 64;
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  if (!huge_pages || bytes < kHugePage) return std::aligned_alloc(kLine, (bytes + kLine - 1) / kLine * kLine);
  if (bytes > SIZE_MAX - kHugePage) return nullptr;
  const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* data = std::aligned_alloc(kHugePage, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (data != nullptr) madvise(data, rounded, MADV_HUGEPAGE);  // advice: failure is harmless
#endif
  return data;
}

void* cached_buffer(std::size_t bytes) {
  struct Buffer {
    void* data = nullptr;
    std::size_t bytes = 0;
    ~Buffer() { std::free(data); }
  };
  thread_local Buffer buffer;
  if (buffer.bytes < bytes) {
    std::free(buffer.data);
    buffer.bytes = 0;
    buffer.data = allocate_workspace(bytes);
    if (buffer.data == nullptr) return nullptr;
    buffer.bytes = bytes;
  }
  return buffer.data;
}

}  // namespace gridsampler::detail
