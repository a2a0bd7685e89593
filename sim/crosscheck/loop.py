"""The reference's training loop: :meth:`sim.train.Trainer.train_step`'s ops, spelled out for a
backend that is not sim itself.

The emulator's side of the cross-check is the trainer's own step, recorded through
:mod:`sim.trace` (:func:`sim.crosscheck.program.record_trainer`). The torch reference has no
trainer: :func:`run_training` drives it op by op, in the order and with the names the trainer
reports (the same casts, forward, loss, scaled backward in the order :func:`sim.tensor.gradients`
visits the graph, unscale, optimizer step, loss-scale update), each op computed by the backend's
kind. It also runs on the emulator's kinds (:class:`~sim.crosscheck.record.EmulatorBackend`), to
put the GEMMs under a tensor-core model, and a test runs it there against the trainer's own
records: same keys, same bits. For ``--precision fp8`` each product is the recipe of
:class:`sim.gemm.Fp8Products` (:class:`_Fp8Recipe`): scale, quantise, scaled product.
"""
from __future__ import annotations

import numpy as np

import softfloat16 as sf
from sim.crosscheck.program import Plan
from sim.crosscheck.record import Recorder, Val

__all__ = ["run_training"]


class _Fp8Recipe:
    """:class:`sim.gemm.Fp8Products`' ops on a backend. Each tensor's scaling state (its amax
    history and last scale, at first empty and 1) is the backend's own: one use's ``fp8_scale``
    outputs are the next use's inputs, as an optimizer's buffers are."""

    def __init__(self, ops: Recorder, plan: Plan) -> None:
        self.ops, self.plan = ops, plan
        self.state = {name: {"history": ops.constant(np.zeros(0, np.uint32), "fp32"),
                             "previous": ops.constant(sf.fp32.from_float(1.0), "fp32")}
                      for name in plan.fp8_scaling}

    def quantize(self, tensor: str, x: Val) -> tuple[Val, Val]:
        """``x`` scaled and cast to the tensor's FP8 format; returns it and the inverse scale."""
        attrs = self.plan.fp8_scaling[tensor]
        scale = self.ops.run("fp8_scale", f"{tensor}.scale", {"x": x, **self.state[tensor]}, **attrs)
        self.state[tensor] = {"history": scale["history"], "previous": scale["scale"]}
        seeds = self.plan.sr_seeds.get(tensor)  # stochastic rounding (gradients, --grad-rounding sr)
        q = self.ops.run("fp8_quantize", f"{tensor}.quantize", {"x": x, "scale": scale["scale"]},
                         dst=attrs["format"], rounding="rne" if seeds is None else "sr",
                         seed=None if seeds is None else seeds[self.ops.step])["out"]
        return q, scale["scale_inv"]

    def product(self, name: str, a: tuple[Val, Val], b: tuple[Val, Val]) -> Val:
        """``(a @ b) * a_inv * b_inv`` of two quantised operands (each the values and inverse scale)."""
        inputs = {"a": a[0], "b": b[0], "a_scale_inv": a[1], "b_scale_inv": b[1]}
        return self.ops.run("scaled_matmul", name, inputs, **self.plan.product_attrs)["out"]

    def forward(self, layer: str, h: Val, weight: Val) -> tuple[Val, tuple]:
        x, w = self.quantize(f"{layer}.input", h), self.quantize(f"{layer}.weight", weight)
        return self.product(f"{layer}.matmul", x, w), (x, w)

    def backward(self, layer: str, grad: Val, saved: tuple, need_x: bool) -> tuple[Val | None, Val]:
        """(dx, dw): the output gradient quantised once, meeting the forward's quantised weight
        (dgrad) and input (wgrad). ``.T`` is a layout change both numpy and torch spell alike."""
        (xq, x_inv), (wq, w_inv) = saved
        g = self.quantize(f"{layer}.grad_output", grad)
        dx = self.product(f"{layer}.dgrad", g, (Val(wq.data.T, wq.fmt), w_inv)) if need_x else None
        dw = self.product(f"{layer}.wgrad", (Val(xq.data.T, xq.fmt), x_inv), g)
        return dx, dw


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


def run_training(ops: Recorder, plan: Plan) -> list[Val]:
    """Run ``plan.steps`` training steps on ``ops``' backend; returns the final parameters."""
    ops.new_step(-1)
    init = ops.source("init.params", plan.source("init.params", -1))
    params = [init[name] for name in plan.parameter_names]
    scaler = ops.source("init.loss_scale", plan.source("init.loss_scale", -1))
    optimizer_state = _optimizer_state(ops, plan)
    fp8 = _Fp8Recipe(ops, plan) if plan.fp8_scaling else None
    for step in range(plan.steps):
        ops.new_step(step)
        batch = ops.source("batch", plan.source("batch", step))
        grads = _forward_backward(ops, plan, params, batch, scaler["scale"], fp8)
        params, optimizer_state, scaler = _update(ops, plan, params, grads, optimizer_state, scaler)
    ops.new_step(plan.steps)
    ops.state("final.params", dict(zip(plan.parameter_names, params)))
    return params


def _forward_backward(ops: Recorder, plan: Plan, params: list[Val], batch: dict[str, Val], scale: Val,
                      fp8: _Fp8Recipe | None) -> list[Val]:
    """Forward and the scaled backward of one batch: gradients in the compute format."""
    compute, names = plan.compute, plan.parameter_names
    h = ops.run("from_float32", "input.to_compute", {"x": batch["x"]}, dst=compute)["out"]
    if plan.param_format != compute:
        leaves = [ops.run("convert", f"{n}.to_compute", {"x": p}, dst=compute)["out"] for n, p in zip(names, params)]
    else:
        leaves = list(params)
    layers = []  # per layer: (input, matmul output, add_bias output, fp8: its quantised operands)
    for index, layer in enumerate(plan.layer_names):
        weight, bias = leaves[2 * index], leaves[2 * index + 1]
        if fp8 is not None:
            z, saved = fp8.forward(layer, h, weight)
        else:
            z, saved = ops.run("matmul", f"{layer}.matmul", {"a": h, "b": weight})["out"], None
        y = ops.run("add_bias", f"{layer}.add_bias", {"x": z, "bias": bias})["out"]
        layers.append((h, z, y, saved))
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
        layer, (h_in, z, y, saved) = plan.layer_names[index], layers[index]
        weight, bias = leaves[2 * index], leaves[2 * index + 1]
        if index != len(plan.layer_names) - 1:
            grad = ops.run("relu.backward", f"{layer}.relu.backward", {"grad": grad, "x": y})["grad_x"]
        out = ops.run("add_bias.backward", f"{layer}.add_bias.backward",
                      {"grad": grad, "x": z, "bias": bias}, requires=[True, True])
        grads[2 * index + 1], grad = out["grad_bias"], out["grad_x"]
        # The network's input needs no gradient: the first layer's dA is never computed.
        if fp8 is not None:
            grad, grads[2 * index] = fp8.backward(layer, grad, saved, need_x=index > 0)
        else:
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
        kind, attrs = f"{config.optimizer}_step", plan.optimizer_hyper
        new_params, new_state = [], []
        for name, param, grad, param_state in zip(names, params, grads, state):
            out = ops.run(kind, f"{name}.{kind}", {"param": param, "grad": grad, **param_state}, **attrs)
            new_params.append(out.pop("param"))
            new_state.append(out)
        params, state = new_params, new_state
    if plan.scaler_update is not None:
        scaler = ops.run("scaler_update", "loss_scale.update",
                         {"scale": scaler["scale"], "growth_tracker": scaler["growth_tracker"], "found_inf": found_inf},
                         **plan.scaler_update)
    return params, state, scaler
