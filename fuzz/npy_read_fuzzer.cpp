// libFuzzer target for the strict .npy reader (src/io/npy.cpp).
//
// Each input is the whole content of a file. It is written to a memfd (no
// disk traffic) and read back through /proc/self/fd/N, so the reader runs
// exactly as the command-line tool runs it: open, fstat, read. Checked on
// top of ASan/UBSan: a failure returns a message that starts with the path;
// a success returns a C-order float16/32/64 array of at most 8 dimensions
// whose byte count is exactly the data after the header, and writing the
// array back and reading it again gives the same array.
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "fuzz_common.hpp"
#include "io/npy.hpp"

namespace {

namespace npy = gridsampler::npy;
using gridsampler::DType;
using gridsampler::StatusCode;

struct State {
  int fd = -1;
  std::string path;      // /proc/self/fd/<fd>
  std::string out_path;  // where successful reads are written back
};

State& state() {
  static State s = [] {
    State st;
    st.fd = ::memfd_create("npy_fuzz", MFD_CLOEXEC);
    if (st.fd < 0) gsfuzz::fail("memfd_create");
    st.path = "/proc/self/fd/" + std::to_string(st.fd);
    const char* tmp = std::getenv("TMPDIR");
    st.out_path = std::string(tmp && *tmp ? tmp : "/tmp") + "/gs_npy_fuzz_" +
                  std::to_string(::getpid()) + ".npy";
    return st;
  }();
  return s;
}

bool put(int fd, const uint8_t* data, std::size_t size) {
  if (::ftruncate(fd, 0) != 0) return false;
  std::size_t done = 0;
  while (done < size) {
    const ssize_t w = ::pwrite(fd, data + done, size - done, static_cast<off_t>(done));
    if (w <= 0) return false;
    done += static_cast<std::size_t>(w);
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  State& st = state();
  if (!put(st.fd, data, size)) gsfuzz::fail("cannot write the memfd");

  npy::Array a;
  a.shape = {7};  // must be left alone on failure
  const gridsampler::Status s = npy::read(st.path, &a);
  if (!s.ok()) {
    GS_FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument || s.code() == StatusCode::kInternal,
                  "code %d", static_cast<int>(s.code()));
    GS_FUZZ_CHECK(s.message().rfind(st.path + ": ", 0) == 0, "message '%s'", s.message().c_str());
    GS_FUZZ_CHECK(a.shape.size() == 1 && a.shape[0] == 7 && a.data.empty(),
                  "output array changed on failure");
    return 0;
  }

  // A success: a float array whose data are exactly the rest of the file.
  GS_FUZZ_CHECK(a.dtype == DType::kFloat16 || a.dtype == DType::kFloat32 ||
                    a.dtype == DType::kFloat64,
                "dtype %d", static_cast<int>(a.dtype));
  GS_FUZZ_CHECK(a.shape.size() <= 8, "%zu dimensions", a.shape.size());
  uint64_t bytes = gridsampler::dtype_size(a.dtype);
  for (int64_t d : a.shape) {
    GS_FUZZ_CHECK(d >= 0, "negative dimension");
    if (bytes != 0) {
      GS_FUZZ_CHECK(!__builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes),
                    "byte count overflows");
    }
  }
  GS_FUZZ_CHECK(bytes == a.data.size(), "shape needs %llu bytes, array holds %zu",
                static_cast<unsigned long long>(bytes), a.data.size());
  GS_FUZZ_CHECK(a.data.size() <= size, "more data than the file");
  GS_FUZZ_CHECK(a.data.empty() ||
                    std::memcmp(a.data.data(), data + (size - a.data.size()), a.data.size()) == 0,
                "data are not the end of the file");

  // Round trip through the writer.
  const gridsampler::Status w = npy::write(st.out_path, a);
  GS_FUZZ_CHECK(w.ok(), "writing a read array failed: %s", w.message().c_str());
  npy::Array b;
  const gridsampler::Status r = npy::read(st.out_path, &b);
  GS_FUZZ_CHECK(r.ok(), "reading a written array failed: %s", r.message().c_str());
  GS_FUZZ_CHECK(b.dtype == a.dtype && b.shape == a.shape && b.data == a.data,
                "round trip changed the array");
  ::unlink(st.out_path.c_str());
  return 0;
}
