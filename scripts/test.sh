#!/usr/bin/env bash
# Builds everything and runs every test (the README's second command): the
# C++ suites through ctest, then the Python package's pytest suite against
# PyPI's torch (scripts/ci-python.sh, with the extension linking this build's
# library; GRIDSAMPLER_SKIP_PYTHON=1 skips it).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release
cmake --build build -j"$(nproc)"
ctest --test-dir build --output-on-failure -j"$(nproc)"
if [[ "${GRIDSAMPLER_SKIP_PYTHON:-0}" != 1 ]]; then
  # The Python extension links the library just built (no second compile).
  GRIDSAMPLER_CORE_BUILD="$(pwd)/build" bash scripts/ci-python.sh
fi
