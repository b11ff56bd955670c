#include "register/lbfgs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <deque>

namespace gridsampler::registration {
namespace {

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

struct Pair {
  std::vector<double> s, y;
  double rho;  // 1 / (y . s)
};

// -H g by the two-loop recursion, H0 = gamma D^-1 (gamma from the newest
// pair, so that the preconditioner's overall scale does not matter).
std::vector<double> direction(const std::deque<Pair>& pairs, const std::vector<double>& g,
                              const std::vector<double>& diagonal) {
  std::vector<double> q = g;
  std::vector<double> alpha(pairs.size());
  for (std::size_t k = pairs.size(); k-- > 0;) {
    alpha[k] = pairs[k].rho * dot(pairs[k].s, q);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] -= alpha[k] * pairs[k].y[i];
  }
  double gamma = 1;
  if (!pairs.empty()) {
    const Pair& p = pairs.back();
    double y_dinv_y = 0;
    for (std::size_t i = 0; i < q.size(); ++i) y_dinv_y += p.y[i] * p.y[i] / diagonal[i];
    gamma = (1 / p.rho) / y_dinv_y;
  }
  for (std::size_t i = 0; i < q.size(); ++i) q[i] *= gamma / diagonal[i];
  for (std::size_t k = 0; k < pairs.size(); ++k) {
    const double beta = pairs[k].rho * dot(pairs[k].y, q);
    for (std::size_t i = 0; i < q.size(); ++i) q[i] += pairs[k].s[i] * (alpha[k] - beta);
  }
  for (double& v : q) v = -v;
  return q;
}

}  // namespace

LbfgsResult minimise(const LbfgsProblem& problem, std::vector<double> x, const LbfgsOptions& options) {
  LbfgsResult result;
  const std::size_t n = x.size();
  double f = problem.value(x);
  result.losses.push_back(f);
  if (!std::isfinite(f)) {
    result.x = std::move(x);
    result.stop = "loss not finite";
    return result;
  }
  std::vector<double> g(n), g_new(n), trial(n);
  problem.gradient(&g);
  std::deque<Pair> pairs;
  int small_decreases = 0;
  result.stop = "iteration limit";
  for (int it = 1; it <= options.max_iterations; ++it) {
    std::vector<double> p = direction(pairs, g, problem.diagonal);
    double slope = dot(g, p);
    if (!(slope < 0)) {  // not a descent direction: forget the curvature
      pairs.clear();
      p = direction(pairs, g, problem.diagonal);
      slope = dot(g, p);
    }
    const double length = problem.step_length(p);
    if (!(slope < 0) || !(length > 0)) {
      result.stop = "gradient vanished";
      break;
    }
    double a = pairs.empty() ? options.first_step / length : 1.0;
    a = std::min(a, options.max_step / length);
    bool accepted = false;
    double f_trial = f;
    for (int tries = 0; tries < 30 && !accepted; ++tries) {
      for (std::size_t i = 0; i < n; ++i) trial[i] = x[i] + a * p[i];
      f_trial = problem.value(trial);
      if (std::isfinite(f_trial) && f_trial <= f + options.armijo * a * slope) {
        accepted = true;
        break;
      }
      // The minimum of the parabola through f, the slope and f_trial, kept
      // within [a / 10, a / 2].
      double next = a / 2;
      if (std::isfinite(f_trial)) {
        const double curvature = f_trial - f - a * slope;
        if (curvature > 0) next = -slope * a * a / (2 * curvature);
      }
      a = std::clamp(next, a / 10, a / 2);
    }
    if (!accepted) {
      if (!pairs.empty()) {  // retry along the preconditioned gradient
        pairs.clear();
        --it;
        continue;
      }
      result.stop = "no lower loss along the gradient";
      break;
    }
    problem.gradient(&g_new);
    Pair pair{std::vector<double>(n), std::vector<double>(n), 0};
    for (std::size_t i = 0; i < n; ++i) {
      pair.s[i] = a * p[i];
      pair.y[i] = g_new[i] - g[i];
    }
    const double sy = dot(pair.s, pair.y);
    const double step = a * length;
    x = trial;
    g.swap(g_new);
    // Curvature only where it is positive (an Armijo search does not
    // guarantee it), so that H stays positive definite.
    if (sy > 1e-12 * std::sqrt(dot(pair.s, pair.s) * dot(pair.y, pair.y))) {
      pair.rho = 1 / sy;
      pairs.push_back(std::move(pair));
      if (static_cast<int>(pairs.size()) > options.memory) pairs.pop_front();
    }
    const double decrease = f - f_trial;
    f = f_trial;
    result.losses.push_back(f);
    if (problem.on_iteration) problem.on_iteration(it, f);
    if (step < options.min_step) {
      char why[64];
      std::snprintf(why, sizeof why, "step below %g px", options.min_step);
      result.stop = why;
      break;
    }
    small_decreases = decrease < options.min_decrease * std::fabs(f) ? small_decreases + 1 : 0;
    if (small_decreases >= 3) {
      result.stop = "loss settled";
      break;
    }
  }
  result.x = std::move(x);
  return result;
}

}  // namespace gridsampler::registration
