#include "core/threads.hpp"

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "gridsampler/gridsampler.hpp"

namespace gridsampler {

int max_threads() {
  // Fixed at the first call, so that a call's validation and its plan (and
  // the aclnn interface's two phases) see one bound.
  static const int bound = [] {
    const int64_t procs = std::max(omp_get_num_procs(), 1);
    const int64_t scaled = std::max<int64_t>(detail::kMinThreadBound, procs * detail::kThreadsPerProcessor);
    return static_cast<int>(std::min<int64_t>(scaled, std::max(omp_get_thread_limit(), 1)));
  }();
  return bound;
}

namespace detail {

int call_threads(int num_threads) {
  const int bound = max_threads();
  if (num_threads > 0) return std::min(num_threads, bound);
  return std::clamp(omp_get_max_threads(), 1, bound);
}

}  // namespace detail
}  // namespace gridsampler
