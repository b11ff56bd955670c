#!/usr/bin/env bash
# Builds the command-line tool and runs its built-in examples (the README's
# first command): the main job first — `gridsampler register` aligns the
# demo's image with a known warp of it by gradient descent through
# GridSampler2DGrad, prints how far the recovered displacement is from the
# true one and writes its pictures to build/register/ — then the accuracy
# table of `gridsampler demo`. Extra arguments go to `gridsampler demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh >&2
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target gridsampler_cli >/dev/null
build/tools/gridsampler register --out build/register
echo
exec build/tools/gridsampler demo "$@"
