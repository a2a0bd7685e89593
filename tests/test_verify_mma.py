"""``python -m softfloat16 verify-mma`` (softfloat16.verify_mma): the preset selection, the chunk
layout, the command on a few presets against MMA-Sim (skipped with its reason when mmasim is not
installed), one-line errors, a mismatch's exit status, and resuming from a checkpoint."""
from __future__ import annotations

import json

import pytest

from softfloat16 import mma_reference
from softfloat16.__main__ import main
from softfloat16.mma_presets import PRESETS
from softfloat16.mma_reference import KINDS, mmasim_missing
from softfloat16.verify_mma import MmaJob, arithmetic_key, chain_lengths, select_presets

needs_mmasim = pytest.mark.skipif(mmasim_missing() is not None, reason=str(mmasim_missing()))
# Three presets with k = 64: a K = 4096 chain is 64 instructions, so MMA-Sim runs them quickly.
FEW = "m16n8k64"
FAST = ["--only", FEW, "--cases", "140", "--workers", "1", "--no-progress"]


def test_the_default_selection_is_one_preset_per_arithmetic():
    names = select_presets()
    assert len({arithmetic_key(PRESETS[n]) for n in names}) == len(names)
    assert {arithmetic_key(p) for p in PRESETS.values()} == {arithmetic_key(PRESETS[n]) for n in names}
    assert select_presets(every=True) == list(PRESETS)
    assert "hopper.wgmma.m64n256k16.f32.f16.f16" in select_presets(["m64n256k16"])  # filtered, then deduplicated
    assert select_presets(["hopper", "wgmma"]) == select_presets(["hopper,wgmma"])


@pytest.mark.parametrize("name", ["volta.mma.m8n8k4.f32.f16.f16.f32", "cdna1.mfma.f32_32x32x1f32",
                                  "rtx_blackwell.mma.m16n8k64.kind::mxf4.block32.f32.e2m1.e2m1.f32.ue8m0"])
def test_chunks_cover_the_kinds_and_chains_and_reach_the_cases(name):
    k = PRESETS[name].k
    assert chain_lengths(PRESETS[name]) == tuple(sorted({k, 4 * k, 256, 4096}))
    for requested in (1, 140, 100_000):
        job = MmaJob(name, requested)
        assert {kind for kind, _ in job.chunks} == set(KINDS)
        assert all(chain % k == 0 for _, chain in job.chunks)
        assert requested <= job.cases < requested + len(job.chunks) * (job.shape[0] + 1)
    assert len({MmaJob(name).chunk_seed(c) for c in range(len(job.chunks))}) == len(job.chunks)


@needs_mmasim
def test_the_command_on_a_few_presets(capsys):
    assert main(["verify-mma", *FAST]) == 0
    out = capsys.readouterr().out.splitlines()
    names = select_presets([FEW])
    assert 2 <= len(names) <= 3
    for name in names:
        [row] = [line for line in out if line.split()[:1] == [name]]
        assert row.split()[1:] == [str(MmaJob(name, 140).cases), "0"]
    assert out[-2].startswith(f"total: {len(names)} presets, ") and out[-2].endswith(" 0 mismatches")


def test_a_preset_filter_that_matches_nothing_is_one_line(capsys):
    assert main(["verify-mma", "--only", "hopper,nosuchthing", "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert "no preset name contains 'hopper' and 'nosuchthing'" in err and "closest:" in err


def test_without_mmasim_one_line_and_status_2(capsys, monkeypatch):
    monkeypatch.setattr(mma_reference, "mmasim_missing", lambda: "mmasim unavailable: ModuleNotFoundError: no")
    assert main(["verify-mma", *FAST]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mmasim unavailable" in err[0] and 'pip install -e ".[crosscheck]"' in err[0]


def test_bad_numbers_are_usage_errors(capsys):
    for argv in (["--cases", "0"], ["--workers", "0"], ["--workers", "2", "--scheduler", "tcp://x:1"]):
        with pytest.raises(SystemExit) as error:
            main(["verify-mma", *argv])
        assert error.value.code == 2
    capsys.readouterr()


def test_a_mismatch_is_shown_and_exits_1(capsys, monkeypatch):
    monkeypatch.setattr(mma_reference, "mmasim_missing", lambda: None)

    def compare(name, rows, cols, k, kind, seed):  # MMA-Sim disagreeing on one element of one chunk
        bad = int(kind == "tiny" and k == 256)
        return rows * cols, bad, [dict(i=0, j=1, ours="0x0", mmasim="0x1", a=["0x0"] * k, b=["0x0"] * k,
                                       c="0x0")] * bad

    monkeypatch.setattr(mma_reference, "compare", compare)
    assert main(["verify-mma", *FAST[:2], "--cases", "10", "--workers", "1"]) == 1
    out = capsys.readouterr().out
    assert "tiny K=256 [0,1] of 1x1" in out and "ours 0x0, mmasim 0x1" in out and " a=" not in out
    assert f"total: 3 presets, {3 * MmaJob(select_presets([FEW])[0], 10).cases} dot products, 3 mismatches" in out


@needs_mmasim
def test_resume_from_a_checkpoint(tmp_path, capsys):
    path = tmp_path / "run.json"
    first, *others = select_presets([FEW])
    assert main(["verify-mma", "--only", first, *FAST[2:], "--checkpoint", str(path)]) == 0
    alone = capsys.readouterr().out
    chunks = len(MmaJob(first).chunks)
    state = json.loads(path.read_text())
    assert sorted(map(int, state["presets"][first]["chunks"])) == list(range(chunks))
    # An interrupted run: two chunks lost. The wider run redoes them and the other presets, nothing more.
    del state["presets"][first]["chunks"]["0"], state["presets"][first]["chunks"]["5"]
    path.write_text(json.dumps(state))
    assert main(["verify-mma", *FAST, "--checkpoint", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"chunks resumed from a checkpoint: {chunks - 2}" in out
    row = next(line.split() for line in alone.splitlines() if line.split()[:1] == [first])
    assert row in [line.split() for line in out.splitlines()]
    assert set(json.loads(path.read_text())["presets"]) == {first, *others}
    # Everything done: nothing runs again; another --cases is refused in one line.
    assert main(["verify-mma", *FAST, "--checkpoint", str(path)]) == 0
    assert f"chunks resumed from a checkpoint: {sum(len(MmaJob(n).chunks) for n in [first, *others])}" in \
        capsys.readouterr().out
    assert main(["verify-mma", *FAST[:2], "--cases", "99", "--checkpoint", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "records another run" in err[0]
