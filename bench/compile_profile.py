"""Where a cold test run's time goes: every Numba compile, per test worker, then a summary.

As a pytest plugin it records each compile (Numba's "numba:compile" events: the function, whether
it is a parallel kernel, how deeply nested, seconds, the test that was running) into one JSON file
per worker; run as a script it sums them per function (outermost compiles, so nested ones are not
counted twice) and per test file. With an empty kernel cache:

    rm -rf /tmp/cold && PYTHONPATH=bench NUMBA_CACHE_DIR=/tmp/cold COMPILE_PROFILE_DIR=/tmp/prof \\
        python -m pytest -q -n auto -p compile_profile
    python bench/compile_profile.py /tmp/prof
"""
import collections
import json
import os
import sys
import time

from numba.core import event


class _Recorder(event.Listener):
    def __init__(self):
        self.started = []
        self.rows = []

    def on_start(self, ev):
        self.started.append(time.perf_counter())

    def on_end(self, ev):
        began = self.started.pop()
        function = ev.data["dispatcher"].py_func
        self.rows.append(dict(seconds=time.perf_counter() - began, depth=len(self.started),
                              name=f"{function.__module__}.{function.__qualname__}",
                              parallel=bool(ev.data["dispatcher"].targetoptions.get("parallel")),
                              test=os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]))


_recorder = _Recorder()


def pytest_configure(config):
    event.register("numba:compile", _recorder)


def pytest_sessionfinish(session):
    folder = os.environ.get("COMPILE_PROFILE_DIR", "compile_profile")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, os.environ.get("PYTEST_XDIST_WORKER", "main") + ".json"), "w") as f:
        json.dump(_recorder.rows, f)


def main(folder: str) -> None:
    rows = []
    for name in sorted(os.listdir(folder)):
        if name.endswith(".json"):
            with open(os.path.join(folder, name)) as f:
                rows += json.load(f)
    outer = [r for r in rows if r["depth"] == 0]
    total = sum(r["seconds"] for r in outer)
    print(f"{len(outer)} outermost compiles, {total:.1f} s in all ({len(rows)} with the nested ones); "
          f"parallel kernels {sum(r['seconds'] for r in outer if r['parallel']):.1f} s")
    for key, title in ((lambda r: r["name"], "function"), (lambda r: r["test"].split("::")[0], "test file")):
        sums = collections.defaultdict(lambda: [0.0, 0])
        for r in outer:
            sums[key(r)][0] += r["seconds"]
            sums[key(r)][1] += 1
        print(f"\n| seconds | compiles | {title} |\n|---|---|---|")
        for label, (seconds, count) in sorted(sums.items(), key=lambda item: -item[1][0])[:15]:
            print(f"| {seconds:.1f} | {count} | {label or '(outside a test)'} |")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "compile_profile")
