// The registration's built-in example, for which the answer is known: the
// demo's generated scene as the moving image, and as the fixed image the
// same scene seen through a known affine-plus-elastic warp (drawn afresh
// at the warped positions, not resampled from the moving image, so that
// the registration cannot win by undoing its own interpolation). And the
// yardstick: how far a recovered warp is from the true one.
#pragma once

#include <cstdint>

#include "gridsampler/gridsampler.hpp"
#include "host/tensor.hpp"

namespace gridsampler::registration {

// The true warp, fixed-image position -> moving-image position: a rotation
// and scale about the image centre, a shift, and a smooth elastic
// displacement (a sum of 3 sinusoids per axis of random direction and
// phase, wavelengths 2/3 to 2 image widths, each component at most
// `elastic` pixels).
struct KnownWarp {
  double angle_deg = 0;
  double scale = 1;
  double shift_x = 0, shift_y = 0;  // pixels
  double elastic = 0;               // pixels
  uint64_t seed = 1;                // of the elastic field (the scene's is 1, the demo's)
};

// The default example's warp at `size` x `size`: rotate 6 degrees, zoom in
// by 5 %, shift by (-7.5 %, +4.7 %) of the size (-19, +12 pixels at 256) and
// bend by up to 1.2 % (3 pixels at 256).
KnownWarp default_warp(int64_t size);

struct Example {
  host::Tensor fixed, moving;  // float32 (1, 3, size, size), values in [0, 1]
  host::Tensor true_grid;      // float64 (1, size, size, 2): the true warp of every fixed pixel, normalised
};

Example make_example(int64_t size, const KnownWarp& warp);

struct DisplacementError {
  double mean_px = 0, max_px = 0;
  int64_t pixels = 0;  // fixed pixels counted
};

// |recovered - true| source position in moving-image pixels, over the
// fixed pixels whose true source lies inside the moving image (both grids
// float64 (1, H, W, 2), normalised).
DisplacementError displacement_error(const host::Tensor& true_grid, const host::Tensor& grid);

}  // namespace gridsampler::registration
