// Helpers shared by the fuzz targets: a byte reader whose format a seed
// generator (fuzz/make_corpus.py) can write, and failure reporting.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace gsfuzz {

// Reads the fuzz input front to back; past the end every read returns 0, so
// any byte string decodes to something.
class Bytes {
 public:
  Bytes(const uint8_t* data, std::size_t size) : data_(data), size_(size) {}
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  int8_t i8() { return static_cast<int8_t>(u8()); }
  uint16_t u16() {
    const uint16_t lo = u8();
    return static_cast<uint16_t>(lo | (u8() << 8));
  }
  uint32_t u32() {
    const uint32_t lo = u16();
    return lo | (static_cast<uint32_t>(u16()) << 16);
  }
  uint64_t u64() {
    const uint64_t lo = u32();
    return lo | (static_cast<uint64_t>(u32()) << 32);
  }
  std::size_t remaining() const { return pos_ < size_ ? size_ - pos_ : 0; }
  const uint8_t* rest() const { return data_ + pos_; }

 private:
  const uint8_t* data_;
  std::size_t size_;
  std::size_t pos_ = 0;
};

// A broken invariant: say which, then abort so libFuzzer saves the input.
[[noreturn]] inline void fail(const char* what) {
  std::fprintf(stderr, "gridsampler fuzz invariant broken: %s\n", what);
  std::fflush(stderr);
  std::abort();
}

#define GS_FUZZ_CHECK(cond, ...)                                                       \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);    \
      std::fprintf(stderr, __VA_ARGS__);                                               \
      std::fprintf(stderr, "\n");                                                      \
      ::gsfuzz::fail(#cond);                                                           \
    }                                                                                  \
  } while (0)

}  // namespace gsfuzz
