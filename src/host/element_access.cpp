#include "host/element_access.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>

#include "core/dtype.hpp"

namespace gridsampler::host {

double load_element(const void* p, DType dtype) {
  return visit_dtype(dtype, [p](auto tag) {
    using S = decltype(tag);
    S s;
    std::memcpy(&s, p, sizeof s);
    return static_cast<double>(load(s));
  });
}

void store_element(void* p, DType dtype, double v) {
  visit_dtype(dtype, [p, v](auto tag) {
    using S = decltype(tag);
    const S s = element_from_double<S>(v);
    std::memcpy(p, &s, sizeof s);
  });
}

}  // namespace gridsampler::host
