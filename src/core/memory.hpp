// Host allocations for workspaces: 64-byte aligned, and for sizes of a huge
// page or more, placed on 2 MiB boundaries and offered to the kernel as
// transparent huge pages (Linux). The backward reads and writes its
// accumulators at the grid's random taps; with 4 KiB pages nearly every such
// access beyond the TLB's reach costs a page walk. Free with std::free.
#pragma once

#include <cstddef>

namespace gridsampler::detail {

void* allocate_workspace(std::size_t bytes, bool huge_pages = true);

// A buffer of at least `bytes` kept by the calling thread between calls and
// grown on demand (allocate_workspace), so that a call does not page-fault its
// way through fresh memory (docs/performance.md). Null when it cannot be had. The same buffer serves every caller
// on the thread: use it for one call's duration only.
void* cached_buffer(std::size_t bytes);

}  // namespace gridsampler::detail
