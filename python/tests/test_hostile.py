"""The hostile sweep of the Python API, in child processes: the cases of
hostile_numpy_cases.py (the plain API) and hostile_torch_cases.py
(gridsampler.torch with tensors that require grad), run by hostile_child.py.

A case that crashes the interpreter fails here instead of ending the run.
Cases run in batches, one child per environment (importing torch costs a
second or two per process); when a child dies, the case it was running is
reported as the crash and the rest of its batch goes on in a fresh child.
"""

import json
import os
import subprocess
import sys

import pytest

import hostile_numpy_cases  # noqa: F401 (registers its cases)
import hostile_torch_cases  # noqa: F401
from hostile_support import CASES

CHILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hostile_child.py")
TIMEOUT_S = 300


def _run_batch(names, env, script=CHILD):
    """Outcomes of `names` run in one child; a crash ends the batch early."""
    child_env = dict(os.environ, **env)
    try:
        proc = subprocess.run([sys.executable, script, *names],
                              capture_output=True, text=True, env=child_env, timeout=TIMEOUT_S)
        stdout, stderr, rc = proc.stdout, proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        stdout = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        stderr, rc = f"no answer within {TIMEOUT_S} s", None
    outcomes, running = {}, None
    for line in stdout.splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # something a case printed
        if record.get("started"):
            running = record["case"]
        else:
            outcomes[record["case"]] = record
            running = None
    if running is not None:
        how = "hung" if rc is None else f"exit status {rc}"
        outcomes[running] = {"case": running, "ok": False,
                             "why": f"the process died ({how}):\n{stderr[-2000:]}"}
    elif len(outcomes) < len(names):  # it died between cases, or never started
        missing = next(n for n in names if n not in outcomes)
        why = f"the child stopped before this case (exit {rc}):\n{stderr[-2000:]}"
        outcomes[missing] = {"case": missing, "ok": False, "why": why}
    return outcomes


def _run_all(names, env, script=CHILD):
    """Outcomes of every case of `names`: after a crash, the rest in a new child."""
    results, remaining = {}, list(names)
    while remaining:
        results.update(_run_batch(remaining, env, script))
        remaining = [n for n in remaining if n not in results]
    return results


@pytest.fixture(scope="module")
def outcomes():
    groups = {}
    for name, (_fn, env) in CASES.items():
        groups.setdefault(tuple(sorted(env.items())), []).append(name)
    results = {}
    for env, names in groups.items():
        results.update(_run_all(names, dict(env)))
    return results


@pytest.mark.parametrize("name", list(CASES))
def test_hostile(outcomes, name):
    outcome = outcomes[name]
    if "skip" in outcome:
        pytest.skip(outcome["skip"])
    assert outcome["ok"], outcome["why"]


def test_a_crash_is_reported_and_the_batch_goes_on(tmp_path):
    """The harness itself: a case that kills its process is named, and the
    cases after it still run (in a fresh child)."""
    script = tmp_path / "crashing_cases.py"
    script.write_text("import json, os, sys\n"
                      "for name in sys.argv[1:]:\n"
                      "    print(json.dumps({'case': name, 'started': True}), flush=True)\n"
                      "    if name == 'b':\n"
                      "        os.abort()\n"
                      "    print(json.dumps({'case': name, 'ok': True}), flush=True)\n")
    results = _run_all(["a", "b", "c"], {}, str(script))
    assert results["a"]["ok"] and results["c"]["ok"]
    assert not results["b"]["ok"] and "the process died (exit status -6)" in results["b"]["why"]
