// Strict reader and writer for NumPy .npy files (versions 1.0, 2.0, 3.0):
// little-endian float16/float32/float64, C order only. Used by the command-line
// tool and the tests; not part of the installed library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gridsampler/gridsampler.hpp"
#include "host/aligned_bytes.hpp"

namespace gridsampler::npy {

struct Array {
  DType dtype = DType::kFloat32;  // kFloat16, kFloat32 or kFloat64 (never bfloat16)
  std::vector<int64_t> shape;
  host::Bytes data;  // numel * dtype_size bytes, C order, little-endian

  int64_t numel() const;
};

// Reads `path`. On failure returns a status whose message starts with the
// path and says what is wrong ("x.npy: not a .npy file (bad magic)").
Status read(const std::string& path, Array* out);

// Writes `array` to `path`: the data go to a temporary file in the same
// folder that is renamed over `path` only once complete.
Status write(const std::string& path, const Array& array);

}  // namespace gridsampler::npy
