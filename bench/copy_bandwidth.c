// memcpy bandwidth, the yardstick for gridsampler's GB/s figures; compiled
// and run by bench/copy_bandwidth.py (which see), not by hand.
//
//   copy_bandwidth THREADS BYTES...
//
// For each BYTES: a source and a destination buffer of BYTES each, split into
// THREADS slices that the threads copy at once. Prints "BYTES GB/s" per size,
// GB/s = bytes read plus bytes written (2 x BYTES) over the best of 20 timed
// repetitions. A repetition copies the buffer `inner` times, enough to move
// at least 16 MiB, so that small (cache-resident) sizes are not timed at the
// clock's and the thread team's granularity.
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: %s THREADS BYTES...\n", argv[0]);
    return 2;
  }
  const int threads = atoi(argv[1]);
  for (int arg = 2; arg < argc; ++arg) {
    const size_t n = strtoull(argv[arg], NULL, 10);
    char* a = malloc(n);
    char* b = malloc(n);
    if (!a || !b || threads < 1) return 2;
    memset(a, 1, n);  // touch every page before timing
    memset(b, 2, n);
    const size_t inner = n >= (16u << 20) ? 1 : (16u << 20) / n;
    double best = 1e30;
    for (int r = 0; r < 20; ++r) {
      double t0 = 0, t1 = 0;
#pragma omp parallel num_threads(threads)
      {
        const int t = omp_get_thread_num(), nt = omp_get_num_threads();
        const size_t lo = n * t / nt, hi = n * (t + 1) / nt;
#pragma omp barrier
#pragma omp master
        t0 = omp_get_wtime();
        for (size_t i = 0; i < inner; ++i) {
          memcpy(b + lo, a + lo, hi - lo);
          __asm__ volatile("" ::: "memory");  // each copy happens: no merging of repeated copies
        }
#pragma omp barrier
#pragma omp master
        t1 = omp_get_wtime();
      }
      if ((t1 - t0) / inner < best) best = (t1 - t0) / inner;
    }
    printf("%zu %.2f\n", n, 2.0 * n / best / 1e9);
    free(a);
    free(b);
  }
  return 0;
}
