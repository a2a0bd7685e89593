"""``python -m sim report``: the suite on a tiny budget, its files, its determinism, and the CLI
wiring (report by default, crosscheck handed to its own module)."""
from __future__ import annotations

import io
import json
import sys
import types

import numpy as np
import pytest

import softfloat16 as sf
from sim import report
from sim.cli import main
from sim.report import suite
from sim.figures import FIGURES
from sim.train import Trainer

pytest.importorskip("matplotlib")

TINY = ["report", "--data", "synthetic", "--steps", "4"]


@pytest.fixture(scope="module")
def tiny_report(tmp_path_factory):
    """The whole suite on synthetic data, 4 steps per recipe, in one process."""
    out = tmp_path_factory.mktemp("report")
    assert main([*TINY, "--workers", "1", "--out", str(out)]) == 0
    return out


def test_report_table_json_and_every_figure_are_written(tiny_report, capsys):
    results = json.loads((tiny_report / "results.json").read_text())
    recipes = report.suite_recipes(steps=4, data="synthetic")
    assert list(results["recipes"]) == [r.key for r in recipes]
    keys = ("config", "steps", "skipped_steps", "final_loss", "final_accuracy", "test_loss", "loss_scale_history",
            "final_loss_scale", "underflow_fraction", "swallowed_update_fraction", "clip_fraction",
            "weights_sha256", "per_step", "skip_rate_early", "skip_rate_late")
    for run in results["recipes"].values():
        assert all(key in run for key in keys) and run["steps"] == 4
    text = (tiny_report / "report.md").read_text()
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| run | recipe"))
    rows = lines[start + 2:lines.index("", start)]
    assert [row.split("|")[1].strip() for row in rows] == [r.label for r in recipes]
    for name, _ in FIGURES.values():
        assert (tiny_report / name).stat().st_size > 1000 and f"]({name})" in text
    assert "### 1." in text and "**" in text  # claims with verdicts


def test_the_same_seed_gives_the_same_bytes_whatever_the_worker_count(tiny_report, tmp_path):
    assert main([*TINY, "--workers", "2", "--no-figures", "--out", str(tmp_path)]) == 0
    for name in ("results.json", "report.md"):
        assert (tmp_path / name).read_bytes() == (tiny_report / name).read_bytes(), name


def test_each_row_is_the_run_its_command_describes(tiny_report):
    """The printed command repeats the run: same weights (observers never touch training)."""
    results = json.loads((tiny_report / "results.json").read_text())
    recipe = report.suite_recipes(steps=4, data="synthetic")[4]  # no master weights, clipping
    trainer = Trainer(recipe.config)
    trainer.run()
    assert trainer.weights_sha256() == results["recipes"][recipe.key]["weights_sha256"]
    assert recipe.command().startswith("python -m sim train --precision fp16 --loss-scale dynamic")
    assert "--no-master-weights" in recipe.command()


def test_round_trip_probe_counts_are_consistent(tiny_report):
    probe = json.loads((tiny_report / "results.json").read_text())["recipes"]["fp16-static"]["diagnostics"]
    counts = probe["round_trip"]
    assert 0 < counts["recovered"] <= counts["underflowed"]
    assert counts["round_trip_exact"] == counts["unscale_exact"] == counts["recovered"]  # 1024 is a power of two
    assert counts["round_trip_exact_1000"] < counts["recovered"]
    differing = counts["differ_scaled_closer"] + counts["differ_plain_closer"]
    assert counts["identical"] + differing <= counts["both_nonzero"]


def test_skip_rates_use_the_stated_windows():
    assert report.skip_windows(500) == ((0, 100), (250, 500))
    assert suite._rate({0, 1, 2, 300}, (0, 100)) == 0.03 and suite._rate({0, 1, 2, 300}, (250, 500)) == 0.004


def test_the_collector_reads_true_gradients_and_lost_updates():
    """On a run without master weights, the lost-update count equals the updates that left an
    FP16 weight unchanged, recounted here independently."""
    config = report.suite_recipes(steps=2, data="synthetic")[4].config
    trainer = Trainer(config)
    collector = report.Collector(len(trainer.model.layer_names))
    seen = []
    trainer.observers += [collector, seen.append]
    trainer.run()
    lost = sum(int(np.count_nonzero((sf.fp16.to_float(u) != 0) & (a == b)))
               for d in seen if d.updates is not None for u, a, b in zip(d.updates, d.params_after, d.params_before))
    assert collector.updates_lost == lost
    assert sum(h.total + h.zeros for h in collector.grad_histograms) == 2 * sum(trainer.log.entries)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_bar_on_a_terminal_and_a_line_per_finished_run_in_a_log():
    """Steps arrive from the workers in any order; the bar counts all steps and finished runs, the
    log gets one line per finished run and no bar."""
    recipes = report.suite_recipes(steps=3, data="synthetic")[:2]
    terminal, log = _Terminal(), io.StringIO()
    for stream in (terminal, log):
        progress = report.SuiteProgress(recipes, stream)
        for index, step in [(0, 1), (1, 1), (1, 2), (0, 2), (1, 3), (0, 3)]:
            progress(index, step)
        progress.close()
    bar = terminal.getvalue()
    assert "6/6" in bar and "2/2 runs" in bar and "done at" not in bar
    assert [line.split(" done at ")[0] for line in log.getvalue().splitlines()] == [
        "[1/2] run 2 (fp16-none)", "[2/2] run 1 (fp32)"]


@pytest.mark.parametrize("flags, message", [
    (["--steps", "0"], "argument --steps: must be a positive integer, got 0"),
    (["--workers", "0"], "argument --workers: must be a positive integer, got 0"),
    (["--seed", "-1"], "argument --seed: must be a non-negative integer, got -1"),
    (["--steps", "ten"], "argument --steps: must be a positive integer, got 'ten'"),
])
def test_bad_report_arguments_name_the_argument_and_its_value(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_info:
        main(["report", *flags, "--out", str(tmp_path)])
    assert exit_info.value.code == 2 and message in capsys.readouterr().err


def test_no_arguments_runs_the_report(monkeypatch):
    called = []
    monkeypatch.setattr(report, "run", lambda args: called.append((args.out, args.steps)) or 0)
    assert main([]) == 0 and called == [("sim-report", report.DEFAULT_STEPS)]


def test_crosscheck_is_handed_its_own_arguments(monkeypatch, capsys):
    received = []
    fake = types.ModuleType("sim.crosscheck.cli")
    fake.main = lambda argv: received.append(argv) or 0
    monkeypatch.setitem(sys.modules, "sim.crosscheck.cli", fake)
    assert main(["crosscheck", "--device", "cpu", "--steps", "2"]) == 0
    assert received == [["--device", "cpu", "--steps", "2"]]
    monkeypatch.setitem(sys.modules, "sim.crosscheck.cli", None)  # as if the package were absent
    assert main(["crosscheck"]) == 2 and "not implemented yet" in capsys.readouterr().out
