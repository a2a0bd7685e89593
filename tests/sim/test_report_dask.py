"""``python -m sim report --scheduler``: the suite's runs as tasks on a Dask cluster give the same
results as local worker processes; an unreachable scheduler is one line and exit status 2."""
from __future__ import annotations

import subprocess
import sys

import pytest

from sim.report.runner import run_suite
from sim.report.scaling.recipes import suite_recipes


def test_runs_on_a_dask_cluster_equal_the_local_runs():
    distributed = pytest.importorskip("distributed")
    recipes = suite_recipes(steps=3, data="synthetic", batch_size=8)[:3]
    local = run_suite(recipes, workers=1)
    seen = []
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster:
        remote = run_suite(recipes, on_progress=lambda index, steps: seen.append((index, steps)),
                           scheduler=cluster.scheduler_address)
    assert remote == local  # weights_sha256, curves, diagnostics: everything
    assert sorted(seen) == [(0, 3), (1, 3), (2, 3)]


def test_an_unreachable_scheduler_is_one_line_and_status_2(tmp_path):
    pytest.importorskip("distributed")
    done = subprocess.run([sys.executable, "-m", "sim", "report", "--scheduler", "tcp://127.0.0.1:9",
                           "--data", "synthetic", "--steps", "2", "--no-figures", "--out", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert lines[-1].startswith("python -m sim report: error: cannot reach the Dask scheduler at tcp://127.0.0.1:9")
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out" / "report.md").exists()
