"""Prints the requirements of a --no-deps torch install for CPU use, one a line.

Usage: python torch_lean_requirements.py NAME...  (run with the environment's
Python after `pip install --no-deps torch` and, when torch requires it, the
cuda-toolkit meta-package, also with --no-deps; `torch_lean_requirements.py
--toolkit` prints that meta-package's pinned requirement, or nothing).

Printed: torch's pure-Python requirements, and the pinned versions of the CUDA
wheels NAME... (looked up in torch's requirements and in those of the
cuda-toolkit extras torch asks for). Everything else CUDA (nvidia-*, cuda-*,
triton) is left out. Exits non-zero when a NAME has no pin.
"""

import sys
from importlib.metadata import PackageNotFoundError, requires

from packaging.requirements import Requirement

CUDA_PREFIXES = ("nvidia-", "cuda-", "triton")


def main(names):
    wanted = {n.lower() for n in names}
    pins = {}
    toolkit_extras = set()
    for spec in requires("torch") or []:
        req = Requirement(spec)
        if req.marker is not None and not req.marker.evaluate({"extra": ""}):
            continue
        name = req.name.lower()
        if name == "cuda-toolkit":
            toolkit_extras = set(req.extras)
        if not name.startswith(CUDA_PREFIXES) or name in wanted:
            pins[name] = f"{req.name}{req.specifier}"
    try:
        toolkit = requires("cuda-toolkit") or []
    except PackageNotFoundError:
        toolkit = []
    for spec in toolkit:
        req = Requirement(spec)
        name = req.name.lower()
        if name not in wanted or name in pins:
            continue
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in toolkit_extras):
            pins[name] = f"{req.name}{req.specifier}"
    missing = wanted - set(pins)
    if missing:
        sys.exit(f"torch's metadata pins no {', '.join(sorted(missing))}")
    print("\n".join(sorted(pins.values())))


def toolkit():
    for spec in requires("torch") or []:
        req = Requirement(spec)
        if req.name.lower() == "cuda-toolkit" and (
                req.marker is None or req.marker.evaluate({"extra": ""})):
            print(f"{req.name}{req.specifier}")


if __name__ == "__main__":
    if sys.argv[1:] == ["--toolkit"]:
        toolkit()
    else:
        main(sys.argv[1:])
