// Host allocations for workspaces: 64-byte aligned, and for sizes of a huge
// page or more, placed on 2 MiB boundaries and offered to the kernel as
// transparent huge pages (Linux; the whole 2 MiB pages the size fills). The backward reads and writes its
// accumulators at the grid's random taps; with 4 KiB pages nearly every such
// access beyond the TLB's reach costs a page walk. Free with std::free.
#pragma once

#include <cstddef>

namespace gridsampler::detail {

void* allocate_workspace(std::size_t bytes, bool huge_pages = true);

// Whether `bytes` exceed this machine's physical memory. Such a buffer could
// never be backed: the library's allocations (workspaces, packed copies of
// volume views) fail up front, as out of memory, instead of leaving it to
// the allocator, which may hand out the address space and have the process
// killed when the copy touches it (and under AddressSanitizer aborts).
bool beyond_physical_memory(std::size_t bytes);

// What a calling thread keeps between calls: at most cached_buffer_limit()
// bytes, kDefaultCachedBytes unless set_cached_buffer_limit() chose another
// bound. A call that needs a larger buffer gets one, and frees it when it
// returns. Reusing the buffer saves a call the page faults and kernel zeroing
// of fresh memory: a few percent of a mid-sized backward on a quiet machine,
// but up to 4x the call's time where fresh huge pages must first be
// compacted (docs/performance.md, "Memory kept between calls, measured"). The
// default covers the two threads' scratch of a 16-channel 64^3 volume.
constexpr std::size_t kDefaultCachedBytes = std::size_t{128} << 20;
std::size_t cached_buffer_limit();
// A new bound for every thread; idle buffers above it are freed now, one in
// use when its call ends. 0: nothing is kept.
void set_cached_buffer_limit(std::size_t bytes);

// A buffer of at least `bytes` for the duration of one call, taken from the
// calling thread's cache (grown on demand with allocate_workspace). At the
// end of its scope the buffer goes back to the cache, or is freed if it is
// larger than cached_buffer_limit() or if release_cached_buffers() asked for it
// meanwhile. data() is null for 0 bytes or when the memory cannot be had. A
// second CachedBuffer alive on the same thread gets a buffer of its own (not
// cached), so nesting is safe.
class CachedBuffer {
 public:
  explicit CachedBuffer(std::size_t bytes);
  ~CachedBuffer();
  CachedBuffer(const CachedBuffer&) = delete;
  CachedBuffer& operator=(const CachedBuffer&) = delete;
  void* data() const { return data_; }

 private:
  void* data_ = nullptr;
  bool from_cache_ = false;
};

// Frees every thread's cached buffer that no call is using; a buffer in use
// is freed when its call ends. Safe to call from any thread at any time.
void release_cached_buffers();
// Bytes held by all threads' caches (in use or idle).
std::size_t cached_buffer_bytes();

}  // namespace gridsampler::detail
