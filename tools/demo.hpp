// `gridsampler demo`: the library on a realistic built-in example, checked
// against the float64 reference and timed.
//
// The example: N = 2 generated RGB images of size x size pixels (a
// checkerboard with smooth colour gradients, a few discs and a letter "F"),
// each warped as a spatial transformer or a registration step would: an
// affine map (rotation, scale, shift) plus a smooth elastic displacement (a
// sum of a few sinusoids), sampled on a size x size output grid whose corners
// reach outside [-1, 1], so the padding modes matter. The gradient fed to the
// backward pass is output - input, the gradient of 1/2 ||warp(x) - x||^2.
//
// For every interpolation x padding (align_corners = false), plus
// bilinear / reflection with align_corners = true, forward and backward run
// through the library (gridsampler::grid_sampler_2d[_backward]) and through
// gridsampler::reference, and a table shows, per combination, the largest
// |library - reference| of out, dx and dgrid relative to the largest
// |reference| of that output, the library's median times, its speed-up over
// the reference, and pass/fail against the dtype's bound:
//   float64 1e-10, float32 1e-4, float16 4 * 2^-10, bfloat16 4 * 2^-7.
//
// With png_dir set (created if missing) it writes, each image holding the N
// batch items side by side with a 4-pixel grey gap (width N*size + 4*(N-1),
// height size):
//   input.png                        the generated images
//   <mode>_<padding>[_ac]_out.png    the library's warped output
//   <mode>_<padding>[_ac]_dx.png     sum over channels of |dx|, inferno map
//   <mode>_<padding>[_ac]_dgrid.png  |dgrid| (length of the 2-vector), inferno
// for all 10 combinations ("_ac" marks align_corners = true), each map
// showing sqrt(value / largest value of its batch item), and
//   outputs.png                      batch item 0's output for the 3 x 3
//                                    combinations (rows bilinear, nearest,
//                                    bicubic; columns zeros, border,
//                                    reflection), 3*size + 8 square.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "gridsampler/gridsampler.hpp"

namespace gridsampler::demo {

// Below 8 pixels the example degenerates (with 1 pixel, bicubic border and
// reflection dgrid are pure rounding noise around 0, which no relative bound
// can judge). At 2048 it holds about 3 GB (float64) and runs for minutes.
inline constexpr int64_t kMinDemoSize = 8;
inline constexpr int64_t kMaxDemoSize = 2048;

struct DemoOptions {
  int64_t size = 256;             // input and output are size x size, kMinDemoSize..kMaxDemoSize
  DType dtype = DType::kFloat32;  // of every tensor
  std::string png_dir;            // empty: write no PNGs
  uint64_t seed = 1;              // discs, colours and elastic field
};

// Exit statuses of run_demo.
inline constexpr int kDemoPassed = 0;      // every check within its bound
inline constexpr int kDemoFailed = 1;      // a bound exceeded, or a call returned an error
inline constexpr int kDemoBadOptions = 2;  // bad options, or the PNG directory/files failed

// Runs the demo: the description and table go to `out`, problems to `err`
// (one line each, "gridsampler: error: ..." for status 2).
int run_demo(const DemoOptions& options, std::ostream& out, std::ostream& err);

}  // namespace gridsampler::demo
