"""The emulator's side is the trainer's own step; the reference's loop mirrors it (no torch needed)."""
import hashlib

import numpy as np
import pytest
from crosscheck_cases import BF16, FP8_DELAYED, FP8_STEPS, FP16_DYNAMIC, STEPS, emulator_records, plan_for

import softfloat16 as sf
from sim.crosscheck import cli
from sim.crosscheck.compare import compare_records, format_report
from sim.crosscheck.loop import run_training
from sim.crosscheck.program import Plan, UnsupportedConfig, record_trainer
from sim.crosscheck.record import EmulatorBackend, Recorder, replay
from sim.train import TrainConfig, Trainer


def _sha256(records) -> str:
    (final,) = [r for r in records if r.kind == "state"]
    sha = hashlib.sha256()
    for _, fmt, bits in final.outputs:
        wide = bits if fmt == "fp32" else sf.convert(bits, src=sf.format(fmt), dst=sf.fp32)
        sha.update(np.ascontiguousarray(wide, dtype="<u4").tobytes())
    return sha.hexdigest()


def _scales(records) -> list[float]:
    return [float(np.asarray(bits).view(np.float32)) for r in records if r.name == "loss.scale"
            for role, _, bits in r.inputs if role == "factor"]


@pytest.mark.parametrize("config", [FP16_DYNAMIC, BF16], ids=["fp16-dynamic", "bf16"])
def test_records_are_the_trainers_own_run(config):
    records = emulator_records(config)
    trainer = Trainer(TrainConfig(**{**config.to_dict(), "steps": STEPS, "hidden": config.hidden}))
    trainer.run()
    assert _sha256(records) == trainer.weights_sha256()
    used = [r.scale for r in trainer.log.records]
    if config.loss_scale == "dynamic":  # the scale op appears exactly when the trainer scaled
        assert _scales(records) == [s for s in used if s != 1.0]
        assert trainer.log.skipped_steps() and len(set(used)) > 2  # overflow, backoff and growth
    skipped = [r.step for r in records if r.name == "grads.unscale" and bool([b for role, _, b in r.outputs
                                                                            if role == "found_inf"][0])]
    assert skipped == trainer.log.skipped_steps()
    assert {r.impl for r in records} == {"sim", "data"}  # every op computed by sim itself


@pytest.mark.parametrize("overrides", [
    {"precision": "fp16", "loss_scale": "dynamic", "scale": 2.0**20, "growth_interval": 4},
    {"precision": "fp16", "optimizer": "adam", "master_weights": False, "loss_scale": "static", "scale": 1024.0},
    {"precision": "fp32", "optimizer": "sgd", "momentum": 0.0, "weight_decay": 0.01},
    {"precision": "bf16", "optimizer": "adam", "weight_decay": 0.001, "hidden": (8, 8)},
    {"precision": "fp8", "hidden": (8, 8), "amax_history": 3},
    {"precision": "fp8", "fp8_scaling": "current", "fp8_margin": 1, "optimizer": "adam"},
    {"precision": "fp8", "fp8_scaling": "none", "loss_scale": "dynamic", "scale": 2.0**20, "growth_interval": 4},
    {"precision": "fp8", "grad_rounding": "sr", "hidden": (8, 8)},
], ids=["fp16-dynamic", "fp16-adam-no-master", "fp32-sgd-decay", "bf16-adam-two-layers", "fp8-delayed-two-layers",
        "fp8-current-adam", "fp8-none-dynamic-loss-scale", "fp8-stochastic-gradients"])
def test_the_reference_loop_mirrors_the_trainer_op_for_op(overrides):
    """The loop the torch reference runs, run on the emulator's kinds instead, reproduces the
    trainer's own records: the same ops in the same order with the same roles, formats,
    attributes and bits. So torch's side is held to the trainer's step, not to a copy of it."""
    config = TrainConfig(**{"data": "synthetic", "hidden": (16,), "batch_size": 8, **overrides})
    plan = Plan.from_config(config, 12)
    recorder = Recorder(EmulatorBackend())
    run_training(recorder, plan)
    trained = record_trainer(plan)
    assert [r.key for r in recorder.records] == [r.key for r in trained]
    for mirrored, own in zip(recorder.records, trained):
        assert (mirrored.kind, mirrored.attrs) == (own.kind, own.attrs), own.label()
        for side in ("inputs", "outputs"):
            assert [(role, fmt, bits.dtype, bits.shape) for role, fmt, bits in getattr(mirrored, side)] == \
                   [(role, fmt, bits.dtype, bits.shape) for role, fmt, bits in getattr(own, side)], own.label()
    report = compare_records(recorder.records, trained)
    assert report.bit_identical, format_report(report)
    trainer = Trainer(config)
    trainer.run(until=12)
    assert _sha256(trained) == trainer.weights_sha256()


def test_replaying_the_emulator_on_itself_is_identical():
    plan, records = plan_for(FP16_DYNAMIC), emulator_records(FP16_DYNAMIC)
    replayed = replay(records, EmulatorBackend(), sources=lambda r: plan.source(r.name, r.step))
    report = compare_records(records, replayed, replay=True)
    assert report.bit_identical and len(report.results) == len(records) - 1  # all but the final state


@pytest.mark.parametrize("overrides, flag", [
    ({"clip": 1.0}, "--clip"),
    ({"precision": "mxfp8"}, "--precision mxfp8"),
    ({"precision": "nvfp4"}, "--precision nvfp4"),
    ({"precision": "fp8", "accumulate": "tensorcore"}, "--accumulate tensorcore"),
    ({"precision": "fp16", "accumulate": "tensorcore"}, "--accumulate tensorcore"),
    ({"precision": "mxfp8", "grad_rounding": "sr"}, "--precision mxfp8"),
], ids=["clip", "mxfp8", "nvfp4", "fp8-tensorcore", "fp16-tensorcore", "mxfp8-sr"])
def test_what_is_not_covered_is_refused_naming_the_flag(overrides, flag, capsys):
    config = TrainConfig(data="synthetic", hidden=(32,), **overrides)
    with pytest.raises(UnsupportedConfig, match=flag):
        Plan.from_config(config, 1)
    argv = [f"--{k.replace('_', '-')}={v}" for k, v in overrides.items()]
    assert cli.main([*argv, "--data", "synthetic", "--hidden", "32", "--steps", "1"]) == 2
    (message,) = capsys.readouterr().err.splitlines()  # one line, naming the flag
    assert flag in message and "not covered by the cross-check" in message


def test_fp8_scale_records_carry_the_whole_scaling_state():
    """Each fp8_scale op takes the tensor and the state before (history, previous scale) and gives
    the amax, the scale, its inverse and the history after: the next use's inputs are this one's
    outputs, so a reference that keeps its own state is held to sim's at every use."""
    plan = plan_for(FP8_DELAYED, FP8_STEPS)
    records = [r for r in emulator_records(FP8_DELAYED, FP8_STEPS) if r.name == "fc2.grad_output.scale"]
    assert len(records) == FP8_STEPS and records[0].attrs == plan.fp8_scaling["fc2.grad_output"]
    assert records[0].attrs == {"format": "fp8_e5m2", "mode": "delayed", "margin": 0, "length": 16}
    for before, after in zip(records, records[1:]):
        outputs, inputs = {r: b for r, _, b in before.outputs}, {r: b for r, _, b in after.inputs}
        assert np.array_equal(outputs["history"], inputs["history"])
        assert np.array_equal(outputs["scale"], inputs["previous"])
    final = {r: b for r, _, b in records[-1].outputs}
    assert final["history"].shape == (16,) and final["history"][-1] == final["amax"]
    scales = {float(np.asarray(b).view(np.float32)) for r in records for role, _, b in r.outputs if role == "scale"}
    assert len(scales) > 1 and all(s == 2.0 ** round(np.log2(s)) for s in scales)  # powers of two, and they move
