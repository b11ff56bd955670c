// The registration's optimiser: L-BFGS with a diagonal preconditioner and a
// backtracking (Armijo) line search.
//
// Why this one: the parameters differ in kind (a matrix, a shift, hundreds
// of local displacements) and in how strongly the loss responds to each;
// L-BFGS learns that curvature from its last few steps instead of needing a
// learning rate per parameter, and needs tens of iterations per level. The line search accepts only steps that lower the
// loss, so within a level the loss of the accepted iterates never rises and
// the last iterate is the best one. Gauss-Newton would need the Jacobian of
// every residual; the library's backward gives J^T r, which is exactly what
// a gradient method needs.
//
// Each accepted step costs one loss evaluation (a forward) and one gradient
// (a backward); a rejected trial step costs a forward only.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace gridsampler::registration {

struct LbfgsProblem {
  // The loss at x; NaN stops the search (an error the caller reports).
  std::function<double(const std::vector<double>& x)> value;
  // Its gradient at the x of the latest value() call.
  std::function<void(std::vector<double>* grad)> gradient;
  // How far a step moves the image, in pixels of the level (homogeneous:
  // step_length(a * s) = |a| step_length(s)).
  std::function<double(const std::vector<double>& step)> step_length;
  // A guess at the diagonal of the Hessian, > 0 (the preconditioner).
  std::vector<double> diagonal;
  // Called after each accepted step (iteration 1, 2, ...) with its loss.
  std::function<void(int iteration, double loss)> on_iteration;
};

struct LbfgsOptions {
  int max_iterations = 100;
  int memory = 8;             // step pairs kept
  double first_step = 0.5;    // step_length of the first trial step
  double max_step = 4;        // no step moves the image further
  double min_step = 1e-3;     // converged once an accepted step is shorter
  double min_decrease = 1e-7; // ... or 3 steps in a row lower the loss by less than this fraction
  double armijo = 1e-4;       // sufficient decrease: f(x + a p) <= f(x) + armijo a g.p
};

struct LbfgsResult {
  std::vector<double> x;
  std::vector<double> losses;  // at the start, then after each accepted step
  std::string stop;            // why it stopped
};

LbfgsResult minimise(const LbfgsProblem& problem, std::vector<double> x, const LbfgsOptions& options);

}  // namespace gridsampler::registration
