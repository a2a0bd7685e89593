"""Outputs of ``python -m sim`` are checked before any training, failures to write are one line
with exit status 2, and nothing half-written is left behind (no training work thrown away)."""
from __future__ import annotations

import errno
import os
import tempfile

import pytest

from sim import report
from sim.cli import main
from sim.train import Trainer

SMALL = ["train", "--data", "synthetic", "--batch-size", "8", "--steps", "2"]


def _unwritable_directory() -> str:
    """A directory no user, root included, can create files in (``os.access`` says yes to root)."""
    for candidate in ("/sys", "/proc"):
        try:
            with tempfile.NamedTemporaryFile(dir=candidate):
                pass
        except OSError:
            return candidate
    pytest.skip("no directory here refuses new files to this user")


@pytest.fixture
def no_training(monkeypatch):
    """Fail the test if anything starts training or the report's suite."""
    def refuse(*args, **kwargs):
        raise AssertionError("training started although an output cannot be written")
    monkeypatch.setattr(Trainer, "run", refuse)
    monkeypatch.setattr(report, "run_suite", refuse)


@pytest.mark.parametrize("flag", ["--json", "--checkpoint"])
def test_train_refuses_an_unwritable_output_before_training(flag, no_training, capsys):
    path = os.path.join(_unwritable_directory(), "run.out")
    assert main([*SMALL, flag, path]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{flag}: cannot write {path}: " in err and "Traceback" not in err


def test_train_refuses_a_directory_as_json(tmp_path, no_training, capsys):
    assert main([*SMALL, "--json", str(tmp_path)]) == 2
    assert "is a directory, not a file" in capsys.readouterr().err


def test_report_refuses_an_unwritable_directory_before_training(no_training, capsys):
    out = os.path.join(_unwritable_directory(), "sim-report")
    assert main(["report", "--out", out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--out: cannot write to directory {out}: " in err


def test_report_refuses_a_file_as_its_directory(tmp_path, no_training, capsys):
    existing = tmp_path / "afile.txt"
    existing.write_text("keep me")
    assert main(["report", "--out", str(existing)]) == 2
    assert f"--out: {existing} is a file, not a directory" in capsys.readouterr().err
    assert existing.read_text() == "keep me"


def test_report_options_work_without_the_subcommand(monkeypatch, tmp_path):
    called = []
    monkeypatch.setattr(report, "run", lambda args: called.append((args.out, args.steps)) or 0)
    assert main(["--out", str(tmp_path), "--steps", "7"]) == 0
    assert called == [(str(tmp_path), 7)]


def test_a_failed_report_write_leaves_nothing_behind(monkeypatch, tmp_path):
    """The disk fills up while the figures are drawn: no results.json, no half-written PNG, no
    temporary folder; the message names the file and the reason."""
    from sim.report import writing

    def full_disk(document, out):
        path = os.path.join(out, "fig_a.png")
        with open(path, "wb") as file:
            file.write(b"\x89PNG half")
        raise OSError(errno.ENOSPC, "No space left on device", path)

    monkeypatch.setattr(writing, "draw_figures", full_disk)
    with pytest.raises(OSError):
        report.write_report(str(tmp_path), {"recipes": {}})
    assert os.listdir(tmp_path) == []


def test_the_report_command_turns_a_write_failure_into_one_line(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(report, "run_suite", lambda recipes, workers, progress, scheduler=None: [])
    monkeypatch.setattr(report, "suite_document", lambda recipes, results, finer=None: {"recipes": {}})

    def failing(out, document, figures=True):
        raise OSError(errno.ENOSPC, "No space left on device", os.path.join(out, "results.json"))

    monkeypatch.setattr(report, "write_report", failing)
    out = tmp_path / "new"
    assert main(["report", "--out", str(out), "--no-figures", "--data", "synthetic", "--no-finer"]) == 2
    err = capsys.readouterr().err.splitlines()[-1]
    assert err == (f"python -m sim report: error: --out: cannot write {out / 'results.json'}: "
                   "No space left on device; nothing was written")


def test_resuming_from_a_file_that_is_not_a_checkpoint(tmp_path, capsys):
    text = tmp_path / "notes.npz"
    text.write_text("these are my notes\n")
    assert main(["train", "--resume", str(text)]) == 2
    err = capsys.readouterr().err
    assert "--resume: not a checkpoint" in err and "not an .npz archive" in err
    assert "pickle" not in err


def test_values_are_refused_in_the_users_terms(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--lr", "abc"])
    err = capsys.readouterr().err
    assert "argument --lr: must be a positive finite number, got 'abc'" in err and "_positive" not in err
