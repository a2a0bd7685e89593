"""The cross-checked run: its plan, and the emulator's side, which is the trainer's own step.

:class:`Plan` holds what both sides start from. :func:`record_trainer` runs a plain
:class:`~sim.train.Trainer` with a :mod:`sim.trace` tracer installed, so the emulator's records
are the ops the trainer itself ran: its tensor ops and their backward rules, conversions, unscale,
each parameter's optimizer step and the loss-scale update. The torch reference mirrors those ops
with its own code (:mod:`sim.crosscheck.loop`, :mod:`sim.crosscheck.reference`).

Not part of the cross-check: the underflow diagnostic's second (FP32) backward and the gradient
norm (diagnostics that do not change the weights), and gradient clipping (``--clip``: an exact
torch reference would need a sequential FMA chain over every gradient element).

Op names: ``input.to_compute``, ``<param>.to_compute``, ``<layer>.matmul|add_bias|relu``,
``logits.to_fp32``, ``loss.cross_entropy``, ``loss.mean``, ``loss.scale``, then each of those
with ``.backward`` (in backward order), ``<param>.grad.to_fp32``, ``loss_scale.inverse``,
``grads.unscale``, ``<param>.grad.to_param``, ``<param>.sgd_step|adam_step``,
``loss_scale.update``; the sources ``init.params``, ``init.loss_scale``, ``batch`` and the
state ``final.params``.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np

from sim import trace
from sim.crosscheck.record import EmulatorBackend, OpRecord, Recorder, Val
from sim.scaler import DynamicLossScaler
from sim.train import TrainConfig, Trainer, load_dataset

__all__ = ["Plan", "UnsupportedConfig", "check_supported", "record_trainer"]


class UnsupportedConfig(ValueError):
    """A training setting the cross-check does not reproduce."""


def check_supported(config: TrainConfig) -> None:
    """UnsupportedConfig, naming the flag, for a setting the cross-check does not reproduce.

    >>> check_supported(TrainConfig(clip=1.0))
    Traceback (most recent call last):
    sim.crosscheck.program.UnsupportedConfig: gradient clipping (--clip) is not covered by the cross-check
    """
    if config.clip is not None:
        raise UnsupportedConfig("gradient clipping (--clip) is not covered by the cross-check")
    if config.precision in ("fp8", "mxfp8", "nvfp4"):
        raise UnsupportedConfig(f"--precision {config.precision} is not covered by the cross-check yet")
    if config.accumulate != "fp32":
        raise UnsupportedConfig("--accumulate tensorcore is not covered by the cross-check")


@dataclasses.dataclass(frozen=True)
class Plan:
    """Everything both sides start from: the resolved config, the initial weights (bits), the
    data and the batch order of ``steps`` steps, all taken from a :class:`~sim.train.Trainer`
    so they are the emulator's own.

    >>> plan = Plan.from_config(TrainConfig(precision="bf16", data="synthetic", hidden=(4,), batch_size=2), steps=1)
    >>> plan.compute, plan.param_format, plan.parameter_names, plan.batches[0].shape
    ('bf16', 'fp32', ['fc1.weight', 'fc1.bias', 'fc2.weight', 'fc2.bias'], (2,))
    """

    config: TrainConfig
    steps: int
    parameter_names: list[str]
    layer_names: list[str]
    compute: str
    param_format: str
    init_params: list[np.ndarray]
    batches: list[np.ndarray]
    x_train: np.ndarray
    y_train: np.ndarray
    optimizer_hyper: dict[str, float]  # the trainer's optimizer's hyperparameters, as both sides use them
    init_scale: np.float32
    scaler_update: dict[str, Any] | None  # the dynamic scaler's factors and interval; None for a fixed scale

    @classmethod
    def from_config(cls, config: TrainConfig, steps: int) -> Plan:
        """The plan of ``steps`` steps of ``config`` (UnsupportedConfig for what is not covered)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = dataclasses.replace(config.resolved(), steps=steps)
        check_supported(config)
        trainer = Trainer(config, load_dataset(config.data))
        batches = [np.asarray(next(trainer.batches)) for _ in range(steps)]
        return cls(
            config=config,
            steps=steps,
            parameter_names=list(trainer.model.parameter_names),
            layer_names=list(trainer.model.layer_names),
            compute=trainer.compute.name,
            param_format=trainer.param_format.name,
            init_params=[np.asarray(p) for p in trainer.params],
            batches=batches,
            x_train=trainer.data.x_train,
            y_train=trainer.data.y_train,
            optimizer_hyper=dict(trainer.optimizer.hyper),
            init_scale=trainer.scaler.scale,
            scaler_update=trainer.scaler.update_factors() if isinstance(trainer.scaler, DynamicLossScaler) else None,
        )

    def source(self, name: str, step: int) -> dict[str, tuple[np.ndarray, str]]:
        """The values of source op ``name`` (at ``step``), {role: (bits, format)}."""
        if name == "init.params":
            return {n: (p, self.param_format) for n, p in zip(self.parameter_names, self.init_params)}
        if name == "init.loss_scale":
            return {"scale": (np.float32(self.init_scale).view(np.uint32), "fp32"),
                    "growth_tracker": (np.int32(0), "int32")}
        if name == "batch":
            index = self.batches[step]
            return {"x": (np.ascontiguousarray(self.x_train[index]).view(np.uint32), "fp32"),
                    "labels": (np.asarray(self.y_train[index], dtype=np.int64), "int64")}
        raise ValueError(f"unknown source {name!r}")


def record_trainer(plan: Plan) -> list[OpRecord]:
    """The emulator's records of ``plan``: a Trainer's own steps, every op reported by sim.

    >>> plan = Plan.from_config(TrainConfig(precision="bf16", data="synthetic", hidden=(4,), batch_size=2), steps=1)
    >>> [r.name for r in record_trainer(plan)][:5]
    ['init.params', 'init.loss_scale', 'batch', 'input.to_compute', 'fc1.weight.to_compute']
    """
    recorder = Recorder(EmulatorBackend())
    trainer = Trainer(plan.config)  # the plan's initial weights and batch order, by construction
    recorder.new_step(-1)
    for name in ("init.params", "init.loss_scale"):
        recorder.source(name, plan.source(name, -1))
    with trace.tracing(recorder.traced):
        for step in range(plan.steps):
            recorder.new_step(step)
            recorder.source("batch", plan.source("batch", step))
            trainer.train_step()
    recorder.new_step(plan.steps)
    recorder.state("final.params", {name: Val(p, plan.param_format)
                                    for name, p in zip(plan.parameter_names, trainer.params)})
    return recorder.records
