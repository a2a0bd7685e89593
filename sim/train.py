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
from sim.checkpoint import load_checkpoint, save_checkpoint
from sim.diagnostics import (
    RunLog,
    StepRecord,
    count_nonfinite,
    count_subnormal,
    count_swallowed,
    count_underflow,
)
from sim.nn import MLP
from sim.optim import SGD, Adam, clip_grad_norm, global_norm
from sim.scaler import DynamicLossScaler, LossScaler, StaticLossScaler
from sim.tensor import Tensor, cast, gradients, mean, scale, softmax_cross_entropy

__all__ = ["PRECISIONS", "Dataset", "StepDetail", "TrainConfig", "Trainer", "load_dataset"]

PRECISIONS = {"fp32": sf.fp32, "fp16": sf.fp16, "bf16": sf.bf16}
LOSS_SCALES = ("none", "static", "dynamic")
OPTIMIZERS = ("sgd", "adam")
DATASETS = ("digits", "synthetic")
DEFAULT_LR = {"sgd": 0.05, "adam": 1e-3}
_CHECKPOINT_KIND = "sim-train"
# Fields that may differ between a run and the checkpoint it resumes from.
_RESUMABLE_CHANGES = ("steps",)


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a run. ``None`` fields take a default that depends on others
    (see :meth:`resolved`): the loss scale is dynamic for fp16 and none otherwise, ``scale`` is
    2**16 for dynamic scaling, ``lr`` 0.05 for SGD and 1e-3 for Adam.

    >>> TrainConfig().resolved().loss_scale, TrainConfig(precision="bf16").resolved().loss_scale
    ('dynamic', 'none')
    """

    precision: str = "fp16"
    loss_scale: str | None = None
    scale: float | None = None
    growth_interval: int = 2000
    master_weights: bool = True
    clip: float | None = None
    clip_before_unscale: bool = False
    optimizer: str = "sgd"
    lr: float | None = None
    momentum: float = 0.9
    weight_decay: float = 0.0
    steps: int = 500
    batch_size: int = 32
    seed: int = 0
    data: str = "digits"
    hidden: tuple[int, ...] = (128, 128, 128)

    def resolved(self) -> TrainConfig:
        """This config with the defaults filled in and every field checked (ValueError)."""
        config = self
        if config.loss_scale is None:
            config = dataclasses.replace(config, loss_scale="dynamic" if config.precision == "fp16" else "none")
        if config.scale is None and config.loss_scale == "dynamic":
            config = dataclasses.replace(config, scale=2.0**16)
        if config.lr is None:
            config = dataclasses.replace(config, lr=DEFAULT_LR.get(config.optimizer, 0.0))
        config = dataclasses.replace(config, hidden=tuple(config.hidden))
        config._check()
        return config

    def _check(self) -> None:
        for name, allowed in (("precision", PRECISIONS), ("loss_scale", LOSS_SCALES),
                              ("optimizer", OPTIMIZERS), ("data", DATASETS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name}: unknown value {getattr(self, name)!r}; accepted: {', '.join(allowed)}")
        if self.loss_scale == "static" and self.scale is None:
            raise ValueError("static loss scaling needs a scale (--scale S, e.g. 1024)")
        if self.loss_scale == "none" and self.scale is not None:
            raise ValueError("a scale was given but the loss scale is 'none'; use static or dynamic")
        if self.scale is not None and not (_real(self.scale) and 0.0 < self.scale < math.inf):
            raise ValueError(f"scale must be a positive finite number, got {self.scale!r}")
        if not _integer(self.growth_interval) or self.growth_interval < 1:
            raise ValueError(f"growth_interval must be a positive integer, got {self.growth_interval!r}")
        if self.clip is not None and not (_real(self.clip) and 0.0 < self.clip < math.inf):
            raise ValueError(f"clip must be a positive finite number, got {self.clip!r}")
        if self.clip_before_unscale and self.clip is None:
            raise ValueError("clip_before_unscale reorders clipping, so it needs a clip threshold (--clip C)")
        if not (_real(self.lr) and 0.0 < self.lr < math.inf):
            raise ValueError(f"lr must be a positive finite number, got {self.lr!r}")
        for name in ("momentum", "weight_decay"):
            value = getattr(self, name)
            if not (_real(value) and 0.0 <= value < math.inf):
                raise ValueError(f"{name} must be a non-negative finite number, got {value!r}")
        for name, low in (("steps", 0), ("batch_size", 1), ("seed", 0)):
            value = getattr(self, name)
            if not _integer(value) or value < low:
                raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
        if not self.hidden or not all(_integer(h) and h >= 1 for h in self.hidden):
            raise ValueError(f"hidden must be one or more positive layer widths, got {self.hidden!r}")

    def notes(self) -> list[str]:
        """Legal but noteworthy choices, as sentences for the user."""
        notes = []
        if self.precision == "bf16" and not self.master_weights:
            notes.append(
                "bf16 without master weights: the weights keep 8 significant bits, so updates "
                "below half an ulp of a weight (about 0.4% of it) are lost"
            )
        if self.precision == "fp32" and not self.master_weights:
            notes.append("fp32 without master weights is the same as fp32: the weights are FP32 anyway")
        if self.precision == "bf16" and self.loss_scale != "none":
            notes.append("bf16 has FP32's exponent range; loss scaling is rarely needed with it")
        if self.clip_before_unscale and self.loss_scale == "none":
            notes.append("clip_before_unscale with no loss scale changes nothing (the scale is 1)")
        if self.optimizer == "adam" and not self.master_weights and self.precision == "fp16":
            notes.append("Adam's eps=1e-8 rounds to 0 in fp16: a zero second moment then gives NaN updates")
        return notes

    def to_dict(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "hidden": list(self.hidden)}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> TrainConfig:
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - names)
        if unknown:
            raise ValueError(f"unknown config field(s) {unknown}")
        values = dict(values)
        if "hidden" in values:
            values["hidden"] = tuple(values["hidden"])
        return cls(**values)


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


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


@dataclasses.dataclass(frozen=True)
class StepDetail:
    """Everything one step computed, handed to :attr:`Trainer.observers` after the step.

    Bit arrays, shared with the trainer: observers read them and never write. ``grads_low`` are
    the compute-format gradients of ``loss * loss_scale``; ``grads_reference`` the same backward
    in FP32 (for an fp32 run, the gradients themselves). ``updates`` (what the optimizer
    subtracted, in ``param_format``) and ``params_after`` are None on a skipped step. ``loss`` and
    ``leaves`` (the compute-format parameters) keep the step's graph, so an observer can run
    another backward pass on it.
    """

    record: StepRecord
    loss: Tensor
    leaves: list[Tensor]
    loss_scale: np.float32
    compute: sf.Format
    param_format: sf.Format
    grads_low: list[np.ndarray]
    grads_reference: list[np.ndarray]
    params_before: list[np.ndarray]
    updates: list[np.ndarray] | None
    params_after: list[np.ndarray] | None


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
        self.params = self.model.init_parameters(seed=config.seed, fmt=self.param_format)
        if config.optimizer == "sgd":
            self.optimizer: SGD | Adam = SGD(self.param_format, config.lr, config.momentum, config.weight_decay)
        else:
            self.optimizer = Adam(self.param_format, config.lr, weight_decay=config.weight_decay)
        self.scaler = self._make_scaler()
        self.batches = datasets.BatchIterator(len(self.data.y_train), config.batch_size, seed=config.seed)
        self.step = 0
        entries = [sum(int(np.prod(s)) for s in self.model.parameter_shapes[i:i + 2])
                   for i in range(0, len(self.params), 2)]
        self.log = RunLog(self.model.layer_names, entries)
        # Called with a StepDetail after every step: extra measurements, never training itself.
        self.observers: list[Callable[[StepDetail], None]] = []

    def _make_scaler(self) -> LossScaler:
        config = self.config
        if config.loss_scale == "dynamic":
            return DynamicLossScaler(init_scale=config.scale, growth_interval=config.growth_interval)
        return StaticLossScaler(config.scale if config.loss_scale == "static" else 1.0)

    # --- one step ---------------------------------------------------------------------------

    def _forward(self, params: list[np.ndarray], x: np.ndarray, requires_grad: bool) -> tuple[list[Tensor], Tensor]:
        """Leaves (parameters in the compute format) and FP32 logits for a batch."""
        leaves = [Tensor(self._to_compute(p), self.compute, requires_grad) for p in params]
        inputs = Tensor(np.asarray(self.compute.from_float(x)), self.compute)
        return leaves, cast(self.model.forward(inputs, leaves), sf.fp32)

    def _to_compute(self, bits: np.ndarray) -> np.ndarray:
        if self.param_format is self.compute:
            return bits
        return np.asarray(sf.convert(bits, src=self.param_format, dst=self.compute))

    def train_step(self) -> StepRecord:
        """Run one training step and return its record (also appended to :attr:`log`)."""
        config, compute, f32 = self.config, self.compute, sf.fp32
        index = next(self.batches)
        labels = self.data.y_train[index]
        leaves, logits = self._forward(self.params, self.data.x_train[index], requires_grad=True)
        loss = mean(softmax_cross_entropy(logits, labels))
        loss_scale = self.scaler.scale
        root = loss if float(loss_scale) == 1.0 else scale(loss, loss_scale)

        grads_low = gradients(root, leaves)
        layers = range(0, len(leaves), 2)
        if compute is f32:
            underflow = [0 for _ in layers]
            grads_reference = grads_low
        else:  # the same backward in FP32, from the same forward values
            grads_ref = grads_reference = gradients(root, leaves, promote_to=f32)
            underflow = [sum(count_underflow(grads_low[j], compute, grads_ref[j], f32) for j in (i, i + 1))
                         for i in layers]
        subnormal = sum(count_subnormal(g, compute) for g in grads_low)
        nonfinite = sum(count_nonfinite(g, compute) for g in grads_low)
        found_inf = nonfinite > 0

        grads = [np.asarray(sf.convert(g, src=compute, dst=f32)) if compute is not f32 else g for g in grads_low]
        if config.clip_before_unscale:  # the bug, on purpose: the threshold meets scaled gradients
            grads, norm, norm_clipped, clipped = self._clip(grads, found_inf)
            grads = self._unscale(grads)
        else:
            grads = self._unscale(grads)
            grads, norm, norm_clipped, clipped = self._clip(grads, found_inf)

        swallowed = [0 for _ in layers]
        old, updates = self.params, None
        if not found_inf:
            if self.param_format is not f32:
                grads = [np.asarray(sf.convert(g, src=f32, dst=self.param_format)) for g in grads]
            old = self.params
            self.params, updates = self.optimizer.step(old, grads)
            swallowed = [sum(count_swallowed(updates[j], old[j], self.param_format, compute) for j in (i, i + 1))
                         for i in layers]
        skipped = self.scaler.update(found_inf)

        record = StepRecord(
            step=self.step,
            loss=float(f32.to_float(loss.data)),
            accuracy=_accuracy(logits, labels),
            scale=float(loss_scale),
            skipped=bool(skipped),
            grad_norm=float(f32.to_float(norm)),
            grad_norm_clipped=float(f32.to_float(norm_clipped)),
            clipped=clipped,
            underflow=underflow,
            swallowed=swallowed,
            subnormal_grads=subnormal,
            nonfinite_grads=nonfinite,
        )
        self.log.append(record)
        self.step += 1
        if self.observers:
            detail = StepDetail(record, loss, leaves, loss_scale, compute, self.param_format, grads_low,
                                grads_reference, old, updates, None if updates is None else self.params)
            for observer in self.observers:
                observer(detail)
        return record

    def _unscale(self, grads: list[np.ndarray]) -> list[np.ndarray]:
        """Multiply by 1/scale in FP32 (exact for a power-of-two scale); once per step."""
        self.scaler.mark_unscaled()
        inverse = self.scaler.inv_scale()
        if float(inverse) == 1.0:
            return grads
        return [np.asarray(sf.fp32.mul(g, inverse)) for g in grads]

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
        return float(sf.fp32.to_float(loss.data)), _accuracy(logits, y)

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
        if not _integer(step) or step < 0:
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
        optimizer = type(self.optimizer)(self.param_format, **_optimizer_args(self.config))
        optimizer.load_state_dict(optimizer_arrays, meta["optimizer"])
        for i, state in enumerate(next(iter(optimizer.state.values()), [])):
            if state.shape != params[i].shape:
                raise ValueError(f"optimizer state {i} has shape {state.shape}, expected {params[i].shape}")
        scaler = self._make_scaler()
        scaler.load_state_dict(meta["scaler"])
        batches = datasets.BatchIterator(len(self.data.y_train), self.config.batch_size, seed=self.config.seed)
        batches.load_state_dict(meta["batches"])
        log = RunLog(self.log.layer_names, self.log.entries)
        log.load_state_dict(meta["log"])
        if len(log.records) != step or len(scaler.history) != step:
            raise ValueError(f"checkpoint is inconsistent: step {step}, {len(log.records)} log records")
        self.params, self.optimizer, self.scaler, self.batches, self.log, self.step = (
            params, optimizer, scaler, batches, log, step)

    @classmethod
    def resume(cls, path: str, config: TrainConfig, dataset: Dataset | None = None) -> Trainer:
        """A trainer restored from the checkpoint at ``path`` (CheckpointError, ValueError)."""
        arrays, meta = load_checkpoint(path)
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


def _optimizer_args(config: TrainConfig) -> dict[str, Any]:
    if config.optimizer == "sgd":
        return {"lr": config.lr, "momentum": config.momentum, "weight_decay": config.weight_decay}
    return {"lr": config.lr, "weight_decay": config.weight_decay}


def _accuracy(logits: Tensor, labels: np.ndarray) -> float:
    """Share of rows whose largest logit (first on ties) is the label; a NaN row counts wrong."""
    values = logits.value()
    if values.shape[0] == 0:
        return 0.0
    correct = (np.argmax(values, axis=1) == labels) & ~np.isnan(values).any(axis=1)
    return float(np.count_nonzero(correct)) / values.shape[0]


def _finite_or_none(value: Any) -> Any:
    """Strict JSON: non-finite floats become None, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite_or_none(v) for v in value]
    return value
