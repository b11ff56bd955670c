// The registration's pictures: absolute differences between two images, and
// a displacement field as colours (direction as hue, length as saturation).
#pragma once

#include "host/tensor.hpp"
#include "png_io.hpp"

namespace gridsampler::registration {

// The mean over channels of |a - b| ((1, C, H, W) each, any dtype) at every
// pixel, as sqrt(value / scale) in the inferno map (the square root keeps
// small residuals visible next to large ones). Pictures drawn with one
// `scale` compare directly.
png::RgbImage difference_picture(const host::Tensor& a, const host::Tensor& b, double scale);
// The largest mean |a - b| over channels at any pixel (a difference_picture scale).
double largest_difference(const host::Tensor& a, const host::Tensor& b);

// The displacement of every fixed pixel to its source in the moving image,
// in pixels: grid (float64 (1, H, W, 2), normalised) minus the pixel's own
// position, as the optical-flow colour wheel of the Middlebury benchmark:
// the hue gives the direction (right red, down yellow, down-left green,
// left sky blue, up violet) and the saturation the length, white for none,
// full colour at `scale` pixels (longer ones darkened).
png::RgbImage flow_picture(const host::Tensor& grid, double scale);
// The longest displacement of the field, in pixels (a flow_picture scale).
double longest_displacement(const host::Tensor& grid);

}  // namespace gridsampler::registration
