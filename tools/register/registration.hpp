// Coarse-to-fine image registration by gradient descent through the
// library's grid_sample and GridSampler2DGrad.
//
// The loss at a pyramid level is the mean over the overlap of the images
// and over channels of (moving(g(p)) - fixed(p))^2, moving sampled
// bicubically with border padding, each fixed pixel weighted by how far
// inside the moving image its source lies (1 from 2 pixels inside the edge
// on, 0 outside: the parts of the fixed image that the moving one lacks
// pull on nothing), plus `smoothness` times the control grid's bending
// energy. Every evaluation is one forward of the
// moving image (and one of the control grid); every gradient one backward
// of the moving image for dgrid (dx is not asked for) and one of the
// control grid for its dx, which is the chain rule through the upsampling.
//
// Schedule: the identity to start with; at each level, coarsest first, the
// transform of the level below (a control grid refined onto the level's
// lattice) is the starting point of up to max_iterations L-BFGS steps.
// affine+elastic makes two passes over the pyramid: the affine part, then
// the elastic part with the affine part held.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gridsampler/gridsampler.hpp"
#include "host/tensor.hpp"
#include "register/transform.hpp"

namespace gridsampler::registration {

struct RegisterOptions {
  TransformKind kind = TransformKind::kAffineElastic;
  int max_iterations = 100;        // per pyramid level
  int num_threads = 0;             // the library's; 0: all
  DType dtype = DType::kFloat32;   // of every tensor the library sees: float32 or float64
  double smoothness = 2e-4;        // weight of the bending energy
};

struct LevelReport {
  TransformKind stage = TransformKind::kAffine;  // what this pass fits: affine, or elastic (affine held)
  int64_t height = 0, width = 0;
  int64_t control_rows = 0, control_cols = 0;  // 0 without an elastic part
  std::vector<double> losses;                  // at the start, then after each accepted step
  int iterations = 0;
  std::string stop;
  double seconds = 0;
};

struct RegisterResult {
  Transform transform;
  std::vector<LevelReport> levels;  // per pass over the pyramid, coarsest level first
  int passes = 0, pyramid_levels = 0;
  int iterations = 0;
  double seconds = 0;
};

struct Progress {
  int stage = 0, stages = 0;  // pass over the pyramid, from 1
  TransformKind kind = TransformKind::kAffine;
  int level = 0, levels = 0;  // level 1 is the coarsest
  int64_t height = 0, width = 0;
  int iteration = 0;
  double loss = 0;
};

// Registers `moving` onto `fixed`: both (1, C, H, W) of one size, any dtype
// (converted to options.dtype). `progress` (may be empty) is called after
// every accepted step.
Status register_images(const host::Tensor& fixed, const host::Tensor& moving, const RegisterOptions& options,
                       const std::function<void(const Progress&)>& progress, RegisterResult* result);

// The loss (the mean squared difference plus smoothness times the bending
// energy) and its gradient with respect to the packed parameters
// (pack(kind, t)) at one resolution: what an L-BFGS step sees, for the
// tests of the chain rule. `gradient` may be null. fixed and moving are
// (1, C, H, W), both float32 or both float64, the dtype computed in.
Status loss_and_gradient(const host::Tensor& fixed, const host::Tensor& moving, TransformKind kind,
                         const Transform& t, double smoothness, int num_threads, double* loss,
                         std::vector<double>* gradient);

// The sampling grid of `t` over an H x W fixed image: float64 (1, H, W, 2).
Status sampling_grid(const Transform& t, int64_t height, int64_t width, host::Tensor* grid);

// `moving` (1, C, H, W) warped by `t` as the registration sees it
// (bicubic, border): float32, the fixed image's size.
Status warp_image(const host::Tensor& moving, const Transform& t, int num_threads, host::Tensor* out);

}  // namespace gridsampler::registration
