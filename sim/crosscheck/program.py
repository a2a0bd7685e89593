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
state ``final.params``. With ``--precision fp8`` each layer's ``<layer>.matmul`` is instead
``<layer>.input|weight.scale`` and ``.quantize``, then ``<layer>.matmul`` (a ``scaled_matmul``),
and its ``.backward`` is ``<layer>.grad_output.scale|quantize``, ``<layer>.dgrad``,
``<layer>.wgrad`` (see :class:`sim.gemm.Fp8Products`).

Not covered (:func:`check_supported` refuses them, naming the flag): ``--clip``, the
block-scaled recipes (``--precision mxfp8|nvfp4``) and ``--accumulate tensorcore``.
"""
from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np

from sim import trace
from sim.crosscheck.record import EmulatorBackend, OpRecord, Recorder, Val
from sim.gemm import Fp8Products, Products
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
    if config.precision in ("mxfp8", "nvfp4"):
        raise UnsupportedConfig(f"--precision {config.precision} (block-scaled products) is not covered by the "
                                "cross-check; fp8 (per-tensor scales) is")
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
    # fp8: per quantised tensor (fc1.input, fc1.weight, fc1.grad_output, ...), its fp8_scale
    # attributes (format, mode, margin, history length), as the trainer's Fp8Products has them
    fp8_scaling: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    product_attrs: dict[str, Any] = dataclasses.field(default_factory=dict)  # fp8: the scaled_matmul attributes
    # fp8 with --grad-rounding sr: per gradient tensor, the stochastic-rounding seed of each step
    sr_seeds: dict[str, list[int]] = dataclasses.field(default_factory=dict)

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
            **_fp8_plan(trainer.products, steps),
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


def _fp8_plan(products: Products, steps: int) -> dict[str, Any]:
    """The fp8 recipe's settings, from the trainer's own products object (nothing for other
    recipes); with stochastic rounding, the seeds it will use, as it derives them."""
    if not isinstance(products, Fp8Products):
        return {}
    sr_seeds: dict[str, list[int]] = {}
    if products.grad_rounding == "sr":
        gradients = [name for name in products.tensor_names if name.endswith(".grad_output")]
        sr_seeds = {name: [] for name in gradients}
        for step in range(steps):
            products.begin_step(step)
            for name in gradients:
                sr_seeds[name].append(products.seed_for(name, 0))  # one quantisation per tensor and step
    return {
        "fp8_scaling": {name: {"format": s.fmt.name, "mode": s.mode, "margin": s.margin, "length": s.length}
                        for name, s in products.scalings.items()},
        "product_attrs": products.accumulation.describe(),
        "sr_seeds": sr_seeds,
    }


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
