"""The emulator's side is the trainer's own step; the reference's loop mirrors it (no torch needed)."""
import hashlib

import numpy as np
import pytest
from crosscheck_cases import BF16, FP16_DYNAMIC, STEPS, emulator_records, plan_for

import softfloat16 as sf
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
], ids=["fp16-dynamic", "fp16-adam-no-master", "fp32-sgd-decay", "bf16-adam-two-layers"])
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


def test_clipping_is_not_covered():
    with pytest.raises(UnsupportedConfig, match="clip"):
        Plan.from_config(TrainConfig(clip=1.0, data="synthetic", hidden=(4,)), 1)
