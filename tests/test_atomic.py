"""softfloat16.atomic and every writer that uses it: whole files or none, with the permissions of
a file ``open()`` creates (not mkstemp's owner-only 0600)."""
from __future__ import annotations

import os
import stat

import numpy as np
import pytest

from softfloat16.atomic import open_atomic


@pytest.fixture(params=[0o022, 0o027, 0o002], ids=lambda mask: f"umask{mask:03o}")
def umask(request):
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def mode_of(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def plain_mode(folder) -> int:
    """The mode of a new file written the ordinary way, in the same folder."""
    path = os.path.join(folder, "plain.txt")
    with open(path, "w") as f:
        f.write("x")
    return mode_of(path)


def write_with_open_atomic(path):
    with open_atomic(path, encoding="utf-8") as f:
        f.write("text\n")


def write_npz(path):
    from softfloat16.npzfile import save_npz
    save_npz(path, {"a": np.arange(3, dtype=np.uint16)}, {"step": 1})


def write_verify_checkpoint(path):
    from softfloat16.verify import verify
    verify("fp4_e2m1", "add", "rtz", exhaustive=True, workers=1, checkpoint=str(path))


def write_sim_text(path):
    from sim.arguments import write_text_atomically
    write_text_atomically(str(path), '{"done": true}\n')


WRITERS = {"open_atomic": write_with_open_atomic, "save_npz": write_npz,
           "verify checkpoint": write_verify_checkpoint, "sim write_text_atomically": write_sim_text}


@pytest.mark.parametrize("writer", WRITERS.values(), ids=WRITERS.keys())
def test_written_files_have_the_mode_of_a_plain_open(tmp_path, umask, writer):
    target = tmp_path / "out.file"
    writer(target)
    assert mode_of(target) == plain_mode(tmp_path) == 0o666 & ~umask
    assert sorted(os.listdir(tmp_path)) == ["out.file", "plain.txt"]   # no temporary file left


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path):
    target = tmp_path / "out.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with open_atomic(target) as f:
            f.write("new")
            raise RuntimeError("disk full")
    assert target.read_text() == "old" and os.listdir(tmp_path) == ["out.txt"]


def test_binary_writes_and_the_temporary_names(tmp_path, monkeypatch):
    seen = []
    real_replace = os.replace

    def replace(source, destination):
        seen.append(os.path.basename(source))
        real_replace(source, destination)
    monkeypatch.setattr(os, "replace", replace)
    with open_atomic(tmp_path / "a.bin", "wb") as f:
        f.write(b"\x00\x01")
    with open_atomic(tmp_path / "b.json", prefix=".verify-", suffix=".json") as f:
        f.write("{}")
    assert (tmp_path / "a.bin").read_bytes() == b"\x00\x01"
    assert seen[0].startswith(".a.bin.") and seen[0].endswith(".tmp")
    assert seen[1].startswith(".verify-") and seen[1].endswith(".json")


def test_only_write_modes_are_accepted(tmp_path):
    with pytest.raises(ValueError, match="mode: expected 'w' or 'wb', got 'a'"):
        with open_atomic(tmp_path / "x", "a"):
            pass
