#include "core/memory.hpp"

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif
#if defined(__unix__)
#include <unistd.h>
#endif
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace gridsampler::detail {

bool beyond_physical_memory(std::size_t bytes) {
  static const std::size_t physical = [] {
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    if (pages > 0 && page > 0 && static_cast<std::size_t>(pages) <= SIZE_MAX / static_cast<std::size_t>(page)) {
      return static_cast<std::size_t>(pages) * static_cast<std::size_t>(page);
    }
#endif
    return SIZE_MAX;  // unknown: no bound
  }();
  return bytes > physical;
}

void* allocate_workspace(std::size_t bytes, bool huge_pages) {
  if (beyond_physical_memory(bytes)) return nullptr;
  constexpr std::size_t kLine = 64;
  constexpr std::size_t kHugePage = std::size_t{2} << 20;
  if (!huge_pages || bytes < kHugePage) return std::aligned_alloc(kLine, (bytes + kLine - 1) / kLine * kLine);
  if (bytes > SIZE_MAX - kHugePage) return nullptr;
  const std::size_t rounded = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* data = std::aligned_alloc(kHugePage, rounded);
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  // Only the huge pages the buffer fills: advising the partial last one too
  // would make a few bytes used there resident as a whole 2 MiB page.
  if (data != nullptr) madvise(data, bytes / kHugePage * kHugePage, MADV_HUGEPAGE);  // advice: failure is harmless
#endif
  return data;
}

namespace {

// One thread's cached buffer. Every field is guarded by the registry's mutex,
// since release_cached_buffers() reaches the slots of other threads.
struct Slot {
  void* data = nullptr;
  std::size_t bytes = 0;
  bool in_use = false;   // a CachedBuffer of the owning thread holds it
  bool release = false;  // freed when that CachedBuffer ends
  void free_buffer() {
    std::free(data);
    data = nullptr;
    bytes = 0;
    release = false;
  }
};

struct Registry {
  std::mutex mutex;
  std::vector<Slot*> slots;
};

// Never destroyed: a thread may exit, and unregister its slot, after static
// destructors have run.
Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

// The calling thread's slot, registered on first use and freed (and
// unregistered) when the thread exits, so no buffer outlives its thread.
struct ThreadSlot {
  Slot slot;
  ThreadSlot() {
    std::lock_guard<std::mutex> lock(registry().mutex);
    registry().slots.push_back(&slot);
  }
  ~ThreadSlot() {
    std::lock_guard<std::mutex> lock(registry().mutex);
    std::vector<Slot*>& slots = registry().slots;
    for (std::size_t i = 0; i < slots.size(); ++i) {
      if (slots[i] == &slot) {
        slots[i] = slots.back();
        slots.pop_back();
        break;
      }
    }
    slot.free_buffer();
  }
  ThreadSlot(const ThreadSlot&) = delete;
  ThreadSlot& operator=(const ThreadSlot&) = delete;
};

std::atomic<std::size_t> limit{kDefaultCachedBytes};

Slot& this_thread_slot() {
  thread_local ThreadSlot t;
  return t.slot;
}

}  // namespace

CachedBuffer::CachedBuffer(std::size_t bytes) {
  if (bytes == 0) return;
  Slot& slot = this_thread_slot();
  std::lock_guard<std::mutex> lock(registry().mutex);
  if (slot.in_use) {  // nested on this thread: a buffer of its own
    data_ = allocate_workspace(bytes);
    return;
  }
  if (slot.bytes < bytes) {
    slot.free_buffer();  // before allocating, so the two never add up
    slot.data = allocate_workspace(bytes);
    if (slot.data == nullptr) return;
    slot.bytes = bytes;
  }
  slot.in_use = true;
  from_cache_ = true;
  data_ = slot.data;
}

CachedBuffer::~CachedBuffer() {
  if (!from_cache_) {
    std::free(data_);
    return;
  }
  Slot& slot = this_thread_slot();
  std::lock_guard<std::mutex> lock(registry().mutex);
  slot.in_use = false;
  if (slot.release || slot.bytes > limit.load(std::memory_order_relaxed)) slot.free_buffer();
}

std::size_t cached_buffer_limit() { return limit.load(std::memory_order_relaxed); }

void set_cached_buffer_limit(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(registry().mutex);
  limit.store(bytes, std::memory_order_relaxed);
  // A buffer in use is checked against the new bound when its call ends.
  for (Slot* slot : registry().slots) {
    if (!slot->in_use && slot->bytes > bytes) slot->free_buffer();
  }
}

void release_cached_buffers() {
  {
    std::lock_guard<std::mutex> lock(registry().mutex);
    for (Slot* slot : registry().slots) {
      if (slot->in_use) {
        slot->release = true;
      } else {
        slot->free_buffer();
      }
    }
  }
#if defined(__GLIBC__)
  // Buffers under glibc's mmap threshold (which grows with the sizes freed)
  // come from the heap, and free() keeps such memory: hand it back.
  malloc_trim(0);
#endif
}

std::size_t cached_buffer_bytes() {
  std::lock_guard<std::mutex> lock(registry().mutex);
  std::size_t total = 0;
  for (const Slot* slot : registry().slots) total += slot->bytes;
  return total;
}

}  // namespace gridsampler::detail
