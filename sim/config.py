"""Everything that determines a training run, and the one place that turns it into objects.

:class:`TrainConfig` holds the settings (``python -m sim train``'s flags, :mod:`sim.arguments`);
:func:`make_optimizer` and :func:`make_loss_scaler` build the optimizer and the loss scaler a
config asks for. The trainer, its checkpoint loader and the cross-check all build them here, so a
hyperparameter has one spelling.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

import softfloat16 as sf
from sim.optim import SGD, Adam
from sim.scaler import DynamicLossScaler, LossScaler, StaticLossScaler

__all__ = [
    "ACCUMULATIONS", "BLOCK_SIZES", "DATASETS", "DEFAULT_LR", "FP8_SCALINGS", "GRAD_ROUNDINGS", "LOSS_SCALES",
    "LOW_PRECISIONS", "OPTIMIZERS", "PRECISIONS", "TrainConfig", "make_loss_scaler", "make_optimizer",
]

# precision -> the format of the tensors between the matrix products. The FP8 and block-scaled
# recipes keep those in FP32 and quantise only the operands of each product (sim.gemm).
PRECISIONS = {"fp32": sf.fp32, "fp16": sf.fp16, "bf16": sf.bf16, "fp8": sf.fp32, "mxfp8": sf.fp32, "nvfp4": sf.fp32}
LOW_PRECISIONS = ("fp8", "mxfp8", "nvfp4")  # quantised products, FP32 elsewhere
FP8_SCALINGS = ("delayed", "current", "none")
GRAD_ROUNDINGS = ("rne", "sr")
ACCUMULATIONS = ("fp32", "tensorcore")
BLOCK_SIZES = {"mxfp8": 32, "nvfp4": 16}
DEFAULT_AMAX_HISTORY = 16
MAX_AMAX_HISTORY = 1024
MAX_FP8_MARGIN = 16
LOSS_SCALES = ("none", "static", "dynamic")
OPTIMIZERS = ("sgd", "adam")
DATASETS = ("digits", "synthetic")
DEFAULT_LR = {"sgd": 0.05, "adam": 1e-3}
# The attribute that marks a config returned by TrainConfig.resolved (dataclasses.replace makes a
# new, unmarked config, resolved again when asked).
_RESOLVED = "_resolved"


@dataclasses.dataclass(frozen=True)
class TrainConfig:
    """Everything that determines a run. ``None`` fields take a default that depends on others
    (see :meth:`resolved`): the loss scale is dynamic for fp16 and none otherwise, ``scale`` is
    2**16 for dynamic scaling, ``lr`` 0.05 for SGD and 1e-3 for Adam; for ``fp8``, delayed
    scaling with an amax history of 16 and margin 0; for ``fp8``/``mxfp8``/``nvfp4``, RNE
    gradients and the format's block size (32, 16); for tensor-core accumulation, the H100
    model (16 products per block, 25 fraction bits) without promotion.

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
    init_gain: float = 1.0  # multiplies the He-uniform bound of every weight
    fp8_scaling: str | None = None
    amax_history: int | None = None
    fp8_margin: int | None = None
    grad_rounding: str | None = None
    block_size: int | None = None
    accumulate: str = "fp32"
    tc_block: int | None = None
    tc_fraction_bits: int | None = None
    promote_every: int | None = None

    def resolved(self) -> TrainConfig:
        """This config with the defaults filled in and every field checked (ValueError). A config
        this method returned is already resolved: resolving it again returns it as it is, without
        checking it twice (so a resolved config can be handed on, to :class:`sim.train.Trainer`
        say, at no cost).

        >>> config = TrainConfig(precision="bf16").resolved()
        >>> config.resolved() is config, dataclasses.replace(config, steps=3).resolved() is config
        (True, False)
        """
        if self.__dict__.get(_RESOLVED):
            return self
        config = self
        if config.loss_scale is None:
            config = dataclasses.replace(config, loss_scale="dynamic" if config.precision == "fp16" else "none")
        if config.scale is None and config.loss_scale == "dynamic":
            config = dataclasses.replace(config, scale=2.0**16)
        if config.lr is None:
            config = dataclasses.replace(config, lr=DEFAULT_LR.get(config.optimizer, 0.0))
        config = dataclasses.replace(config, hidden=tuple(config.hidden))
        config._check_low_precision()  # before defaults: a flag given where it does not apply is an error
        defaults: dict[str, Any] = {}
        if config.precision == "fp8":
            defaults["fp8_scaling"] = "delayed"
        if config.precision in LOW_PRECISIONS:
            defaults["grad_rounding"] = "rne"
        if config.precision in BLOCK_SIZES:
            defaults["block_size"] = BLOCK_SIZES[config.precision]
        if config.accumulate == "tensorcore":
            defaults.update(tc_block=16, tc_fraction_bits=25)
        config = dataclasses.replace(config, **{k: v for k, v in defaults.items() if getattr(config, k) is None})
        scaled = config.fp8_scaling in ("delayed", "current")
        if config.amax_history is None and config.fp8_scaling == "delayed":
            config = dataclasses.replace(config, amax_history=DEFAULT_AMAX_HISTORY)
        if config.fp8_margin is None and scaled:
            config = dataclasses.replace(config, fp8_margin=0)
        config._check()
        object.__setattr__(config, _RESOLVED, True)  # not a field: ==, hash, to_dict and replace ignore it
        return config

    def _check_low_precision(self) -> None:
        """The FP8 / block-scaling / accumulation flags: where they apply and their ranges."""
        if self.precision not in PRECISIONS:
            return  # _check names the unknown precision
        for name, flag, applies in (
                ("fp8_scaling", "--fp8-scaling", self.precision == "fp8"),
                ("amax_history", "--amax-history", self.precision == "fp8" and self.fp8_scaling in (None, "delayed")),
                ("fp8_margin", "--fp8-margin", self.precision == "fp8" and self.fp8_scaling != "none"),
                ("grad_rounding", "--grad-rounding", self.precision in LOW_PRECISIONS),
                ("block_size", "--block-size", self.precision in BLOCK_SIZES),
                ("tc_block", "--tc-block", self.accumulate == "tensorcore"),
                ("tc_fraction_bits", "--tc-fraction-bits", self.accumulate == "tensorcore"),
                ("promote_every", "--promote-every", self.accumulate == "tensorcore")):
            if getattr(self, name) is not None and not applies:
                raise ValueError(f"{flag} {_requirement(name, self)}")
        for name, allowed in (("fp8_scaling", FP8_SCALINGS), ("grad_rounding", GRAD_ROUNDINGS),
                              ("accumulate", ACCUMULATIONS)):
            value = getattr(self, name)
            if value is not None and value not in allowed:
                raise ValueError(f"--{name.replace('_', '-')}: unknown value {value!r}; accepted: {', '.join(allowed)}")
        if self.accumulate == "tensorcore" and self.precision in BLOCK_SIZES:
            raise ValueError(f"--accumulate tensorcore applies to fp32, fp16, bf16 and fp8; {self.precision} "
                             "products are summed per block as softfloat16.mx.matmul defines")
        for name, low, high in (("amax_history", 1, MAX_AMAX_HISTORY), ("fp8_margin", 0, MAX_FP8_MARGIN),
                                ("block_size", 1, 1024), ("tc_block", 1, 1024), ("tc_fraction_bits", 1, 50),
                                ("promote_every", 1, 1 << 20)):
            value = getattr(self, name)
            if value is not None and not (_integer(value) and low <= value <= high):
                raise ValueError(f"--{name.replace('_', '-')} must be an integer in [{low}, {high}], got {value!r}")
        if self.promote_every is not None and self.promote_every % (self.tc_block or 16):
            raise ValueError(f"--promote-every must be a multiple of --tc-block ({self.tc_block or 16}: the tensor "
                             f"core adds whole blocks), got {self.promote_every}")

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
        if not (_real(self.init_gain) and 0.0 < self.init_gain < math.inf):
            raise ValueError(f"init_gain must be a positive finite number, got {self.init_gain!r}")
        if self.block_size is not None and self.precision in BLOCK_SIZES and _integer(self.block_size):
            bad = [h for h in self.hidden if _integer(h) and h % self.block_size]
            if bad:
                raise ValueError(f"--block-size {self.block_size} does not divide the layer width {bad[0]} "
                                 f"(--hidden): {self.precision} blocks run along every layer's width")
        if self.precision in LOW_PRECISIONS and not self.master_weights:
            raise ValueError(f"--no-master-weights applies to fp16 and bf16: {self.precision} keeps FP32 weights and "
                             "quantises a copy for each product")

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


def _requirement(name: str, config: TrainConfig) -> str:
    """Why flag ``name`` does not apply to ``config``: 'only applies to ...'."""
    if name in ("fp8_scaling",):
        return f"only applies to --precision fp8, not {config.precision}"
    if name == "amax_history":
        if config.precision != "fp8":
            return f"only applies to --precision fp8, not {config.precision}"
        return f"only applies to --fp8-scaling delayed, not {config.fp8_scaling}"
    if name == "fp8_margin":
        if config.precision != "fp8":
            return f"only applies to --precision fp8, not {config.precision}"
        return "only applies to --fp8-scaling delayed or current, not none"
    if name == "grad_rounding":
        return f"only applies to --precision fp8, mxfp8 or nvfp4, not {config.precision}"
    if name == "block_size":
        return f"only applies to --precision mxfp8 or nvfp4, not {config.precision}"
    return f"only applies to --accumulate tensorcore, not {config.accumulate}"


def _real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _integer(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)



def make_optimizer(config: TrainConfig, fmt: sf.Format) -> SGD | Adam:
    """The optimizer of a resolved ``config``, computing in ``fmt`` (the parameters' format).

    >>> make_optimizer(TrainConfig(optimizer="adam").resolved(), sf.fp32).hyper
    {'lr': 0.001, 'beta1': 0.9, 'beta2': 0.999, 'eps': 1e-08, 'weight_decay': 0.0}
    """
    if config.optimizer == "sgd":
        return SGD(fmt, config.lr, config.momentum, config.weight_decay)
    return Adam(fmt, config.lr, weight_decay=config.weight_decay)


def make_loss_scaler(config: TrainConfig) -> LossScaler:
    """The loss scaler of a resolved ``config``: dynamic, static, or a static scale of 1 for
    ``loss_scale="none"`` (a step with inf/NaN gradients is still skipped then).

    >>> make_loss_scaler(TrainConfig().resolved()).growth_interval
    2000
    >>> make_loss_scaler(TrainConfig(precision="fp32").resolved()).get_scale()
    1.0
    """
    if config.loss_scale == "dynamic":
        return DynamicLossScaler(init_scale=config.scale, growth_interval=config.growth_interval)
    return StaticLossScaler(config.scale if config.loss_scale == "static" else 1.0)
