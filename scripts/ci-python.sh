#!/usr/bin/env bash
# Python package CI: a virtual environment with PyPI's torch (and JAX), then
# `pip install .` of this checkout, then the pytest suite in python/tests.
#
# Idempotent: the environment lives outside the checkout (GRIDSAMPLER_VENV,
# default ~/.cache/gridsampler/venv-pyX.Y) and is reused when it already has
# what is needed, so a second run only rebuilds the package and runs the tests.
#
# torch: PyPI's Linux torch is the CUDA build; with all its nvidia-* wheels it
# is ~3.0 GB to download and ~5 GB installed. For CPU use this script installs
# it "lean": torch itself with --no-deps, its pure-Python dependencies, and only
# the CUDA libraries that the machine does not already provide (the CUDA
# toolkit in /usr/local/cuda-* has the rest; torch never calls them on the
# CPU, it only needs them to load). If `import torch` then fails, it installs
# torch with all its dependencies. GRIDSAMPLER_TORCH_INSTALL=full skips the
# lean attempt.
#
# Exits non-zero on any failure, including a pytest run that ran no test.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH_VERSION=${GRIDSAMPLER_TORCH_VERSION:-2.15.0}
TORCH_INSTALL=${GRIDSAMPLER_TORCH_INSTALL:-lean}
# CUDA libraries that lean installs from PyPI: the ones missing from (or too
# old in) the machine's CUDA toolkit. Versions come from torch's metadata.
LEAN_CUDA_WHEELS=${GRIDSAMPLER_LEAN_CUDA_WHEELS:-"nvidia-cufile nvidia-cusparselt-cu13 nvidia-nvshmem-cu13 nvidia-nccl-cu13"}
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}
export PIP_DISABLE_PIP_VERSION_CHECK=1

pyver=$("$PYTHON" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
VENV=${GRIDSAMPLER_VENV:-$HOME/.cache/gridsampler/venv-py$pyver}
log() { echo "ci-python [${SECONDS}s]: $*"; }

if [[ ! -x "$VENV/bin/python" ]]; then
  log "creating $VENV"
  mkdir -p "$(dirname "$VENV")"
  "$PYTHON" -m venv "$VENV"
fi
py="$VENV/bin/python"
pip() { "$py" -m pip "$@"; }

# Small tools and test dependencies: a no-op when already satisfied.
tools=(pytest numpy jax "scikit-build-core>=0.10" "nanobind>=2.0")
if ! "$py" -c 'import pytest, numpy, jax, scikit_build_core, nanobind' 2>/dev/null; then
  log "installing ${tools[*]}"
  pip install -q "${tools[@]}"
fi

torch_ok() {
  "$py" - "$TORCH_VERSION" <<'EOF' 2>/dev/null
import sys
import torch
assert torch.__version__.split("+")[0] == sys.argv[1], torch.__version__
x = torch.randn(3, 4, requires_grad=True)
(x * x).sum().backward()
assert torch.allclose(x.grad, 2 * x)
import torch.library
assert hasattr(torch.library, "custom_op")
EOF
}

if torch_ok; then
  log "torch $TORCH_VERSION already installed in $VENV"
else
  start=$SECONDS
  if [[ "$TORCH_INSTALL" == lean ]]; then
    log "installing torch==$TORCH_VERSION lean (--no-deps, CPU-side dependencies, $LEAN_CUDA_WHEELS)"
    pip install -q --no-deps "torch==$TORCH_VERSION"
    # torch's requirements: the pure-Python ones, and the pinned versions of the
    # CUDA wheels named above (some pinned only through the cuda-toolkit
    # meta-package, installed --no-deps to read its metadata).
    toolkit=$("$py" python/ci/torch_lean_requirements.py --toolkit)
    if [[ -n "$toolkit" ]]; then pip install -q --no-deps "$toolkit"; fi
    read -r -a lean_wheels <<<"$LEAN_CUDA_WHEELS"
    if deps=$("$py" python/ci/torch_lean_requirements.py "${lean_wheels[@]}"); then
      log "(pip may warn that torch's other CUDA requirements are not installed: that is the point)"
      # shellcheck disable=SC2086  # one requirement a line, none with spaces
      pip install -q $deps
      if ! torch_ok; then
        log "torch does not load without the rest of its CUDA wheels here ($("$py" -c 'import torch' 2>&1 | tail -n 1)); installing them"
        TORCH_INSTALL=full
      fi
    else
      log "no lean install known for this torch; installing it whole"
      TORCH_INSTALL=full
    fi
  fi
  if [[ "$TORCH_INSTALL" == full ]]; then
    log "installing torch==$TORCH_VERSION with all its dependencies"
    pip install -q "torch==$TORCH_VERSION"
  fi
  torch_ok || { "$py" -c 'import torch' || true; log "torch does not work"; exit 1; }
  log "torch installed in $((SECONDS - start)) s ($(du -sh "$VENV" | cut -f1) in $VENV)"
fi

# Real clients of grid_sample, which python/tests/test_clients.py runs with the
# switch on and off. Pinned, and --no-deps: their other requirements are numpy
# and torch (kornia also kornia_rs, listed), all here already; with deps pip
# would pull torch's CUDA wheels (GBs) into this lean venv.
clients=(kornia==0.9.0 kornia_rs==0.2.0 monai==1.6.1)
if ! "$py" - "${clients[@]}" <<'EOF' 2>/dev/null
import sys
from importlib.metadata import version
for pin in sys.argv[1:]:
    name, want = pin.split("==")
    assert version(name) == want, (name, version(name), want)
import kornia, monai
EOF
then
  start=$SECONDS
  log "installing ${clients[*]} (--no-deps)"
  pip install -q --no-deps "${clients[@]}"
  log "clients installed in $((SECONDS - start)) s"
fi

# The package, as a user installs it (isolated build, PyPI build requirements),
# after the C++ build's own Debian packages (Highway, OpenMP, ...).
bash scripts/install-deps.sh
# GRIDSAMPLER_CORE_BUILD (scripts/test.sh sets it to its build folder): the
# extension links the static library built there, every SIMD target with
# run-time dispatch, instead of compiling the kernels again. Without it the
# core is compiled here, for one target only (GRIDSAMPLER_PY_SIMD_TARGETS,
# default baseline: the tests exercise the bindings and the torch
# integration, the C++ suite the targets); a plain `pip install .` builds
# every target.
if [[ -n "${GRIDSAMPLER_CORE_BUILD:-}" ]]; then
  log "pip install . (the core from $GRIDSAMPLER_CORE_BUILD)"
  core=(--config-settings=cmake.define.GRIDSAMPLER_CORE_BUILD="$GRIDSAMPLER_CORE_BUILD")
else
  PY_SIMD_TARGETS=${GRIDSAMPLER_PY_SIMD_TARGETS:-baseline}
  log "pip install . (SIMD targets: $PY_SIMD_TARGETS)"
  core=(--config-settings=cmake.define.GRIDSAMPLER_SIMD_TARGETS="$PY_SIMD_TARGETS"
        --config-settings=cmake.define.GRIDSAMPLER_CORE_BUILD=)
fi
pip install -q --force-reinstall --no-deps "${core[@]}" .
"$py" -c 'import gridsampler, gridsampler.torch, torch; print("ci-python: gridsampler", gridsampler.__version__, "with torch", torch.__version__)'

# The tests, against the installed package; torch is required (no skipping).
pytest_log=$(mktemp)
set +e
(cd python/tests && GRIDSAMPLER_REQUIRE_TORCH=1 "$py" -m pytest -q -rs -p no:cacheprovider \
  -p no:logging . 2>&1) | tee "$pytest_log"
rc=${PIPESTATUS[0]}
set -e
summary=$(tail -n 1 "$pytest_log")
rm -f "$pytest_log"
if [[ $rc -eq 5 ]]; then
  log "pytest collected no tests"; exit 1
fi
if [[ $rc -ne 0 ]]; then
  log "pytest failed (exit $rc)"; exit "$rc"
fi
if ! grep -qE '[1-9][0-9]* passed' <<<"$summary"; then
  log "no test passed: $summary"; exit 1
fi
log "ok"
