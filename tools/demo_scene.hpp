// The demo's generated picture as a function of position: a checkerboard
// with smooth colour gradients, a few discs and a letter "F". `gridsampler
// demo` draws it on its pixel lattice; `gridsampler register` also draws it
// at warped positions, so that its built-in example's fixed image is a true
// second view of the scene rather than a resampling of the moving one.
#pragma once

#include <array>
#include <random>
#include <vector>

namespace gridsampler::demo {

class DemoScene {
 public:
  // Draws the random parts (the order of the disc colours, the discs'
  // centres and radii) from `rng`; `variant` 1 permutes the colours of the
  // background gradient.
  DemoScene(int variant, std::mt19937_64& rng);

  // The RGB colour, each channel about in [0, 1], at unit position (u, v):
  // (0, 0) is the picture's top-left corner and (1, 1) its bottom-right one;
  // outside that square the scene goes on (gradients, checkerboard, discs).
  // Edges are smoothed over about 1 / size, one pixel of a size x size image.
  std::array<double, 3> colour(double u, double v, double size) const;

 private:
  struct Disc {
    double cx, cy, r;
    std::array<double, 3> rgb;
  };
  int variant_;
  std::vector<Disc> discs_;
};

}  // namespace gridsampler::demo
