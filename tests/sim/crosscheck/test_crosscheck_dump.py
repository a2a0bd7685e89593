"""Dump files: round trip, clear errors on damaged or foreign files, and a 1-ulp change in one op
found and named (no torch needed: the dumps here hold the emulator's own records)."""
import json
import os
import zipfile

import numpy as np
import pytest
from crosscheck_cases import FP16_DYNAMIC, STEPS, emulator_records, plan_for

from sim.checkpoint import load_checkpoint, save_checkpoint
from sim.crosscheck import cli
from sim.crosscheck.compare import compare_records, format_report
from sim.crosscheck.dump import DumpError, load_dump, save_dump
from sim.crosscheck.record import EmulatorBackend, replay
from sim.train import TrainConfig, Trainer

TARGET = (7, "fc1.matmul.backward")  # the op whose output gets the 1-ulp change


SHORT = 10  # steps of the dumps the command-line tests run against (each run repeats the emulator)


def _save(path, steps):
    save_dump(path, list(emulator_records(FP16_DYNAMIC, steps)), side="torch", mode="exact",
              config=FP16_DYNAMIC.to_dict(), steps=steps, device={"device": "cpu"}, settings={"nan_profile": "x86"})
    return path


@pytest.fixture(scope="module")
def dump_path(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("dumps") / "run.npz", STEPS)


@pytest.fixture(scope="module")
def short_dump_path(tmp_path_factory):
    return _save(tmp_path_factory.mktemp("dumps") / "short.npz", SHORT)


def test_round_trip_keeps_every_record(dump_path):
    dump = load_dump(dump_path)
    records = emulator_records(FP16_DYNAMIC)
    assert (dump.side, dump.mode, dump.steps, dump.settings) == ("torch", "exact", STEPS, {"nan_profile": "x86"})
    assert [r.key for r in dump.records] == [r.key for r in records]
    assert compare_records(dump.records, list(records)).bit_identical
    scalar = next(r for r in dump.records if r.name == "loss.mean")
    assert scalar.outputs[0][2].shape == ()  # 0-d values stay 0-d
    with np.load(dump_path, allow_pickle=False) as npz:  # an ordinary .npz, no pickle
        assert len(npz.files) < sum(len(r.inputs) + len(r.outputs) for r in records)  # shared arrays once


def _injected(dump_path, tmp_path):
    dump = load_dump(dump_path)
    record = next(r for r in dump.records if r.key == TARGET)
    role, fmt, bits = record.outputs[-1]
    bits = bits.copy()
    index = int(np.flatnonzero((bits & 0x7FFF) != 0)[0])  # a nonzero finite element
    bits.flat[index] += 1  # the next representable value away from zero: 1 ulp
    record.outputs[-1] = (role, fmt, bits)
    path = tmp_path / "injected.npz"
    save_dump(path, dump.records, side=dump.side, mode=dump.mode, config=dump.config, steps=dump.steps,
              device=dump.device, settings=dump.settings)
    return path, role


@pytest.mark.parametrize("replayed", [False, True], ids=["cascade", "replay"])
def test_a_one_ulp_change_is_the_first_divergence(dump_path, tmp_path, replayed):
    path, role = _injected(dump_path, tmp_path)
    device = load_dump(path).records
    plan = plan_for(FP16_DYNAMIC)
    emulator = replay(device, EmulatorBackend(), lambda r: plan.source(r.name, r.step)) if replayed \
        else list(emulator_records(FP16_DYNAMIC))
    report = compare_records(device, emulator, replay=replayed)
    first = report.first_divergence
    assert first is not None and first.key == TARGET and first.status == "unexpected"
    assert first.label == f"step {TARGET[0]} {TARGET[1]}"
    (diff,) = [d for d in first.outputs if d.differs]
    assert (diff.role, diff.elements - diff.identical, diff.max_ulp) == (role, 1, 1)
    assert [r.key for r in report.divergent] == [TARGET]  # nothing else differs
    assert report.unexpected == [first]
    text = format_report(report)
    assert f"first divergence: step {TARGET[0]} {TARGET[1]}" in text and "ulp distance 1" in text


@pytest.mark.parametrize("flags", [[], ["--replay"]], ids=["cascade", "replay"])
def test_cli_names_the_injected_op(short_dump_path, tmp_path, capsys, flags):
    path, _ = _injected(short_dump_path, tmp_path)
    assert cli.main(["--against", str(path), *flags]) == 1
    out = capsys.readouterr().out
    assert f"first divergence: step {TARGET[0]} {TARGET[1]} (matmul.backward" in out and "UNEXPECTED" in out
    assert cli.main(["--against", str(short_dump_path), *flags]) == 0
    assert "no divergence: every op of every step is bit-identical" in capsys.readouterr().out


def test_truncated_dump(dump_path, tmp_path, capsys):
    data = dump_path.read_bytes()
    for size in (len(data) // 2, len(data) - 10, 100):
        path = tmp_path / f"truncated{size}.npz"
        path.write_bytes(data[:size])
        with pytest.raises(DumpError, match="cannot read the cross-check dump.*(truncated or corrupt|corrupt)"):
            load_dump(path)
    assert cli.main(["--against", str(path)]) == 2
    assert "error: --against: cannot read the cross-check dump" in capsys.readouterr().err


def test_corrupt_bytes_fail_the_checksum(dump_path, tmp_path):
    data = bytearray(dump_path.read_bytes())
    with zipfile.ZipFile(dump_path) as archive:  # flip one byte inside the first array's data
        info = archive.infolist()[0]
    data[info.header_offset + 30 + len(info.filename) + info.extra.__len__() + 200] ^= 0x01
    path = tmp_path / "flipped.npz"
    path.write_bytes(bytes(data))
    with pytest.raises(DumpError, match="corrupt|checksum"):
        load_dump(path)


def _rewrite(dump_path, tmp_path, change):
    arrays, meta = load_checkpoint(dump_path)
    change(arrays, meta)
    path = tmp_path / "rewritten.npz"
    save_checkpoint(path, arrays, meta)
    return path


@pytest.mark.parametrize("change, message", [
    (lambda arrays, meta: meta.update(schema_version=2), "schema version 2; this code reads version 1"),
    (lambda arrays, meta: meta.update(kind="something-else"), "not a cross-check dump"),
    (lambda arrays, meta: meta.pop("ops"), r"metadata lacks \['ops'\]"),
    (lambda arrays, meta: meta["ops"][3].update(kind="warp_drive"), "unknown op kind 'warp_drive'"),
    (lambda arrays, meta: meta["ops"][3]["outputs"][0].__setitem__(1, "fp64"), "unknown format 'fp64'"),
    (lambda arrays, meta: arrays.pop(meta["ops"][3]["outputs"][0][2]), "is missing from the file"),
    (lambda arrays, meta: arrays.__setitem__(meta["ops"][3]["outputs"][0][2], np.zeros(3, np.float64)),
     "has dtype float64"),
    (lambda arrays, meta: arrays.__setitem__("extra", np.zeros(1, np.uint8)), "not referenced"),
], ids=["schema", "kind", "no-ops", "op-kind", "format", "missing-array", "dtype", "extra-array"])
def test_wrong_or_inconsistent_contents(dump_path, tmp_path, change, message):
    with pytest.raises(DumpError, match=message):
        load_dump(_rewrite(dump_path, tmp_path, change))


def test_a_training_checkpoint_is_not_a_dump(tmp_path, capsys):
    trainer = Trainer(TrainConfig(steps=0, data="synthetic", hidden=(4,)))
    path = tmp_path / "checkpoint.npz"
    trainer.save(str(path))
    with pytest.raises(DumpError, match="not a cross-check dump .*'sim-train'"):
        load_dump(path)
    path.write_text(json.dumps({"not": "a zip"}))
    assert cli.main(["--against", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not an .npz archive" in err and "pickle" not in err
    assert not os.path.exists(tmp_path / "missing.npz")
    assert cli.main(["--against", str(tmp_path / "missing.npz")]) == 2


def test_flags_must_agree_with_the_dump(short_dump_path, capsys):
    assert cli.main(["--against", str(short_dump_path), "--steps", "3", "--precision", "bf16"]) == 2
    err = capsys.readouterr().err
    assert f"--steps 3 (the dump has {SHORT})" in err and "--precision 'bf16' (the dump has 'fp16')" in err


def test_dump_of_the_emulator_side(short_dump_path, tmp_path, capsys):
    out = tmp_path / "emulator.npz"
    assert cli.main(["--against", str(short_dump_path), "--replay", "--dump", str(out)]) == 0
    dump = load_dump(out)
    assert dump.side == "emulator" and dump.settings["nan_profile"] == "ieee"
    assert len(dump.records) == len(emulator_records(FP16_DYNAMIC, SHORT)) - 1  # replay has no final state
    assert TrainConfig.from_dict(dump.config).growth_interval == FP16_DYNAMIC.growth_interval


def test_a_divergent_scalar_output_is_reported():
    """A 0-d output (the loss) that differs by 1 ulp in a library-mode op: the report names it
    (this crashed in diff_report with numpy's 'nonzero on 0d arrays')."""
    from sim.crosscheck.record import OpRecord

    def record(bits: int) -> OpRecord:
        return OpRecord(3, "loss.mean", "mean", "library:torch.mean", {}, [],
                        [("out", "fp32", np.array(bits, dtype=np.uint32))])

    report = compare_records([record(0x402CBFAF)], [record(0x402CBFB0)])
    text = format_report(report)
    assert [r.status for r in report.results] == ["expected"]
    assert "value: actual   0x402cbfb0" in text and "expected 0x402cbfaf" in text and "ulp distance 1" in text


def test_a_torch_trace_is_refused_by_name(dump_path, tmp_path, capsys):
    """The dump and softfloat16.torch's traces share one schema and reader; the kind tells them apart."""
    from softfloat16.optrace import TRACE_KIND, OpTrace, load_op_trace, save_op_trace

    dump = load_op_trace(dump_path)
    trace = tmp_path / "trace.npz"
    save_op_trace(trace, OpTrace(dump.ops[:3], "torch", "native", {}, {}, {}, kind=TRACE_KIND))
    with pytest.raises(DumpError, match="not a cross-check dump .*: a torch trace of softfloat16.torch.record"):
        load_dump(trace)
    assert cli.main(["--against", str(trace)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(trace) in err and "a torch trace" in err
