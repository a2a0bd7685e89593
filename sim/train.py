"""The training step and the run: recipes, loss scaling in the right order, diagnostics, resume.

Recipes (``precision``):

- ``fp32``: weights, forward, backward and optimizer in FP32.
- ``fp16`` / ``bf16`` (AMP "O2" style): FP32 master weights are cast to the compute format every
  step; forward and backward run in the compute format with FP32 accumulation in the matmuls;
  logits are cast to FP32 for the loss; the low-precision gradients are widened (exactly) to FP32
  and handed to the master copy. ``master_weights=False`` keeps the weights, the optimizer state
  and its arithmetic in the compute format instead.

One step, in this order (:meth:`Trainer.train_step`)::

    forward; backward of loss * scale          (compute format)
    found_inf = any inf/NaN gradient
    unscale once (* 1/scale, FP32)             } --clip-before-unscale swaps these two
    clip by global norm (FP32)                 }   to reproduce the classic bug
    optimizer step, unless found_inf
    scaler.update(found_inf)

With ``loss_scale="none"`` the scale is fixed at 1: a step with an inf/NaN gradient is still
skipped, so non-finite values never reach the weights.

Then the step's :class:`~sim.diagnostics.StepDetail` goes to observers, which measure and never
train: first the run log (:class:`~sim.diagnostics.RunLog`: underflow against the FP32 reference
backward, swallowed updates, ... into a ``StepRecord``), then :attr:`Trainer.observers`.
:class:`~sim.config.TrainConfig` lives in :mod:`sim.config` (importable from here too).
"""
from __future__ import annotations

import dataclasses
import hashlib
import math
import numbers
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import softfloat16 as sf
from sim import data as datasets
from sim import trace
from sim.checkpoint import load_checkpoint, save_checkpoint
from sim.config import DATASETS, PRECISIONS, TrainConfig, make_loss_scaler, make_optimizer
from sim.diagnostics import RunLog, StepDetail, StepRecord, accuracy, count_nonfinite
from sim.gemm import make_products
from sim.nn import MLP
from sim.optim import clip_grad_norm, global_norm
from sim.tensor import Tensor, cast, gradients, mean, scale, softmax_cross_entropy

__all__ = ["PRECISIONS", "Dataset", "StepDetail", "TrainConfig", "Trainer", "load_dataset"]

_CHECKPOINT_KIND = "sim-train"
# Fields that may differ between a run and the checkpoint it resumes from.
_RESUMABLE_CHANGES = ("steps",)


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Float32 features and int64 labels, split into train and test."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray

    @property
    def n_features(self) -> int:
        return self.x_train.shape[1]

    @property
    def n_classes(self) -> int:
        return int(max(self.y_train.max(), self.y_test.max())) + 1


def load_dataset(name: str, seed: int = 0) -> Dataset:
    """``digits`` (scikit-learn's 8x8 digits, 64 features, 10 classes, fixed split) or
    ``synthetic`` (600 samples of 64 features in 10 Gaussian-like blobs: fast, for tests).

    >>> load_dataset("synthetic").x_train.shape
    (480, 64)
    """
    if name == "digits":
        split = datasets.load_digits_split(seed=0)  # one fixed split for every run
    elif name == "synthetic":
        x, y = datasets.make_synthetic(600, n_features=64, n_classes=10, seed=0)
        split = datasets.split_dataset(x, y, seed=0)
    else:
        raise ValueError(f"data: unknown dataset {name!r}; accepted: {', '.join(DATASETS)}")
    return Dataset(*split)


class Trainer:
    """A run: model, parameters, optimizer, loss scaler, data order, step count and log.

    >>> trainer = Trainer(TrainConfig(precision="fp16", steps=2, batch_size=8, data="synthetic", hidden=(16,)))
    >>> # the first step overflows FP16 at the initial scale 2**16: skipped, and the scale backs off
    >>> [(r.step, r.skipped, r.scale) for r in trainer.run()]
    [(0, True, 65536.0), (1, False, 32768.0)]
    >>> len(trainer.weights_sha256())
    64
    """

    def __init__(self, config: TrainConfig, dataset: Dataset | None = None) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the scaler's warnings are reported by notes/CLI
            self.config = config = config.resolved()
        self.data = dataset if dataset is not None else load_dataset(config.data)
        self.model = MLP((self.data.n_features, *config.hidden, self.data.n_classes))
        self.compute = PRECISIONS[config.precision]
        self.param_format = sf.fp32 if config.master_weights else self.compute
        self.params = self.model.init_parameters(seed=config.seed, fmt=self.param_format, gain=config.init_gain)
        self.optimizer = make_optimizer(config, self.param_format)
        self.scaler = make_loss_scaler(config)
        self.batches = datasets.BatchIterator(len(self.data.y_train), config.batch_size, seed=config.seed)
        self.step = 0
        entries = [sum(int(np.prod(s)) for s in self.model.parameter_shapes[i:i + 2])
                   for i in range(0, len(self.params), 2)]
        self.products = make_products(config, self.model.layer_names)
        self.log = RunLog(self.model.layer_names, entries, self.products.tensor_names)
        # Called with a StepDetail after every step, after the run log: measurements, never training.
        self.observers: list[Callable[[StepDetail], None]] = []

    # --- one step ---------------------------------------------------------------------------

    def _forward(self, params: list[np.ndarray], x: np.ndarray, requires_grad: bool) -> tuple[list[Tensor], Tensor]:
        """Leaves (parameters in the compute format) and FP32 logits for a batch."""
        inputs = np.asarray(self.compute.from_float(x))
        if trace.active():
            features = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
            trace.op("from_float32", "input.to_compute", {"x": (features, "fp32")},
                     {"out": (inputs, self.compute.name)}, dst=self.compute.name)
        leaves = [Tensor(self._convert(p, self.param_format, self.compute, f"{name}.to_compute"), self.compute,
                         requires_grad) for name, p in zip(self.model.parameter_names, params)]
        self.products.training = requires_grad  # an evaluation pass leaves the amax histories alone
        logits = self.model.forward(Tensor(inputs, self.compute), leaves, self.products)
        return leaves, cast(logits, sf.fp32, name="logits.to_fp32")

    @staticmethod
    def _convert(bits: np.ndarray, src: sf.Format, dst: sf.Format, name: str) -> np.ndarray:
        """``bits`` in ``dst`` (one rounding; unchanged when the formats agree), traced as ``name``."""
        if src is dst:
            return bits
        out = np.asarray(sf.convert(bits, src=src, dst=dst))
        trace.op("convert", name, {"x": (bits, src.name)}, {"out": (out, dst.name)}, dst=dst.name)
        return out

    def train_step(self) -> StepRecord:
        """Run one training step and return its record (also appended to :attr:`log`).

        The recipe of the module docstring, and nothing else; the run log and then
        :attr:`observers` measure the step afterwards from its :class:`StepDetail`.
        """
        compute, f32 = self.compute, sf.fp32
        index = next(self.batches)
        labels = self.data.y_train[index]
        self.products.begin_step(self.step)
        leaves, logits = self._forward(self.params, self.data.x_train[index], requires_grad=True)
        loss = mean(softmax_cross_entropy(logits, labels, name="loss.cross_entropy"), name="loss.mean")
        loss_scale = self.scaler.scale
        scaled_loss = loss if float(loss_scale) == 1.0 else scale(loss, loss_scale, name="loss.scale")
        grads_low = gradients(scaled_loss, leaves)
        found_inf = any(count_nonfinite(g, compute) > 0 for g in grads_low)

        names = self.model.parameter_names
        grads = [self._convert(g, compute, f32, f"{name}.grad.to_fp32") for name, g in zip(names, grads_low)]
        if self.config.clip_before_unscale:  # the bug, on purpose: the threshold meets scaled gradients
            grads, norm, norm_clipped, clipped = self._clip(grads, found_inf)
            grads = self._unscale(grads, found_inf)
        else:
            grads = self._unscale(grads, found_inf)
            grads, norm, norm_clipped, clipped = self._clip(grads, found_inf)

        params_before, updates = self.params, None
        if not found_inf:
            grads = [self._convert(g, f32, self.param_format, f"{name}.grad.to_param") for name, g in zip(names, grads)]
            self.params, updates = self.optimizer.step(params_before, grads, names)
        skipped = self.scaler.update(found_inf)

        detail = StepDetail(
            step=self.step, loss=loss, scaled_loss=scaled_loss, logits=logits, labels=labels, leaves=leaves,
            loss_scale=loss_scale, compute=compute, param_format=self.param_format, grads_low=grads_low,
            grad_norm=norm, grad_norm_clipped=norm_clipped, clipped=clipped, skipped=skipped,
            params_before=params_before, updates=updates, params_after=None if updates is None else self.params,
            quantized=self.products.quantized, tensor_names=tuple(self.products.tensor_names),
            quantization=tuple(self.products.stats))
        self.step += 1
        for observer in (self.log, *self.observers):
            observer(detail)
        return detail.record

    def _unscale(self, grads: list[np.ndarray], found_inf: bool) -> list[np.ndarray]:
        """Multiply by 1/scale in FP32 (exact for a power-of-two scale); once per step."""
        self.scaler.mark_unscaled()
        inverse = self.scaler.inv_scale()
        unscaled = grads if float(inverse) == 1.0 else [np.asarray(sf.fp32.mul(g, inverse)) for g in grads]
        if trace.active():
            self._trace_unscale(inverse, grads, unscaled, found_inf)
        return unscaled

    def _trace_unscale(self, inverse: np.float32, grads: list[np.ndarray], unscaled: list[np.ndarray],
                       found_inf: bool) -> None:
        """Report the reciprocal and the unscale (with found_inf, as GradScaler's kernel yields it)."""
        scale, inverse = (np.asarray(v, dtype=np.float32).view(np.uint32) for v in (self.scaler.scale, inverse))
        trace.op("inv_scale", "loss_scale.inverse", {"scale": (scale, "fp32")}, {"inv": (inverse, "fp32")})
        names = self.model.parameter_names
        trace.op("unscale", "grads.unscale",
                 {**{n: (g, "fp32") for n, g in zip(names, grads)}, "inv_scale": (inverse, "fp32")},
                 {**{n: (g, "fp32") for n, g in zip(names, unscaled)}, "found_inf": (np.bool_(found_inf), "bool")})

    def _clip(self, grads: list[np.ndarray], found_inf: bool) -> tuple[list[np.ndarray], np.ndarray, np.ndarray, bool]:
        """(grads, norm before, norm after, fired). No clipping on a step that will be skipped."""
        if self.config.clip is None or found_inf:
            norm = global_norm(grads)
            return grads, norm, norm, False
        grads, norm, fired = clip_grad_norm(grads, self.config.clip)
        return grads, norm, (global_norm(grads) if fired else norm), fired

    # --- the run ------------------------------------------------------------------------------

    def run(
        self,
        until: int | None = None,
        on_step: Callable[[StepRecord], None] | None = None,
        checkpoint: str | None = None,
        checkpoint_every: int = 100,
    ) -> list[StepRecord]:
        """Train until ``self.step == until`` (default ``config.steps``); returns the new records.

        ``checkpoint``: save there every ``checkpoint_every`` steps, at the end, and when
        interrupted (Ctrl-C) before re-raising, so no finished step is lost.
        """
        until = self.config.steps if until is None else until
        records = []
        try:
            while self.step < until:
                records.append(self.train_step())
                if on_step is not None:
                    on_step(records[-1])
                if checkpoint is not None and self.step % checkpoint_every == 0 and self.step < until:
                    self.save(checkpoint)
        except KeyboardInterrupt:
            if checkpoint is not None:
                self.save(checkpoint)
            raise
        if checkpoint is not None:
            self.save(checkpoint)
        return records

    def evaluate(self, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
        """(mean loss, accuracy) of the current weights on ``x``, ``y`` in the run's precision.

        >>> trainer = Trainer(TrainConfig(steps=0, data="synthetic", hidden=(8,)))
        >>> loss, accuracy = trainer.evaluate(trainer.data.x_test, trainer.data.y_test)
        >>> 0.0 <= accuracy <= 1.0
        True
        """
        _, logits = self._forward(self.params, x, requires_grad=False)
        loss = mean(softmax_cross_entropy(logits, y))
        return float(sf.fp32.to_float(loss.data)), accuracy(logits, y)

    def master_weights(self) -> list[np.ndarray]:
        """The weights as FP32 bit arrays (the master copy; widened exactly without one)."""
        if self.param_format is sf.fp32:
            return list(self.params)
        return [np.asarray(sf.convert(p, src=self.param_format, dst=sf.fp32)) for p in self.params]

    def weights_sha256(self) -> str:
        """SHA-256 of the FP32 weight bytes (little-endian), parameters in model order."""
        sha = hashlib.sha256()
        for array in self.master_weights():
            sha.update(np.ascontiguousarray(array, dtype="<u4").tobytes())
        return sha.hexdigest()

    def summary(self, wall_seconds: float | None = None) -> dict[str, Any]:
        """The JSON report of the run (see docs/sim.md for every key)."""
        log = self.log
        test_loss, test_accuracy = self.evaluate(self.data.x_test, self.data.y_test)
        last = log.records[-1] if log.records else None
        return _finite_or_none({
            "config": self.config.to_dict(),
            "steps": self.step,
            "skipped_steps": log.skipped_steps(),
            "final_loss": last.loss if last else None,
            "final_accuracy": test_accuracy,
            "test_loss": test_loss,
            "loss_scale_history": [r.scale for r in log.records],
            "final_loss_scale": float(self.scaler.scale),
            "underflow_fraction": log.underflow_fraction(),
            "quantization": log.quantization_summary(),
            "swallowed_update_fraction": log.swallowed_update_fraction(),
            "clip_fraction": log.clip_fraction(),
            "weights_sha256": self.weights_sha256(),
            "layers": log.layer_names,
            "network": list(self.model.sizes),
            "per_step": log.per_step(),
            "wall_seconds": wall_seconds,
        })

    # --- checkpoints --------------------------------------------------------------------------

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(arrays, meta) holding the whole state: resuming from it continues bit-identically."""
        arrays = {f"param.{i}": p for i, p in enumerate(self.params)}
        optimizer_arrays, optimizer_meta = self.optimizer.state_dict()
        arrays.update({f"optimizer.{name}": a for name, a in optimizer_arrays.items()})
        meta = {
            "kind": _CHECKPOINT_KIND,
            "config": self.config.to_dict(),
            "step": self.step,
            "optimizer": optimizer_meta,
            "scaler": self.scaler.state_dict(),
            "products": self.products.state_dict(),
            "batches": self.batches.state_dict(),
            "log": self.log.state_dict(),
        }
        return arrays, meta

    def save(self, path: str) -> None:
        """Write the state to ``path`` atomically (see :mod:`sim.checkpoint`)."""
        save_checkpoint(path, *self.state_dict())

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` into this trainer, whose config must match the saved one
        (except ``steps``); ValueError naming the first problem, and nothing changes then."""
        if meta.get("kind") != _CHECKPOINT_KIND:
            raise ValueError(f"not a training checkpoint (kind {meta.get('kind')!r})")
        saved = TrainConfig.from_dict(meta["config"]).resolved()
        differences = [
            f"{name}: checkpoint has {getattr(saved, name)!r}, this run has {getattr(self.config, name)!r}"
            for name in (f.name for f in dataclasses.fields(TrainConfig))
            if name not in _RESUMABLE_CHANGES and getattr(saved, name) != getattr(self.config, name)
        ]
        if differences:
            raise ValueError("the checkpoint was made with another configuration: " + "; ".join(differences))
        step = meta.get("step")
        if isinstance(step, bool) or not isinstance(step, numbers.Integral) or step < 0:
            raise ValueError(f"checkpoint step must be a non-negative integer, got {step!r}")
        params = []
        for i, shape in enumerate(self.model.parameter_shapes):
            array = arrays.get(f"param.{i}")
            if array is None or array.shape != shape or array.dtype != self.param_format.dtype:
                raise ValueError(f"checkpoint parameter {i} is missing or is not {self.param_format.name}{shape}")
            params.append(array)
        expected = {f"param.{i}" for i in range(len(params))}
        optimizer_arrays = {k.split(".", 1)[1]: a for k, a in arrays.items() if k.startswith("optimizer.")}
        extra = set(arrays) - expected - {f"optimizer.{k}" for k in optimizer_arrays}
        if extra:
            raise ValueError(f"checkpoint has unexpected arrays {sorted(extra)}")
        # Load into fresh objects first, so a failure leaves this trainer as it was.
        optimizer = make_optimizer(self.config, self.param_format)
        optimizer.load_state_dict(optimizer_arrays, meta["optimizer"])
        for i, state in enumerate(next(iter(optimizer.state.values()), [])):
            if state.shape != params[i].shape:
                raise ValueError(f"optimizer state {i} has shape {state.shape}, expected {params[i].shape}")
        scaler = make_loss_scaler(self.config)
        scaler.load_state_dict(meta["scaler"])
        batches = datasets.BatchIterator(len(self.data.y_train), self.config.batch_size, seed=self.config.seed)
        batches.load_state_dict(meta["batches"])
        products = make_products(self.config, self.model.layer_names)
        products.load_state_dict(meta.get("products", {}))
        log = RunLog(self.log.layer_names, self.log.entries, self.log.tensor_names)
        log.load_state_dict(meta["log"])
        if len(log.records) != step or len(scaler.history) != step:
            raise ValueError(f"checkpoint is inconsistent: step {step}, {len(log.records)} log records")
        self.params, self.optimizer, self.scaler, self.batches, self.log, self.step, self.products = (
            params, optimizer, scaler, batches, log, step, products)

    @classmethod
    def resume(cls, path: str, config: TrainConfig, dataset: Dataset | None = None) -> Trainer:
        """A trainer restored from the checkpoint at ``path`` (CheckpointError, ValueError)."""
        arrays, meta = load_checkpoint(path)
        return cls.restore(arrays, meta, config, dataset, path=path)

    @classmethod
    def restore(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any], config: TrainConfig,
                dataset: Dataset | None = None, *, path: str = "checkpoint") -> Trainer:
        """A trainer restored from a checkpoint already read (``load_checkpoint(path)``), so that a
        caller that looked into it first reads and checks the file once; ``path`` names it in
        errors (ValueError)."""
        trainer = cls(config, dataset)
        try:
            trainer.load_state_dict(arrays, meta)
        except (KeyError, TypeError) as error:
            raise ValueError(f"{path}: malformed training checkpoint: {error!r}") from None
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
        if trainer.step > trainer.config.steps:
            raise ValueError(f"{path}: the checkpoint is at step {trainer.step}, beyond steps={trainer.config.steps}")
        return trainer


def _finite_or_none(value: Any) -> Any:
    """Strict JSON: non-finite floats become None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(v) for v in value]
    return value
