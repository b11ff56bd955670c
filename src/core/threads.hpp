// How many threads a call may use: the one home of the bound (max_threads(),
// public in gridsampler.hpp) and of the count a call asks OpenMP for.
#pragma once

namespace gridsampler::detail {

// Threads a call may use per hardware thread, and the bound's floor: enough
// to oversubscribe a small machine (a script written for a larger one still
// runs), few enough that OpenMP never builds a team of more than a small
// multiple of the machine. A libgomp team of 10^5 threads dies inside
// GOMP_parallel, and per-thread workspaces grow with the team.
constexpr int kThreadsPerProcessor = 4;
constexpr int kMinThreadBound = 64;

// The threads a call asks for before its plan caps them at its task count:
// Options::num_threads when positive (validation has refused one above
// max_threads()), otherwise OpenMP's default for the next parallel region
// (OMP_NUM_THREADS, omp_set_num_threads) capped at max_threads() without
// complaint, since results are the same bits for any count.
int call_threads(int num_threads);

}  // namespace gridsampler::detail
