"""``python -m sim``: a smoke run on synthetic data, the JSON report, resume (the checkpoint read once,
each config resolved once), bad input, and the help texts."""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys

import pytest

import sim.cli
import sim.train
from sim import report
from sim.cli import _Progress, main
from sim.config import TrainConfig
from sim.diagnostics import StepRecord
from sim.report import sweep
from sim.report.finer.recipes import finer_recipes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SMALL = ["train", "--data", "synthetic", "--batch-size", "8"]
KEYS = ("config", "steps", "skipped_steps", "final_loss", "final_accuracy", "loss_scale_history",
        "underflow_fraction", "swallowed_update_fraction", "clip_fraction", "weights_sha256")


def test_smoke_run_writes_the_report(tmp_path):
    out = tmp_path / "run.json"
    env = {**os.environ, "PYTHONPATH": ROOT}
    result = subprocess.run([sys.executable, "-m", "sim", *SMALL, "--steps", "2", "--json", str(out)],
                            capture_output=True, text=True, env=env, cwd=str(tmp_path), timeout=300)
    assert result.returncode == 0, result.stderr
    report = json.loads(out.read_text())
    assert all(key in report for key in KEYS)
    assert report["steps"] == 2 and report["config"]["precision"] == "fp16"
    assert report["config"]["loss_scale"] == "dynamic" and len(report["loss_scale_history"]) == 2
    assert set(report["underflow_fraction"]) == {"fc1", "fc2", "fc3", "fc4"}
    assert len(report["weights_sha256"]) == 64 and "weights_sha256=" in result.stdout


def test_checkpoint_and_resume_match_an_uninterrupted_run(tmp_path, capsys):
    whole, part, resumed = (str(tmp_path / name) for name in ("whole.json", "part.json", "resumed.json"))
    state = str(tmp_path / "state.npz")
    flags = [*SMALL, "--precision", "bf16", "--optimizer", "adam", "--clip", "1"]
    assert main([*flags, "--steps", "4", "--json", whole]) == 0
    assert main([*flags, "--steps", "2", "--json", part, "--checkpoint", state]) == 0
    # Left-out flags come from the checkpoint; only --steps changes.
    assert main(["train", "--resume", state, "--steps", "4", "--json", resumed]) == 0
    first, second = (json.load(open(path)) for path in (whole, resumed))
    assert first["weights_sha256"] == second["weights_sha256"]
    assert first["per_step"] == second["per_step"] and second["config"]["optimizer"] == "adam"


def test_corrupt_checkpoint_is_rejected_and_nothing_is_written(tmp_path, capsys):
    state, out = tmp_path / "state.npz", tmp_path / "out.json"
    assert main([*SMALL, "--steps", "1", "--checkpoint", str(state)]) == 0
    data = state.read_bytes()
    state.write_bytes(data[:-100])
    assert main(["train", "--resume", str(state), "--steps", "3", "--json", str(out),
                 "--checkpoint", str(state)]) == 2
    assert "--resume" in capsys.readouterr().err
    assert not out.exists() and state.read_bytes() == data[:-100]
    assert main(["train", "--resume", str(tmp_path / "missing.npz")]) == 2
    state.write_bytes(data)
    assert main(["train", "--resume", str(state), "--optimizer", "adam"]) == 2
    assert "optimizer" in capsys.readouterr().err


@pytest.mark.parametrize("flags, message", [
    (["--loss-scale", "static"], "--scale"),
    (["--loss-scale", "none", "--scale", "8"], "'none'"),
    (["--loss-scale", "static", "--scale", "8", "--growth-interval", "10"], "--growth-interval"),
    (["--clip-before-unscale"], "--clip"),
    (["--optimizer", "adam", "--momentum", "0.5"], "--momentum"),
    (["--json", "/nonexistent-dir/run.json"], "directory does not exist"),
])
def test_bad_combinations_exit_2_with_a_message(flags, message, capsys):
    assert main(["train", *flags]) == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize("flags", [["--lr", "0"], ["--steps", "-1"], ["--precision", "fp64"], ["--scale", "inf"],
                                   ["--momentum", "1"], ["--momentum", "-0.1"], ["--weight-decay", "-1e-4"],
                                   ["--weight-decay", "nan"]])
def test_bad_values_are_refused_by_the_parser(flags, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["train", *flags])
    assert exit_info.value.code == 2


def test_warnings_and_notes(capsys):
    assert main([*SMALL, "--steps", "1", "--loss-scale", "static", "--scale", "1000"]) == 0
    assert "not a power of two" in capsys.readouterr().err
    assert main([*SMALL, "--steps", "1", "--precision", "bf16", "--no-master-weights"]) == 0
    assert "bf16 without master weights" in capsys.readouterr().err


def test_momentum_and_weight_decay_flags_reach_the_optimizer(tmp_path, capsys):
    """Different flags, different weights (fp32: no loss scale skips the first steps); the JSON
    report records them."""
    reports = []
    for flags in ([], ["--momentum", "0"], ["--weight-decay", "0.01"]):
        path = tmp_path / f"run{len(reports)}.json"
        assert main([*SMALL, "--precision", "fp32", "--steps", "3", "--json", str(path), *flags]) == 0
        reports.append(json.loads(path.read_text()))
    assert [r["config"]["momentum"] for r in reports] == [0.9, 0.0, 0.9]
    assert [r["config"]["weight_decay"] for r in reports] == [0.0, 0.0, 0.01]
    assert len({r["weights_sha256"] for r in reports}) == 3


def test_the_progress_bar_shows_on_a_terminal_only():
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    records = [StepRecord(step, 0.5, 1.0, 1024.0, step == 1, 1.0, 1.0, False, [0], [0], 0, 0) for step in range(3)]
    for stream in (Terminal(), io.StringIO()):
        progress = _Progress(0, 3, stream)
        for record in records:
            progress(record)
        progress.close()
        if stream.isatty():
            assert "3/3" in stream.getvalue() and "skipped 1" in stream.getvalue()
        else:
            assert stream.getvalue() == ""


def _counting(monkeypatch, owner, name, seen):
    """Replace ``owner.name`` by a wrapper that appends its first argument to ``seen``."""
    real = getattr(owner, name)

    def counted(first, *args, **kwargs):
        seen.append(first)
        return real(first, *args, **kwargs)

    monkeypatch.setattr(owner, name, counted)


def test_a_run_resolves_its_config_once(monkeypatch, capsys):
    checked = []
    _counting(monkeypatch, TrainConfig, "_check", checked)
    assert main([*SMALL, "--steps", "1"]) == 0
    assert len(checked) == 1


def test_resume_reads_the_checkpoint_once_and_resolves_each_config_once(tmp_path, monkeypatch, capsys):
    """The file is read and hash-checked once; the run's config (steps 3) is resolved once, and
    the checkpoint's own (steps 1) once, to compare the two."""
    state = str(tmp_path / "state.npz")
    assert main([*SMALL, "--steps", "1", "--checkpoint", state]) == 0
    reads, checked = [], []
    for module in (sim.cli, sim.train):  # each holds the name it imported
        _counting(monkeypatch, module, "load_checkpoint", reads)
    _counting(monkeypatch, TrainConfig, "_check", checked)
    assert main(["train", "--resume", state, "--steps", "3"]) == 0
    assert reads == [state]
    assert sorted(config.steps for config in checked) == [1, 3]


def test_the_help_shows_what_a_bare_command_takes(capsys):
    """``python -m sim --help`` lists the report's options (``python -m sim --out DIR`` runs the
    report), and the report's help counts its runs from the recipe definitions."""
    with pytest.raises(SystemExit):
        main(["--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "With no subcommand, python -m sim runs the report" in text
    for option in ("--out DIR", f"default ./{report.DEFAULT_OUT}", "--steps N", "--no-sweep", "--no-finer"):
        assert option in text
    suite = len(report.suite_recipes())
    sweep = len(report.sweep_recipes(report.sweep_cells(), report.DEFAULT_STEPS))
    finer = len(finer_recipes())
    assert f"run the report's {suite + sweep + finer} training runs" in text
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "nine" not in text
    assert f"Run the report's {suite + sweep + finer} training runs" in text
    assert f"suite ({suite} recipes)" in text and f"({sweep} runs of half the steps" in text
    assert f"({finer} runs and a GEMM sweep" in text


def test_the_help_counts_follow_the_grid(monkeypatch, capsys):
    """A different grid, a different count: the help is not a literal."""
    monkeypatch.setattr(report, "sweep_cells", lambda: sweep.sweep_cells()[:1])
    with pytest.raises(SystemExit):
        main(["report", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(3 runs of half the steps" in text
    assert f"Run the report's {len(report.suite_recipes()) + 3 + len(finer_recipes())} training runs" in text
