// Host allocations for workspaces: 64-byte aligned, and for sizes of a huge
// page or more, placed on 2 MiB boundaries and offered to the kernel as
// transparent huge pages (Linux). The backward reads and writes its
// accumulators at the grid's random taps; with 4 KiB pages nearly every such
// access beyond the TLB's reach costs a page walk. Free with std::free.
#pragma once

#include <cstddef>

namespace gridsampler::detail {

void* allocate_workspace(std::size_t bytes, bool huge_pages = true);

}  // namespace gridsampler::detail
