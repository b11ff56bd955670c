// Tests of the strict .npy reader and writer (src/io/npy.cpp).
#include "common/temp_dir.hpp"
#include "io/npy.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <new>
#include <random>
#include <string>
#include <vector>

#include "host/element_access.hpp"

// ---------------------------------------------------------------------------
// Allocation tracking: the reader must reject absurd shapes before it
// allocates anything for the data. This replaces the global operator new of
// this test program (plain and aligned: array data are cache-line aligned)
// and records the largest request while enabled.
namespace {
std::atomic<bool> g_track{false};
std::atomic<std::size_t> g_largest{0};

void record(std::size_t n) {
  if (g_track.load(std::memory_order_relaxed)) {
    std::size_t prev = g_largest.load(std::memory_order_relaxed);
    while (n > prev && !g_largest.compare_exchange_weak(prev, n)) {
    }
  }
}
}  // namespace

// noinline: GCC 12 at -O2 otherwise inlines the pair and warns that free()
// is called on memory from operator new (-Wmismatched-new-delete).
__attribute__((noinline)) void* operator new(std::size_t n) {
  record(n);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t) noexcept { std::free(p); }
__attribute__((noinline)) void* operator new(std::size_t n, std::align_val_t alignment) {
  record(n);
  const auto a = static_cast<std::size_t>(alignment);
  if (n <= SIZE_MAX - a) {
    if (void* p = std::aligned_alloc(a, (std::max<std::size_t>(n, 1) + a - 1) / a * a)) return p;
  }
  throw std::bad_alloc();
}
__attribute__((noinline)) void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
__attribute__((noinline)) void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

namespace gridsampler::npy {
namespace {

namespace fs = std::filesystem;

using gstest::TempDir;

std::string read_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good());
}

// A .npy file with the given header text (used verbatim, so tests control
// padding), version and payload.
std::string make_file(const std::string& header, const std::string& payload = "", int major = 1,
                      int minor = 0) {
  std::string out = "\x93NUMPY";
  out += static_cast<char>(major);
  out += static_cast<char>(minor);
  const std::size_t n = header.size();
  const int len_bytes = major == 1 ? 2 : 4;
  for (int i = 0; i < len_bytes; ++i) out += static_cast<char>((n >> (8 * i)) & 0xff);
  return out + header + payload;
}

// A numpy-style padded header for a dict literal.
std::string padded(const std::string& dict, int major = 1) {
  const std::size_t prefix = major == 1 ? 10 : 12;
  std::string h = dict;
  while ((prefix + h.size() + 1) % 64 != 0) h += ' ';
  return h + '\n';
}

std::string f32_bytes(std::initializer_list<float> values) {
  std::string out;
  for (float v : values) out.append(reinterpret_cast<const char*>(&v), 4);
  return out;
}

std::vector<float> as_floats(const Array& a) {
  std::vector<float> out(a.data.size() / 4);
  std::memcpy(out.data(), a.data.data(), out.size() * 4);
  return out;
}

std::size_t itemsize(DType d) { return gridsampler::dtype_size(d); }

// Fills `a` with distinct, dtype-exact values.
void fill(Array* a) {
  const int64_t n = a->numel();
  a->data.resize(static_cast<std::size_t>(n) * itemsize(a->dtype));
  for (int64_t i = 0; i < n; ++i) {
    const double v = 0.25 * static_cast<double>(i) - 3.5;
    gridsampler::host::store_element(a->data.data() + static_cast<std::size_t>(i) * itemsize(a->dtype), a->dtype, v);
  }
}

// The read must fail with kInvalidArgument and a message that starts with
// the path and contains `what`.
void expect_rejected(const std::string& path, const std::string& what) {
  Array a;
  const Status s = read(path, &a);
  ASSERT_FALSE(s.ok()) << "accepted: " << path;
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message().rfind(path + ": ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find(what), std::string::npos) << "message: " << s.message() << "\nexpected: " << what;
}

void expect_rejected_bytes(const TempDir& dir, const std::string& bytes, const std::string& what) {
  static int counter = 0;
  const std::string path = dir.file("bad" + std::to_string(counter++) + ".npy");
  write_bytes(path, bytes);
  expect_rejected(path, what);
}

// ---------------------------------------------------------------------------
// Round trips.

TEST(npy, NumelOfZeroDimIsOne) {
  Array a;
  EXPECT_EQ(a.numel(), 1);
  a.shape = {2, 0, 3};
  EXPECT_EQ(a.numel(), 0);
  a.shape = {2, 3, 4};
  EXPECT_EQ(a.numel(), 24);
}

TEST(npy, RoundTripEveryDtypeAndShape) {
  TempDir dir;
  const std::vector<std::vector<int64_t>> shapes = {
      {}, {0}, {1}, {7}, {2, 3}, {0, 3}, {3, 0}, {2, 0, 4}, {1, 2, 3, 4}, {2, 3, 1, 5}, {2, 3, 4, 1, 5}, {2, 1, 1, 1, 1, 1, 1, 3}};
  for (DType dtype : {DType::kFloat16, DType::kFloat32, DType::kFloat64}) {
    for (const auto& shape : shapes) {
      Array a;
      a.dtype = dtype;
      a.shape = shape;
      fill(&a);
      const std::string path = dir.file("rt.npy");
      ASSERT_TRUE(write(path, a).ok());
      const std::string bytes = read_bytes(path);
      // numpy's layout: version 1.0, the whole header a multiple of 64 bytes
      // ending in '\n', then exactly the data.
      ASSERT_GE(bytes.size(), 10u);
      EXPECT_EQ(bytes.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
      const std::size_t header_len = static_cast<unsigned char>(bytes[8]) | (static_cast<unsigned char>(bytes[9]) << 8);
      EXPECT_EQ((10 + header_len) % 64, 0u);
      EXPECT_EQ(bytes[10 + header_len - 1], '\n');
      EXPECT_EQ(bytes.size(), 10 + header_len + a.data.size());

      Array b;
      const Status s = read(path, &b);
      ASSERT_TRUE(s.ok()) << s.message();
      EXPECT_EQ(b.dtype, dtype);
      EXPECT_EQ(b.shape, shape);
      EXPECT_EQ(b.numel(), a.numel());
      EXPECT_EQ(b.data, a.data);
    }
  }
  // No temporary files are left behind.
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    ++files;
    EXPECT_EQ(e.path().filename(), "rt.npy");
  }
  EXPECT_EQ(files, 1);
}

TEST(npy, WriterHeaderIsNumpys) {
  TempDir dir;
  struct Case {
    std::vector<int64_t> shape;
    DType dtype;
    std::string dict;
  };
  const std::vector<Case> cases = {
      {{3}, DType::kFloat32, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }"},
      {{}, DType::kFloat64, "{'descr': '<f8', 'fortran_order': False, 'shape': (), }"},
      {{2, 3}, DType::kFloat16, "{'descr': '<f2', 'fortran_order': False, 'shape': (2, 3), }"},
  };
  for (const Case& c : cases) {
    Array a;
    a.dtype = c.dtype;
    a.shape = c.shape;
    fill(&a);
    const std::string path = dir.file("h.npy");
    ASSERT_TRUE(write(path, a).ok());
    const std::string bytes = read_bytes(path);
    const std::string expected = make_file(padded(c.dict));
    ASSERT_GE(bytes.size(), expected.size());
    EXPECT_EQ(bytes.substr(0, expected.size()), expected);
    EXPECT_EQ(expected.size(), 128u);  // what numpy writes for these shapes
  }
}

TEST(npy, ReadsValuesWritten) {
  TempDir dir;
  const std::string path = dir.file("v.npy");
  write_bytes(path, make_file(padded("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }"),
                              f32_bytes({1.5f, -2.0f, 3.25f, 1e-3f})));
  Array a;
  ASSERT_TRUE(read(path, &a).ok());
  EXPECT_EQ(a.dtype, DType::kFloat32);
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(as_floats(a), (std::vector<float>{1.5f, -2.0f, 3.25f, 1e-3f}));
}

TEST(npy, AcceptsHeaderVariants) {
  TempDir dir;
  const std::string payload = f32_bytes({1, 2, 3, 4, 5, 6});
  const std::vector<std::pair<std::string, int>> variants = {
      // any key order
      {"{'shape': (2, 3), 'descr': '<f4', 'fortran_order': False}", 1},
      {"{'fortran_order': False, 'shape': (2, 3), 'descr': '<f4', }", 1},
      // double quotes, odd spacing, line breaks, no trailing comma
      {"{\"descr\":\"<f4\",\"fortran_order\":False,\"shape\":(2,3)}", 1},
      {"  {'descr' : '<f4' ,\n 'fortran_order' :\tFalse , 'shape' : ( 2 , 3 , ) , }", 1},
      // Python 2's numpy wrote long integers with an L
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", 1},
      // versions 2.0 and 3.0 (4-byte header length)
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 2},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 3},
  };
  for (const auto& [dict, major] : variants) {
    const std::string path = dir.file("var.npy");
    write_bytes(path, make_file(padded(dict, major), payload, major));
    Array a;
    const Status s = read(path, &a);
    ASSERT_TRUE(s.ok()) << dict << ": " << s.message();
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(as_floats(a), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  }
  // Old numpy padded to 16 bytes, not 64; and trailing spaces without '\n'.
  const std::string path = dir.file("unaligned.npy");
  write_bytes(path, make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }   ", payload));
  Array a;
  ASSERT_TRUE(read(path, &a).ok());
  EXPECT_EQ(a.shape, (std::vector<int64_t>{6}));
}

TEST(npy, OverwritesExistingFile) {
  TempDir dir;
  const std::string path = dir.file("o.npy");
  write_bytes(path, "old content that is not a .npy file at all");
  Array a;
  a.dtype = DType::kFloat32;
  a.shape = {2};
  fill(&a);
  ASSERT_TRUE(write(path, a).ok());
  Array b;
  ASSERT_TRUE(read(path, &b).ok());
  EXPECT_EQ(b.data, a.data);
}

// ---------------------------------------------------------------------------
// Rejections.

TEST(npy, RejectsBadMagic) {
  TempDir dir;
  const std::string good = make_file(padded("{'descr': '<f4', 'fortran_order': False, 'shape': (), }"),
                                     f32_bytes({1}));
  std::string bad = good;
  bad[1] = 'X';
  expect_rejected_bytes(dir, bad, "not a .npy file (bad magic)");
  bad = good;
  bad[0] = 'N';
  expect_rejected_bytes(dir, bad, "bad magic");
  expect_rejected_bytes(dir, "", "bad magic");
  expect_rejected_bytes(dir, "\x93NUM", "bad magic");
  expect_rejected_bytes(dir, "PK\x03\x04 a zip file, e.g. an .npz", "bad magic");
}

TEST(npy, RejectsUnsupportedVersion) {
  TempDir dir;
  const std::string dict = padded("{'descr': '<f4', 'fortran_order': False, 'shape': (), }");
  expect_rejected_bytes(dir, make_file(dict, f32_bytes({1}), 4, 0), "unsupported .npy version 4.0");
  expect_rejected_bytes(dir, make_file(dict, f32_bytes({1}), 1, 1), "unsupported .npy version 1.1");
  expect_rejected_bytes(dir, make_file(dict, f32_bytes({1}), 0, 0), "unsupported .npy version 0.0");
}

TEST(npy, RejectsTruncatedHeader) {
  TempDir dir;
  expect_rejected_bytes(dir, std::string("\x93NUMPY", 6), "truncated header");
  expect_rejected_bytes(dir, std::string("\x93NUMPY\x01", 7), "truncated header");
  expect_rejected_bytes(dir, std::string("\x93NUMPY\x01\x00\x10", 9), "truncated header");
  expect_rejected_bytes(dir, std::string("\x93NUMPY\x02\x00\x10\x00\x00", 11), "truncated header");
}

TEST(npy, RejectsHeaderLengthBeyondFile) {
  TempDir dir;
  const std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n";
  std::string bytes = make_file(dict);
  bytes[8] = static_cast<char>(0xff);  // header length 0x..ff > what the file holds
  bytes[9] = static_cast<char>(0x7f);
  expect_rejected_bytes(dir, bytes, "beyond the end of the file");
  // Version 2.0 with a 4 GiB header length.
  std::string v2 = make_file(dict, "", 2);
  v2[8] = v2[9] = v2[10] = v2[11] = static_cast<char>(0xff);
  expect_rejected_bytes(dir, v2, "beyond the end of the file");
}

TEST(npy, RejectsDataSizeMismatch) {
  TempDir dir;
  const std::string dict = padded("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }");
  expect_rejected_bytes(dir, make_file(dict, f32_bytes({1, 2, 3, 4, 5})),
                        "truncated data: shape (2, 3) of float32 needs 24 bytes, the file holds 20");
  expect_rejected_bytes(dir, make_file(dict, f32_bytes({1, 2, 3, 4, 5, 6, 7})),
                        "extra data after the array: shape (2, 3) of float32 needs 24 bytes, the file holds 28");
  expect_rejected_bytes(dir, make_file(dict, f32_bytes({1, 2, 3, 4, 5, 6}) + "x"), "extra data");
  expect_rejected_bytes(dir, make_file(dict), "truncated data");
  // A zero-size array has no data at all.
  const std::string empty = padded("{'descr': '<f8', 'fortran_order': False, 'shape': (0, 3), }");
  expect_rejected_bytes(dir, make_file(empty, "12345678"), "extra data");
}

TEST(npy, EveryTruncationOfAValidFileIsRejected) {
  TempDir dir;
  const std::string good = make_file(padded("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
                                     f32_bytes({1, 2, 3, 4, 5, 6}));
  const std::string path = dir.file("t.npy");
  for (std::size_t n = 0; n < good.size(); ++n) {
    write_bytes(path, good.substr(0, n));
    Array a;
    const Status s = read(path, &a);
    EXPECT_FALSE(s.ok()) << "accepted a file cut to " << n << " bytes";
    EXPECT_EQ(s.message().rfind(path + ": ", 0), 0u) << s.message();
  }
  write_bytes(path, good);
  Array a;
  EXPECT_TRUE(read(path, &a).ok());
}

TEST(npy, RejectsUnsupportedDtypes) {
  TempDir dir;
  const auto file = [](const std::string& descr, std::size_t payload) {
    return make_file(padded("{'descr': '" + descr + "', 'fortran_order': False, 'shape': (2,), }"),
                     std::string(payload, '\0'));
  };
  {
    // The exact message for the common case.
    const std::string path = dir.file("grad.npy");
    write_bytes(path, file(">f4", 8));
    Array a;
    const Status s = read(path, &a);
    EXPECT_EQ(s.message(), path + ": unsupported dtype '>f4' (big-endian)");
  }
  expect_rejected_bytes(dir, file(">f8", 16), "unsupported dtype '>f8' (big-endian)");
  expect_rejected_bytes(dir, file(">f2", 4), "unsupported dtype '>f2' (big-endian)");
  expect_rejected_bytes(dir, file("|f4", 8), "unsupported dtype '|f4' (byte order '|' is not valid");
  expect_rejected_bytes(dir, file("=f4", 8), "unsupported dtype '=f4'");
  expect_rejected_bytes(dir, file("f4", 8), "unsupported dtype 'f4'");
  expect_rejected_bytes(dir, file("<f16", 32), "unsupported dtype '<f16'");
  expect_rejected_bytes(dir, file("<i4", 8), "unsupported dtype '<i4' (integer");
  expect_rejected_bytes(dir, file("<i8", 16), "(integer");
  expect_rejected_bytes(dir, file("<u2", 4), "(integer");
  expect_rejected_bytes(dir, file("|u1", 2), "(integer");
  expect_rejected_bytes(dir, file("|b1", 2), "(boolean");
  expect_rejected_bytes(dir, file("<c8", 16), "unsupported dtype '<c8' (complex");
  expect_rejected_bytes(dir, file("<c16", 32), "(complex");
  expect_rejected_bytes(dir, file("|O", 16), "unsupported dtype '|O' (object");
  expect_rejected_bytes(dir, file("<U3", 24), "(string");
  expect_rejected_bytes(dir, file("|S3", 6), "(string");
  expect_rejected_bytes(dir, file("|V4", 8), "(void/structured");
  expect_rejected_bytes(dir, file("<M8[ns]", 16), "(datetime");
  expect_rejected_bytes(dir, file("", 8), "unsupported dtype ''");
  expect_rejected_bytes(
      dir,
      make_file(padded("{'descr': [('a', '<f4'), ('b', '<f4')], 'fortran_order': False, 'shape': (2,), }"),
                std::string(16, '\0')),
      "unsupported dtype (structured)");
}

TEST(npy, RejectsFortranOrder) {
  TempDir dir;
  expect_rejected_bytes(
      dir, make_file(padded("{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }"), std::string(24, '\0')),
      "fortran_order True is not supported");
  expect_rejected_bytes(
      dir, make_file(padded("{'descr': '<f4', 'fortran_order': 0, 'shape': (2, 3), }"), std::string(24, '\0')),
      "'fortran_order' is not True or False");
}

TEST(npy, RejectsMalformedHeaders) {
  TempDir dir;
  const std::string payload(24, '\0');
  const auto bad = [&](const std::string& dict, const std::string& what) {
    expect_rejected_bytes(dir, make_file(padded(dict), payload), what);
  };
  bad("{'descr': '<f4', 'shape': (2, 3), }", "missing key 'fortran_order'");
  bad("{'fortran_order': False, 'shape': (2, 3), }", "missing key 'descr'");
  bad("{'descr': '<f4', 'fortran_order': False}", "missing key 'shape'");
  bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'extra': 1}", "unexpected key 'extra'");
  bad("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2, 3)}", "appears twice");
  bad("{'descr': '<f4', 'fortran_order': False, 'shape': [2, 3], }", "'shape' is not a tuple");
  bad("{'descr': '<f4', 'fortran_order': False, 'shape': (6), }", "'shape' is not a tuple");
  bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", "negative dimension");
  bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3.0), }", "malformed");
  bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 03), }", "leading zero");
  bad("{'descr': '<f4', 'fortran_order': False, 'shape': ('2', 3), }", "non-integer");
  bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, None), }", "non-integer");
  bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } x", "unexpected text after");
  bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), ", "malformed header");
  bad("{'descr': '<f4, 'fortran_order': False, 'shape': (2, 3), }", "malformed header");
  bad("{'descr': '<f4', 'fortran_order': false, 'shape': (2, 3), }", "unexpected name 'false'");
  bad("{'descr': '<f4' 'fortran_order': False, 'shape': (2, 3), }", "malformed header");
  bad("['descr', '<f4']", "not a dict");
  bad("", "not a dict");
  bad("{'descr': 3, 'fortran_order': False, 'shape': (2, 3), }", "'descr' is not a string");
  bad("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } # comment", "unexpected text after");
  bad("{'descr': '<f\\x34', 'fortran_order': False, 'shape': (2, 3), }", "escape");
  bad("{'descr': '<f4', 'fortran_order': False, 'shape': " + std::string(100, '(') + std::string(100, ')') + "}",
      "nests too deeply");
  expect_rejected_bytes(
      dir, make_file("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }" + std::string(1, '\0') + "\n",
                     payload),
      "NUL byte");
  // The 'L' suffix was only ever written by Python 2, in version 1.0/2.0 files.
  expect_rejected_bytes(
      dir, make_file(padded("{'descr': '<f4', 'fortran_order': False, 'shape': (2L, 3L), }", 3), payload, 3),
      "malformed");
}

TEST(npy, RejectsTooManyDimensions) {
  TempDir dir;
  expect_rejected_bytes(
      dir,
      make_file(padded("{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }"),
                f32_bytes({1})),
      "shape has 9 dimensions (at most 8");
}

TEST(npy, RejectsAbsurdShapesWithoutAllocating) {
  TempDir dir;
  const std::vector<std::pair<std::string, std::string>> cases = {
      // 2^124 elements: the element count does not fit in 64 bits.
      {"(4611686018427387904, 4611686018427387904)", "is too large"},
      // 2^62 elements of 8 bytes: the byte count does not fit in 64 bits.
      {"(4611686018427387904,)", "is too large"},
      // 2^60 bytes: fits in 64 bits but the file does not hold it.
      {"(1073741824, 134217728)", "truncated data"},
      // 2^42 bytes.
      {"(549755813888,)", "truncated data"},
      // A dimension beyond int64.
      {"(99999999999999999999,)", "too large"},
      // Zero elements, but the other dimensions' product overflows.
      {"(0, 4611686018427387904, 4611686018427387904)", "is too large"},
  };
  for (const auto& [shape, what] : cases) {
    const std::string path = dir.file("absurd.npy");
    write_bytes(path, make_file(padded("{'descr': '<f8', 'fortran_order': False, 'shape': " + shape + ", }"),
                                std::string(64, '\0')));
    g_largest = 0;
    g_track = true;
    Array a;
    const Status s = read(path, &a);
    g_track = false;
    EXPECT_FALSE(s.ok()) << shape;
    EXPECT_NE(s.message().find(what), std::string::npos) << shape << ": " << s.message();
    EXPECT_LT(g_largest.load(), std::size_t{1} << 16) << shape << ": allocated " << g_largest.load() << " bytes";
    EXPECT_TRUE(a.data.empty());
  }
}

// The allocation tracker above does see the reader's allocation of a real
// file's data (so the test above is not vacuous).
TEST(npy, AllocationTrackerSeesDataBuffer) {
  TempDir dir;
  const std::string path = dir.file("big.npy");
  write_bytes(path, make_file(padded("{'descr': '<f8', 'fortran_order': False, 'shape': (32768,), }"),
                              std::string(32768 * 8, '\0')));
  g_largest = 0;
  g_track = true;
  Array a;
  const Status s = read(path, &a);
  g_track = false;
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_GE(g_largest.load(), std::size_t{32768 * 8});
}

TEST(npy, RejectsMissingAndUnreadableFiles) {
  TempDir dir;
  const std::string missing = dir.file("missing.npy");
  Array a;
  const Status s = read(missing, &a);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), missing + ": cannot open: " + std::strerror(ENOENT));
  expect_rejected(dir.path().string(), "is a directory");
  if (::geteuid() != 0) {  // root reads anything
    const std::string locked = dir.file("locked.npy");
    write_bytes(locked, "x");
    ::chmod(locked.c_str(), 0);
    expect_rejected(locked, std::string("cannot open: ") + std::strerror(EACCES));
  }
}

// Random corruptions of a valid file must be rejected or read cleanly, never
// crash (run under the sanitizers).
TEST(npy, SurvivesRandomCorruption) {
  TempDir dir;
  const std::string good = make_file(padded("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"),
                                     f32_bytes({1, 2, 3, 4, 5, 6}));
  const std::string path = dir.file("fuzz.npy");
  std::mt19937 rng(12345);
  int accepted = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string bytes = good;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      const std::size_t pos = rng() % 70;  // the header, where the parsing is
      bytes[pos] = static_cast<char>(rng() % 256);
    }
    write_bytes(path, bytes);
    Array a;
    const Status s = read(path, &a);
    if (s.ok()) {
      ++accepted;
      EXPECT_EQ(static_cast<std::size_t>(a.numel()) * itemsize(a.dtype), a.data.size());
    } else {
      EXPECT_EQ(s.message().rfind(path + ": ", 0), 0u) << s.message();
    }
  }
  EXPECT_LT(accepted, 2000);
}

// ---------------------------------------------------------------------------
// Writer rejections.

void expect_write_rejected(const std::string& path, const Array& a, const std::string& what) {
  const Status s = write(path, a);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind(path + ": ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find(what), std::string::npos) << s.message();
}

TEST(npy, WriteRejectsBadArrays) {
  TempDir dir;
  const std::string path = dir.file("w.npy");
  Array a;
  a.dtype = DType::kBFloat16;
  a.shape = {2};
  a.data.resize(4);
  expect_write_rejected(path, a, "cannot write dtype bfloat16");
  a.dtype = DType::kFloat32;
  expect_write_rejected(path, a, "needs 8 bytes, the array holds 4");
  a.shape = {1, 1, 1, 1, 1, 1, 1, 1, 1};
  expect_write_rejected(path, a, "9 dimensions");
  a.shape = {-1};
  expect_write_rejected(path, a, "negative or too large");
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

TEST(npy, FailedWriteLeavesNothingBehind) {
  TempDir dir;
  Array a;
  a.dtype = DType::kFloat64;
  a.shape = {3};
  fill(&a);
  // Missing folder.
  const std::string nofolder = dir.file("nope/out.npy");
  const Status s = write(nofolder, a);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.message().rfind(nofolder + ": ", 0), 0u) << s.message();
  EXPECT_NE(s.message().find(std::strerror(ENOENT)), std::string::npos) << s.message();
  // Target is a non-empty folder: rename fails, the temporary is removed.
  const std::string folder = dir.file("folder");
  fs::create_directory(folder);
  write_bytes(folder + "/keep", "x");
  const Status s2 = write(folder, a);
  ASSERT_FALSE(s2.ok());
  EXPECT_EQ(s2.message().rfind(folder + ": ", 0), 0u) << s2.message();
  int entries = 0;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    ++entries;
    EXPECT_EQ(e.path().filename(), "folder");
  }
  EXPECT_EQ(entries, 1);
  // A rejected array does not disturb an existing file.
  const std::string existing = dir.file("existing.npy");
  ASSERT_TRUE(write(existing, a).ok());
  const std::string before = read_bytes(existing);
  Array broken = a;
  broken.data.pop_back();
  EXPECT_FALSE(write(existing, broken).ok());
  EXPECT_EQ(read_bytes(existing), before);
}

TEST(npy, WritesRelativePaths) {
  TempDir dir;
  const fs::path old = fs::current_path();
  fs::current_path(dir.path());
  Array a;
  a.dtype = DType::kFloat32;
  a.shape = {1};
  fill(&a);
  const Status s = write("rel.npy", a);
  Array b;
  const Status r = read("rel.npy", &b);
  fs::current_path(old);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_TRUE(r.ok()) << r.message();
  EXPECT_EQ(b.data, a.data);
}

}  // namespace
}  // namespace gridsampler::npy
