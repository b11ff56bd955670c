"""The child process of test_hostile.py: python hostile_child.py CASE..."""

import sys

import hostile_numpy_cases  # noqa: F401 (registers its cases)
import hostile_torch_cases  # noqa: F401
from hostile_support import run

if __name__ == "__main__":
    run(sys.argv[1:])
