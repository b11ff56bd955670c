// One element of any dtype, read and written as double: the only place the
// host side converts between storage types and double.
#pragma once

#include "gridsampler/gridsampler.hpp"

namespace gridsampler::host {

// The element at `p`, widened exactly to double.
double load_element(const void* p, DType dtype);

// Rounds `v` once to `dtype` (to nearest even) and stores it at `p`. Values
// beyond a type's range become its largest finite value or infinity, as the
// rounding dictates; NaN stays NaN.
void store_element(void* p, DType dtype, double v);

}  // namespace gridsampler::host
