#!/usr/bin/env bash
# Builds the command-line tool and runs its built-in example (the README's
# first command). Extra arguments go to `gridsampler demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh >&2
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target gridsampler_cli >/dev/null
exec build/tools/gridsampler demo "$@"
