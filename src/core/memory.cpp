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

}  // namespace gridsampler::detail
