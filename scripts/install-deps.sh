#!/usr/bin/env bash
# Installs the Debian packages the build and the tests need, when missing.
# Regenerating the golden data (tests/data/make_golden.py) also needs
# python3-torch and python3-numpy; pass --golden to install those too.
set -euo pipefail
packages=(g++ cmake make libgtest-dev libcli11-dev libpng-dev libhwy-dev pkg-config libbenchmark-dev)
if [[ "${1:-}" == "--golden" ]]; then packages+=(python3-torch python3-numpy); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
