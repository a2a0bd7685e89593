"""The training step and the run: order of operations, recipes, diagnostics, determinism, resume."""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import softfloat16 as sf
from sim.checkpoint import CheckpointError
from sim.tensor import gradients
from sim.train import Dataset, TrainConfig, Trainer

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TINY = TrainConfig(data="synthetic", hidden=(8,), batch_size=8, steps=6)


def run(config: TrainConfig, dataset: Dataset | None = None) -> Trainer:
    trainer = Trainer(config, dataset)
    trainer.run()
    return trainer


def tiny_inputs_dataset(scale: float) -> Dataset:
    """Four classes told apart by which feature is on; features of size ``scale``."""
    x = np.zeros((32, 4), np.float32)
    y = np.arange(32) % 4
    x[np.arange(32), y] = scale
    return Dataset(x, y, x[:8], y[:8])


def test_two_runs_give_the_same_bits():
    config = dataclasses.replace(TINY, optimizer="adam", clip=1.0)
    first, second = run(config), run(config)
    assert first.weights_sha256() == second.weights_sha256()
    assert first.log.per_step() == second.log.per_step()


def test_thread_count_does_not_change_the_bits(tmp_path):
    """NUMBA_NUM_THREADS=1 and 2, in fresh processes: same run digest, and the same bits from a
    matmul large enough for the row-parallel kernel."""
    script = (
        "import hashlib, json, sys, numpy as np, softfloat16 as sf, softfloat16.linalg as la\n"
        "from sim.cli import main\n"
        "flags = ['--data', 'synthetic', '--steps', '3', '--batch-size', '8', '--json', sys.argv[1]]\n"
        "assert main(['train', *flags]) == 0\n"
        "rng = np.random.default_rng(0)\n"
        "a, b = (sf.fp16.from_float(rng.standard_normal((128, 128))) for _ in range(2))\n"
        "print(json.load(open(sys.argv[1]))['weights_sha256'], hashlib.sha256(la.matmul(a, b, sf.fp16)).hexdigest())\n"
    )
    outputs = []
    for threads in ("1", "2"):
        env = {**os.environ, "NUMBA_NUM_THREADS": threads, "PYTHONPATH": ROOT}
        result = subprocess.run([sys.executable, "-c", script, str(tmp_path / f"{threads}.json")],
                                capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
        assert result.returncode == 0, result.stderr
        outputs.append(result.stdout.splitlines()[-1].split())
    assert outputs[0] == outputs[1] and len(outputs[0]) == 2


@pytest.mark.parametrize("config", [
    dataclasses.replace(TINY, optimizer="adam", clip=0.5, growth_interval=2),
    dataclasses.replace(TINY, precision="bf16", master_weights=False, loss_scale="static", scale=8.0),
])
def test_resume_is_bit_identical(tmp_path, config):
    whole = run(config)
    path = str(tmp_path / "state.npz")
    first_half = Trainer(config)
    first_half.run(until=3, checkpoint=path)
    resumed = Trainer.resume(path, config)
    assert resumed.step == 3
    resumed.run()
    assert resumed.weights_sha256() == whole.weights_sha256()
    assert resumed.log.per_step() == whole.log.per_step()
    assert resumed.scaler.state_dict() == whole.scaler.state_dict()
    assert resumed.batches.state_dict() == whole.batches.state_dict()
    for a, b in zip(resumed.optimizer.state_dict()[0].values(), whole.optimizer.state_dict()[0].values()):
        np.testing.assert_array_equal(a, b)


def test_truncated_or_mismatched_checkpoint_is_rejected(tmp_path):
    path = str(tmp_path / "state.npz")
    Trainer(TINY).save(path)
    data = open(path, "rb").read()
    truncated = str(tmp_path / "truncated.npz")
    with open(truncated, "wb") as file:
        file.write(data[: len(data) // 2])
    with pytest.raises(CheckpointError):
        Trainer.resume(truncated, TINY)
    with pytest.raises(ValueError, match="optimizer"):
        Trainer.resume(path, dataclasses.replace(TINY, optimizer="adam"))
    with pytest.raises(ValueError, match="beyond steps"):
        trainer = Trainer(TINY)
        trainer.run(until=2, checkpoint=path)
        Trainer.resume(path, dataclasses.replace(TINY, steps=1))


def test_overflowing_step_is_skipped_and_the_scale_backs_off():
    trainer = Trainer(dataclasses.replace(TINY, steps=1))  # scale 2**16 overflows FP16 here
    before = [p.copy() for p in trainer.params]
    (record,) = trainer.run()
    assert record.skipped and record.nonfinite_grads > 0 and record.scale == 2.0**16
    assert all((a == b).all() for a, b in zip(before, trainer.params))
    assert trainer.optimizer.steps == 0 and float(trainer.scaler.scale) == 2.0**15


def test_clip_before_unscale_reproduces_the_bug():
    config = dataclasses.replace(TINY, loss_scale="static", scale=1024.0, clip=100.0)
    right = run(config)  # true gradient norms here are about 6 to 9: the clip never fires
    wrong = run(dataclasses.replace(config, clip_before_unscale=True))
    # Same weights and batch at step 0: the buggy norm is the scaled one, 1024 times larger.
    assert wrong.log.records[0].grad_norm == 1024.0 * right.log.records[0].grad_norm
    assert wrong.log.clip_fraction() == 1.0 and right.log.clip_fraction() == 0.0
    clipped = wrong.log.records[0]
    assert clipped.clipped and clipped.grad_norm_clipped == pytest.approx(100.0, rel=1e-5)
    # ...and after unscaling, the step used a gradient of norm 100/1024 instead of about 8.
    assert wrong.weights_sha256() != right.weights_sha256()


def test_loss_scaling_prevents_underflow():
    """Inputs of 2**-24 make FP16 weight gradients underflow; a loss scale of 2**16 lifts them."""
    dataset = tiny_inputs_dataset(2.0**-24)
    config = TrainConfig(hidden=(4,), batch_size=8, steps=3, loss_scale="none")
    unscaled = run(config, dataset)
    scaled = run(dataclasses.replace(config, loss_scale="static", scale=2.0**16), dataset)
    fp32 = run(dataclasses.replace(config, precision="fp32"), dataset)
    assert unscaled.log.underflow_fraction()["fc1"] > 0.1
    assert scaled.log.underflow_fraction()["fc1"] == 0.0
    assert fp32.log.underflow_fraction() == {"fc1": 0.0, "fc2": 0.0}
    assert unscaled.log.records[0].subnormal_grads >= 0 and not unscaled.log.skipped_steps()


def test_master_weights_keep_updates_the_compute_format_would_swallow():
    config = dataclasses.replace(TINY, loss_scale="none", lr=1e-6, momentum=0.0, steps=2)
    master = run(config)
    plain = run(dataclasses.replace(config, master_weights=False))
    initial = Trainer(config).params
    assert plain.params[0].dtype == np.uint16
    assert master.log.swallowed_update_fraction()["fc1"] > 0.5
    assert any((a != b).any() for a, b in zip(master.params, initial))  # FP32 master moved
    unchanged = np.mean([(a == sf.convert(b, src=sf.fp32, dst=sf.fp16)).mean()
                         for a, b in zip(plain.params, initial)])
    assert unchanged > 0.5  # most FP16 weights did not move at all


def test_recipes_and_summary(tmp_path):
    for precision in ("fp32", "bf16"):
        trainer = run(dataclasses.replace(TINY, precision=precision, steps=2))
        assert trainer.params[0].dtype == np.uint32  # master weights
        summary = trainer.summary()
        json.dumps(summary, allow_nan=False)
        for key in ("config", "steps", "skipped_steps", "final_loss", "final_accuracy", "loss_scale_history",
                    "underflow_fraction", "swallowed_update_fraction", "clip_fraction", "weights_sha256"):
            assert key in summary
        assert summary["steps"] == 2 and len(summary["loss_scale_history"]) == 2
        digest = hashlib.sha256(b"".join(p.astype("<u4").tobytes() for p in trainer.params)).hexdigest()
        assert summary["weights_sha256"] == digest


def test_config_errors_and_notes():
    with pytest.raises(ValueError, match="scale"):
        TrainConfig(loss_scale="static").resolved()
    with pytest.raises(ValueError, match="clip"):
        TrainConfig(clip_before_unscale=True).resolved()
    with pytest.raises(ValueError, match="precision"):
        TrainConfig(precision="fp12").resolved()
    with pytest.raises(ValueError, match="'none'"):
        TrainConfig(loss_scale="none", scale=8.0).resolved()
    assert any("bf16" in note for note in TrainConfig(precision="bf16", master_weights=False).notes())


def test_diagnostics_observe_the_step_after_the_recipe():
    """train_step runs the recipe; the run log and then the observers measure the StepDetail."""
    trainer = Trainer(TrainConfig(precision="fp16", loss_scale="static", scale=1024.0, steps=2, batch_size=8,
                                  data="synthetic", hidden=(8,)))
    seen = []
    trainer.observers.append(seen.append)
    record = trainer.train_step()
    (detail,) = seen
    assert detail.record is record is trainer.log.records[-1]  # measured once, by the log, first
    reference = gradients(detail.scaled_loss, detail.leaves, promote_to=sf.fp32)
    assert all(np.array_equal(a, b) for a, b in zip(detail.grads_reference, reference))
    assert detail.step == record.step == 0 and not detail.skipped and detail.updates is not None
    assert [p is q for p, q in zip(detail.params_after, trainer.params)] == [True] * len(trainer.params)
    fp32 = Trainer(TrainConfig(precision="fp32", steps=1, batch_size=8, data="synthetic", hidden=(8,)))
    fp32.observers.append(seen.append)
    fp32.train_step()
    assert seen[-1].grads_reference is seen[-1].grads_low and seen[-1].record.underflow == [0, 0]
