// The warp a registration looks for, as parameters: an affine map and a
// coarse control grid of displacements, in the library's normalised
// coordinates (align_corners = false: -1 and 1 are the outer edges of the
// image, so that one set of parameters means the same warp at every level of
// the image pyramid). A fixed-image position p goes to the moving-image
// position
//
//   g(p) = A p + b + d(p),
//
// where d interpolates the control grid's displacements bicubically. The
// control points lie on a regular rows x cols lattice whose corners are the
// image's corners (the sampler's align_corners = true over the grid), so the
// library's own bicubic grid_sample upsamples them (warp_grid.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "gridsampler/gridsampler.hpp"

namespace gridsampler::registration {

enum class TransformKind { kAffine, kElastic, kAffineElastic };

std::optional<TransformKind> parse_transform(std::string_view name);  // "affine", "elastic", "affine+elastic"
std::string_view to_string(TransformKind kind);
inline bool has_affine(TransformKind k) { return k != TransformKind::kElastic; }
inline bool has_elastic(TransformKind k) { return k != TransformKind::kAffine; }

struct Transform {
  // A (row-major: a00, a01, a10, a11), then b; the identity to start with.
  std::array<double, 6> affine = {1, 0, 0, 1, 0, 0};
  // Control points; 0 x 0 when there is no elastic part.
  int64_t rows = 0, cols = 0;
  // (2, rows, cols): the x displacements, then the y ones.
  std::vector<double> control;

  bool elastic() const { return rows > 0 && cols > 0; }
};

// The control grid's cells along an axis of `full` pixels at a pyramid level
// where that axis has `level` pixels: one cell per kControlSpacing pixels at
// full resolution, fewer where the level is too coarse for a cell to span
// kMinCellPixels of its pixels; at least one.
inline constexpr int64_t kControlSpacing = 16;
inline constexpr int64_t kMinCellPixels = 4;
int64_t control_cells(int64_t full, int64_t level);

// `t` with its control grid resampled onto rows x cols points (the field it
// interpolates, sampled at the new points); a grid of zeros if `t` has none.
Status refine_control(const Transform& t, int64_t rows, int64_t cols, Transform* out);

// The smoothness penalty of the control grid: the mean over the image of
// d_xx^2 + 2 d_xy^2 + d_yy^2 (the thin-plate bending energy, which leaves
// translations and other affine parts of d free), by finite differences
// on the control lattice in normalised units. Adds its gradient to
// `grad_control` ((2, rows, cols), may be null).
double bending_energy(const Transform& t, std::vector<double>* grad_control);

// The optimiser's view of a transform: the parameters `kind` lets it change,
// as one vector (the affine part, as A - I and b, then the control grid).
std::vector<double> pack(TransformKind kind, const Transform& t);
void unpack(TransformKind kind, const std::vector<double>& x, Transform* t);

// The affine part in pixel coordinates of the full-resolution images
// (the centre of the top-left pixel at (0, 0)): moving = M fixed + c.
struct PixelAffine {
  std::array<double, 4> matrix;
  std::array<double, 2> offset;
};
PixelAffine affine_in_pixels(const Transform& t, int64_t height, int64_t width);

}  // namespace gridsampler::registration
