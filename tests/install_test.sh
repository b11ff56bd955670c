#!/usr/bin/env bash
# Installs the build tree into a temporary prefix, builds the examples/
# projects (the 2-D and 3-D aclnn examples) against it with
# find_package(gridsampler), runs the programs, and compares each aclnn
# example's output with PyTorch's values (its expected_output.txt).
set -euo pipefail
build_dir=$1
source_dir=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
example2d="$source_dir/examples/aclnn_grid_sampler2d_backward"
example3d="$source_dir/examples/aclnn_grid_sampler3d_backward"
cmake -S "$example2d" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build" -j2 >/dev/null
cmake -S "$example3d" -B "$work/build3d" -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/build3d" -j2 >/dev/null
# The shared libraries carry a SONAME and version.
lib=$(ls "$work"/prefix/lib*/libgridsampler.so.0* | head -n1)
objdump -p "$lib" | grep -q 'SONAME *libgridsampler.so.0' || { echo "bad SONAME"; exit 1; }
# pkg-config files point at the installed tree.
PKG_CONFIG_PATH=$(dirname "$lib")/pkgconfig
grep -q "Libs: -L.*-lgridsampler_aclnn" "$PKG_CONFIG_PATH/gridsampler-aclnn.pc" || { echo "bad .pc"; exit 1; }
"$work/build/aclnn_c_smoke"
"$work/build/cpp_api_smoke"
"$work/build3d/aclnn3d_c_smoke"
"$work/build/test_aclnn_grid_sampler2_d_backward" > "$work/out.txt"
"$work/build3d/test_aclnn_grid_sampler3_d_backward" > "$work/out3d.txt"
# Compare every printed value with the expected one: float32 within 1e-5
# relative to the largest magnitude of its output.
python_cmp='
import sys
def load(p):
    d = {}
    for line in open(p):
        if line.startswith("#") or " is: " not in line: continue
        k, v = line.split(" is: ")
        d[k.strip()] = float(v)
    return d
got, want = load(sys.argv[1]), load(sys.argv[2])
assert got.keys() == want.keys(), "printed entries differ from the expected ones"
for prefix in ("inputGrad", "gridGrad"):
    keys = [k for k in want if k.startswith(prefix)]
    scale = max(1.0, max(abs(want[k]) for k in keys))
    for k in keys:
        if abs(got[k] - want[k]) > 1e-5 * scale:
            sys.exit("%s: got %r, expected %r" % (k, got[k], want[k]))
print("example output matches PyTorch (%d values)" % len(want))
'
for run in "$work/out.txt:$example2d" "$work/out3d.txt:$example3d"; do
  out=${run%%:*} example=${run#*:}
  if command -v python3 >/dev/null; then
    python3 -c "$python_cmp" "$out" "$example/expected_output.txt"
  else
    # No Python: the exact printed text must match the expected file's entries.
    diff <(grep ' is: ' "$out" | cut -d: -f1) <(grep ' is: ' "$example/expected_output.txt" | cut -d: -f1)
  fi
done
