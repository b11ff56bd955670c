// Helpers of the kernels' building-block tests: a deterministic generator,
// bit-exact comparison, and buffers surrounded by NaN guards.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace gstest {

// SplitMix64: the same numbers on every platform and standard library.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform(double lo, double hi) { return lo + (hi - lo) * static_cast<double>(next() >> 11) * 0x1.0p-53; }
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }

 private:
  uint64_t s_;
};

// Equal bits (so NaN == NaN of the same payload and +0 != -0).
template <class T>
bool same_bits(const T& a, const T& b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

// A buffer of n elements with kGuard NaN-patterned bytes before and after,
// so that a write outside [0, n) is caught by guards_intact().
template <class T>
class Guarded {
 public:
  static constexpr std::size_t kGuard = 64;
  explicit Guarded(std::size_t n) : bytes_(n * sizeof(T) + 2 * kGuard, 0xff), n_(n) {}
  T* data() { return reinterpret_cast<T*>(bytes_.data() + kGuard); }
  T& operator[](std::size_t i) { return data()[i]; }
  std::size_t size() const { return n_; }
  bool guards_intact() const {
    for (std::size_t i = 0; i < kGuard; ++i) {
      if (bytes_[i] != 0xff || bytes_[bytes_.size() - 1 - i] != 0xff) return false;
    }
    return true;
  }

 private:
  std::vector<unsigned char> bytes_;
  std::size_t n_;
};

// "name=value name=value ..." for failure messages.
class Params {
 public:
  template <class V>
  Params& operator()(const char* name, const V& v) {
    out_ << name << '=' << v << ' ';
    return *this;
  }
  std::string str() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

}  // namespace gstest
