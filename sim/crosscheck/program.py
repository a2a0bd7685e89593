"""The training run as a sequence of named ops, written once for every backend.

:func:`run_training` is :meth:`sim.train.Trainer.train_step`'s recipe spelled out op by op: the
same casts, forward, loss, scaled backward (the order :func:`sim.tensor.gradients` visits the
graph), inf check, unscale, optimizer step and loss-scale update. The emulator and the torch
reference run this one function, each on its own backend, so both sides execute the same op
sequence with the same names by construction; a test checks that the emulator's run ends with
the same weights as a plain :class:`~sim.train.Trainer`.

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

import softfloat16 as sf
from sim.crosscheck.record import Recorder, Val
from sim.train import TrainConfig, Trainer, load_dataset

__all__ = ["Plan", "UnsupportedConfig", "run_training"]


class UnsupportedConfig(ValueError):
    """A training setting the cross-check does not reproduce."""


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

    @classmethod
    def from_config(cls, config: TrainConfig, steps: int) -> Plan:
        """The plan of ``steps`` steps of ``config`` (UnsupportedConfig for what is not covered)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            config = dataclasses.replace(config.resolved(), steps=steps)
        if config.clip is not None:
            raise UnsupportedConfig("gradient clipping (--clip) is not covered by the cross-check")
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
        )

    def source(self, name: str, step: int) -> dict[str, tuple[np.ndarray, str]]:
        """The values of source op ``name`` (at ``step``), {role: (bits, format)}."""
        if name == "init.params":
            return {n: (p, self.param_format) for n, p in zip(self.parameter_names, self.init_params)}
        if name == "init.loss_scale":
            scale = 1.0 if self.config.loss_scale == "none" else self.config.scale
            return {"scale": (np.float32(scale).view(np.uint32), "fp32"),
                    "growth_tracker": (np.int32(0), "int32")}
        if name == "batch":
            index = self.batches[step]
            return {"x": (np.ascontiguousarray(self.x_train[index]).view(np.uint32), "fp32"),
                    "labels": (np.asarray(self.y_train[index], dtype=np.int64), "int64")}
        raise ValueError(f"unknown source {name!r}")


def _optimizer_state(ops: Recorder, plan: Plan) -> list[dict[str, Val]]:
    """Per parameter, the optimizer state the first step sees."""
    fmt = sf.format(plan.param_format)
    if plan.config.optimizer == "sgd":
        return [{} for _ in plan.init_params]  # the momentum buffer appears with the first step
    one = np.asarray(fmt.from_float(1.0))
    return [{"exp_avg": ops.constant(np.zeros_like(p), plan.param_format),
             "exp_avg_sq": ops.constant(np.zeros_like(p), plan.param_format),
             "beta1_power": ops.constant(one, plan.param_format),
             "beta2_power": ops.constant(one, plan.param_format),
             "step": ops.constant(np.int64(0), "int64")} for p in plan.init_params]


def _optimizer_attrs(config: TrainConfig) -> dict[str, Any]:
    if config.optimizer == "sgd":
        return {"lr": config.lr, "momentum": config.momentum, "weight_decay": config.weight_decay}
    return {"lr": config.lr, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": config.weight_decay}


def run_training(ops: Recorder, plan: Plan) -> list[Val]:
    """Run ``plan.steps`` training steps on ``ops``' backend; returns the final parameters."""
    ops.new_step(-1)
    init = ops.source("init.params", plan.source("init.params", -1))
    params = [init[name] for name in plan.parameter_names]
    scaler = ops.source("init.loss_scale", plan.source("init.loss_scale", -1))
    optimizer_state = _optimizer_state(ops, plan)
    for step in range(plan.steps):
        ops.new_step(step)
        batch = ops.source("batch", plan.source("batch", step))
        grads = _forward_backward(ops, plan, params, batch, scaler["scale"])
        params, optimizer_state, scaler = _update(ops, plan, params, grads, optimizer_state, scaler)
    ops.new_step(plan.steps)
    ops.state("final.params", dict(zip(plan.parameter_names, params)))
    return params


def _forward_backward(ops: Recorder, plan: Plan, params: list[Val], batch: dict[str, Val], scale: Val) -> list[Val]:
    """Forward and the scaled backward of one batch: gradients in the compute format."""
    compute, names = plan.compute, plan.parameter_names
    h = ops.run("from_float32", "input.to_compute", {"x": batch["x"]}, dst=compute)["out"]
    if plan.param_format != compute:
        leaves = [ops.run("convert", f"{n}.to_compute", {"x": p}, dst=compute)["out"] for n, p in zip(names, params)]
    else:
        leaves = list(params)
    layers = []  # per layer: (input, matmul output, add_bias output)
    for index, layer in enumerate(plan.layer_names):
        weight, bias = leaves[2 * index], leaves[2 * index + 1]
        z = ops.run("matmul", f"{layer}.matmul", {"a": h, "b": weight})["out"]
        y = ops.run("add_bias", f"{layer}.add_bias", {"x": z, "bias": bias})["out"]
        layers.append((h, z, y))
        h = y if index == len(plan.layer_names) - 1 else ops.run("relu", f"{layer}.relu", {"x": y})["out"]
    logits = ops.run("cast", "logits.to_fp32", {"x": h}, dst="fp32")["out"]
    labels = batch["labels"]
    losses = ops.run("softmax_cross_entropy", "loss.cross_entropy", {"logits": logits, "labels": labels})["out"]
    loss = ops.run("mean", "loss.mean", {"x": losses})["out"]
    scaled = ops.to_float(scale) != 1.0  # as Trainer: a scale of exactly 1 adds no op
    if scaled:
        ops.run("scale", "loss.scale", {"x": loss, "factor": scale})

    grad = ops.constant(sf.fp32.from_float(1.0), "fp32")  # d root / d root
    if scaled:
        grad = ops.run("scale.backward", "loss.scale.backward", {"grad": grad, "x": loss, "factor": scale})["grad_x"]
    grad = ops.run("mean.backward", "loss.mean.backward", {"grad": grad, "x": losses})["grad_x"]
    grad = ops.run("softmax_cross_entropy.backward", "loss.cross_entropy.backward",
                   {"grad": grad, "logits": logits, "labels": labels})["grad_logits"]
    grad = ops.run("cast.backward", "logits.to_fp32.backward", {"grad": grad, "x": h}, dst="fp32")["grad_x"]
    grads: list[Val] = [None] * len(leaves)  # type: ignore[list-item]
    for index in reversed(range(len(plan.layer_names))):
        layer, (h_in, z, y) = plan.layer_names[index], layers[index]
        weight, bias = leaves[2 * index], leaves[2 * index + 1]
        if index != len(plan.layer_names) - 1:
            grad = ops.run("relu.backward", f"{layer}.relu.backward", {"grad": grad, "x": y})["grad_x"]
        out = ops.run("add_bias.backward", f"{layer}.add_bias.backward",
                      {"grad": grad, "x": z, "bias": bias}, requires=[True, True])
        grads[2 * index + 1], grad = out["grad_bias"], out["grad_x"]
        # The network's input needs no gradient: the first layer's dA is never computed.
        out = ops.run("matmul.backward", f"{layer}.matmul.backward",
                      {"grad": grad, "a": h_in, "b": weight}, requires=[index > 0, True])
        grads[2 * index], grad = out["grad_b"], out.get("grad_a")
    return grads


def _update(ops: Recorder, plan: Plan, params: list[Val], grads: list[Val], state: list[dict[str, Val]],
            scaler: dict[str, Val]) -> tuple[list[Val], list[dict[str, Val]], dict[str, Val]]:
    """Widen, find inf/NaN, unscale, step the optimizer unless skipped, update the scale."""
    config, names = plan.config, plan.parameter_names
    if plan.compute != "fp32":
        grads = [ops.run("convert", f"{n}.grad.to_fp32", {"x": g}, dst="fp32")["out"] for n, g in zip(names, grads)]
    inverse = ops.run("inv_scale", "loss_scale.inverse", {"scale": scaler["scale"]})["inv"]
    out = ops.run("unscale", "grads.unscale", {**dict(zip(names, grads)), "inv_scale": inverse})
    grads, found_inf = [out[n] for n in names], out["found_inf"]
    if not ops.to_bool(found_inf):
        if plan.param_format != "fp32":
            grads = [ops.run("convert", f"{n}.grad.to_param", {"x": g}, dst=plan.param_format)["out"]
                     for n, g in zip(names, grads)]
        kind, attrs = f"{config.optimizer}_step", _optimizer_attrs(config)
        new_params, new_state = [], []
        for name, param, grad, param_state in zip(names, params, grads, state):
            out = ops.run(kind, f"{name}.{kind}", {"param": param, "grad": grad, **param_state}, **attrs)
            new_params.append(out.pop("param"))
            new_state.append(out)
        params, state = new_params, new_state
    if config.loss_scale == "dynamic":
        scaler = ops.run("scaler_update", "loss_scale.update",
                         {"scale": scaler["scale"], "growth_tracker": scaler["growth_tracker"], "found_inf": found_inf},
                         growth_factor=2.0, backoff_factor=0.5, growth_interval=config.growth_interval)
    return params, state, scaler
