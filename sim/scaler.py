"""Loss scaling as a state machine, with torch.amp.GradScaler's names and semantics.

The scalers hold no arrays and do no array math: the training step finds inf/NaN in the scaled
gradients and multiplies them by :meth:`LossScaler.inv_scale` with the emulator; a scaler only
supplies the numbers and decides what happens next. The order inside one step is::

    scaled_loss = loss * scaler.scale        # np.float32, an FP32 value
    ... backward of scaled_loss ...
    found_inf = ...                          # any inf/NaN in any scaled gradient
    scaler.mark_unscaled()                   # exactly once per step, before clipping
    grads = grads * scaler.inv_scale()       # with the emulator
    ... clip; step the optimizer only if not found_inf ...
    skipped = scaler.update(found_inf)       # True when the step was skipped

Both scalers keep ``history`` (the scale each step used, one entry per :meth:`update` call) and
``skipped_steps`` (indices of the updates that saw inf/NaN), and save and restore everything with
``state_dict()`` / ``load_state_dict()`` as plain Python numbers and lists, so the state fits in a
JSON checkpoint.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import numbers
import warnings
from collections.abc import Iterator
from typing import Any

import numpy as np

import softfloat16 as sf

from sim import trace

__all__ = ["DynamicLossScaler", "DynamicScalerConfig", "LossScaler", "StaticLossScaler"]

# The smallest positive FP32 value (a subnormal). A dynamic scale never goes below it: a zero
# scale would make inv_scale() infinite and turn every later gradient into NaN.
FP32_SMALLEST_SUBNORMAL = np.float32(2.0**sf.fp32.min_subnormal_exponent)

_UNSCALE_TWICE = "unscale_() has already been called on this optimizer since the last update()."


def _real(name: str, value: Any) -> float:
    """``value`` as a Python float; TypeError for bools and non-numbers (they are bugs here)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    return float(value)


def _integer(name: str, value: Any) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    return int(value)


def _fp32_scale(name: str, value: Any) -> np.float32:
    """``value`` rounded to FP32 (as torch fills its float32 scale tensor); finite and > 0."""
    number = _real(name, value)
    with np.errstate(over="ignore"):  # an FP32 overflow is reported below, not as a warning
        scale = np.float32(number)
    if not (np.isfinite(scale) and scale > 0):
        raise ValueError(f"{name} must be a positive number finite in FP32, got {value!r}")
    return scale


def _fp32_times(scale: np.float32, factor: float) -> np.float32:
    """``scale * factor`` as torch's CPU kernel computes it.

    torch multiplies the float32 scale by the double factor in double precision and rounds the
    product to float32 once; a Python float product is exactly that double product.
    """
    with np.errstate(over="ignore", under="ignore"):  # the caller handles inf and zero
        return np.float32(float(scale) * factor)


def _is_power_of_two(value: float) -> bool:
    return value > 0 and math.frexp(value)[0] == 0.5


def _warn_if_not_power_of_two(name: str, value: float) -> None:
    if not _is_power_of_two(value):
        warnings.warn(
            f"{name}={value!r} is not a power of two: the scale/unscale round trip is no longer "
            "exact",
            UserWarning,
            stacklevel=3,
        )


@contextlib.contextmanager
def _state_errors_as_value_errors() -> Iterator[None]:
    """A malformed state dict is one bad argument value: report every problem as ValueError."""
    try:
        yield
    except TypeError as error:
        raise ValueError(str(error)) from None


def _check_keys(owner: str, state: Any, expected: tuple[str, ...]) -> None:
    if not isinstance(state, dict):
        raise TypeError(f"{owner} state must be a dict, got {type(state).__name__}")
    missing = [key for key in expected if key not in state]
    unexpected = sorted(str(key) for key in state if key not in expected)
    if missing or unexpected:
        raise ValueError(
            f"{owner} state dict does not match: missing keys {missing}, unexpected keys "
            f"{unexpected} (expected exactly {list(expected)})"
        )


class LossScaler:
    """What every loss scaler shares: the FP32 scale, the unscale-once check, the step record.

    Not used directly; see :class:`StaticLossScaler` and :class:`DynamicLossScaler`.
    """

    def __init__(self, scale: np.float32) -> None:
        self._scale = scale
        self._unscaled = False
        self.history: list[float] = []
        self.skipped_steps: list[int] = []

    @property
    def scale(self) -> np.float32:
        """The current scale, an FP32 value: multiply the loss by it before the backward pass."""
        return self._scale

    def get_scale(self) -> float:
        """The current scale as a Python float (torch's ``GradScaler.get_scale``).

        >>> StaticLossScaler(1024.0).get_scale()
        1024.0
        """
        return float(self._scale)

    def inv_scale(self) -> np.float32:
        """The FP32 reciprocal of the scale, exactly as GradScaler computes it.

        torch takes the reciprocal in double and rounds it to float32
        (``scale.double().reciprocal().float()``), because an FP32 division may be inexact under
        some compile options; Python's ``1.0 / x`` is the correctly rounded double reciprocal.

        >>> StaticLossScaler(1024.0).inv_scale()
        np.float32(0.0009765625)
        """
        with np.errstate(over="ignore"):  # a subnormal scale has an infinite FP32 reciprocal
            return np.float32(1.0 / float(self._scale))

    def mark_unscaled(self) -> None:
        """Record that this step's gradients were unscaled; a second call before update() raises.

        Unscaling twice would divide the gradients by the scale twice, as in torch's ``unscale_``.

        >>> scaler = StaticLossScaler(8.0)
        >>> scaler.mark_unscaled()
        >>> scaler.mark_unscaled()
        Traceback (most recent call last):
        ...
        RuntimeError: unscale_() has already been called on this optimizer since the last update().
        """
        if self._unscaled:
            raise RuntimeError(_UNSCALE_TWICE)
        self._unscaled = True

    def update(self, found_inf: bool) -> bool:
        """End the step: record it, adjust the scale, and return whether the step was skipped.

        ``found_inf`` says whether any scaled gradient held an inf or NaN; such a step must not
        reach the optimizer, so it is reported as skipped (the return value is ``found_inf``).

        >>> scaler = StaticLossScaler(8.0)
        >>> scaler.update(False), scaler.update(True), scaler.skipped_steps
        (False, True, [1])
        """
        if not isinstance(found_inf, (bool, np.bool_)):
            kind = type(found_inf).__name__
            raise TypeError(f"found_inf must be a bool, got {found_inf!r} ({kind})")
        found_inf = bool(found_inf)
        scale_used = self._scale
        self._advance(found_inf)  # may raise; it changes nothing before it has decided
        if found_inf:
            self.skipped_steps.append(len(self.history))
        self.history.append(float(scale_used))
        self._unscaled = False
        return found_inf

    def _advance(self, found_inf: bool) -> None:
        """Move the state machine one step (subclasses)."""
        raise NotImplementedError

    def _record_state(self) -> dict[str, Any]:
        return {"history": list(self.history), "skipped_steps": list(self.skipped_steps)}

    @staticmethod
    def _parse_record(owner: str, state: dict[str, Any]) -> tuple[list[float], list[int]]:
        history_in, skipped_in = state["history"], state["skipped_steps"]
        if not isinstance(history_in, list) or not isinstance(skipped_in, list):
            raise TypeError(f"{owner} state: history and skipped_steps must be lists")
        history = []
        for step, value in enumerate(history_in):
            scale = _fp32_scale(f"{owner} state history[{step}]", value)
            if float(scale) != float(value):
                raise ValueError(f"{owner} state history[{step}]={value!r} is not an FP32 value")
            history.append(float(scale))
        skipped = [_integer(f"{owner} state skipped_steps", value) for value in skipped_in]
        if skipped != sorted(set(skipped)) or any(not 0 <= s < len(history) for s in skipped):
            raise ValueError(
                f"{owner} state: skipped_steps must be increasing step indices in "
                f"[0, {len(history)}), got {skipped_in!r}"
            )
        return history, skipped


class StaticLossScaler(LossScaler):
    """A constant loss scale.

    ``update(found_inf)`` records the step but never changes the scale. A step whose scaled
    gradients hold an inf or NaN is still skipped (``update`` returns True): applying it would
    write inf/NaN into the weights. A scale that is not a power of two is allowed with a
    UserWarning, because multiplying by it and by its reciprocal is then no longer exact.

    >>> scaler = StaticLossScaler(2.0**10)
    >>> scaler.scale, scaler.update(True), scaler.scale
    (np.float32(1024.0), True, np.float32(1024.0))
    """

    _KEYS = ("scale", "history", "skipped_steps")

    def __init__(self, scale: float) -> None:
        fp32 = _fp32_scale("scale", scale)
        _warn_if_not_power_of_two("scale", float(fp32))
        super().__init__(fp32)

    def _advance(self, found_inf: bool) -> None:
        pass  # static: nothing changes, the skip is reported by update()

    def state_dict(self) -> dict[str, Any]:
        """The state as plain Python values (JSON-serialisable).

        >>> StaticLossScaler(4.0).state_dict()
        {'scale': 4.0, 'history': [], 'skipped_steps': []}
        """
        return {"scale": float(self._scale), **self._record_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore a state from :meth:`state_dict`; ValueError if it is malformed.

        >>> scaler = StaticLossScaler(1.0)
        >>> scaler.load_state_dict({"scale": 8.0, "history": [8.0], "skipped_steps": []})
        >>> scaler.scale
        np.float32(8.0)
        """
        with _state_errors_as_value_errors():
            _check_keys("StaticLossScaler", state, self._KEYS)
            scale = _fp32_scale("StaticLossScaler state scale", state["scale"])
            history, skipped = self._parse_record("StaticLossScaler", state)
        self._scale, self.history, self.skipped_steps = scale, history, skipped
        self._unscaled = False


@dataclasses.dataclass(frozen=True)
class DynamicScalerConfig:
    """How a :class:`DynamicLossScaler` moves its scale (everything but the scale itself), checked
    once, here: the constructor and ``load_state_dict`` both build one. Fields are normalised
    (factors to float, ``min_scale`` to an FP32 value); TypeError for a wrong type, ValueError for
    a value out of range, naming the field.

    >>> DynamicScalerConfig(growth_interval=100).backoff_factor
    0.5
    >>> DynamicScalerConfig(hysteresis=0)
    Traceback (most recent call last):
    ValueError: hysteresis must be >= 1, got 0
    """

    growth_factor: float = 2.0
    backoff_factor: float = 0.5
    growth_interval: int = 2000
    hysteresis: int = 1
    consecutive_hysteresis: bool = False
    min_scale: np.float32 | None = None
    on_min_scale: str = "raise"

    def __post_init__(self) -> None:
        growth = _real("growth_factor", self.growth_factor)
        if not (math.isfinite(growth) and growth >= 1.0):
            raise ValueError(f"growth_factor must be finite and >= 1, got {self.growth_factor!r}")
        backoff = _real("backoff_factor", self.backoff_factor)
        if not 0.0 < backoff <= 1.0:
            raise ValueError(f"backoff_factor must be in (0, 1], got {self.backoff_factor!r}")
        for name in ("growth_interval", "hysteresis"):
            if _integer(name, getattr(self, name)) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if not isinstance(self.consecutive_hysteresis, (bool, np.bool_)):
            raise TypeError(f"consecutive_hysteresis must be a bool, got {self.consecutive_hysteresis!r}")
        if self.on_min_scale not in ("raise", "warn"):
            raise ValueError(f"on_min_scale must be 'raise' or 'warn', got {self.on_min_scale!r}")
        normalised = {
            "growth_factor": growth,
            "backoff_factor": backoff,
            "growth_interval": int(self.growth_interval),
            "hysteresis": int(self.hysteresis),
            "consecutive_hysteresis": bool(self.consecutive_hysteresis),
            "min_scale": None if self.min_scale is None else _fp32_scale("min_scale", self.min_scale),
        }
        for name, value in normalised.items():
            object.__setattr__(self, name, value)  # frozen: normalised once, at construction

    def state_dict(self) -> dict[str, Any]:
        """The fields as plain Python values (JSON-serialisable)."""
        state = dataclasses.asdict(self)
        state["min_scale"] = None if self.min_scale is None else float(self.min_scale)
        return state


_CONFIG_FIELDS = tuple(field.name for field in dataclasses.fields(DynamicScalerConfig))


class DynamicLossScaler(LossScaler):
    """A loss scale that backs off on inf/NaN gradients and grows after a run of clean steps.

    With ``hysteresis=1`` (the default) and ``min_scale=None`` this is torch.amp.GradScaler,
    step for step and bit for bit (torch's CPU ``_amp_update_scale_``):

    - inf/NaN found: the step is skipped, ``scale *= backoff_factor``, the growth tracker is reset
      to 0.
    - clean step: the growth tracker counts it; when it reaches ``growth_interval`` the scale is
      multiplied by ``growth_factor`` and the tracker restarts at 0. If that product would not be
      finite in FP32 the scale stays where it is (it never grows past FP32's range).

    The scale is an FP32 value: each new scale is the double-precision product of the FP32 scale
    and the factor, rounded once to FP32, as torch computes it.

    ``hysteresis`` (DeepSpeed's ``delayed_shift``/``hysteresis``): a budget of overflows tolerated
    before a backoff. Every overflowing step is skipped and resets the growth tracker, but while
    more than one unit of budget is left it only spends one unit and keeps the scale. With one unit
    left the overflow backs off, and the budget stays at one, so further overflows keep backing off
    until it is refilled. It is refilled to ``hysteresis`` whenever the scale completes a growth
    interval (DeepSpeed's default, cumulative: overflows count until the next growth), or, with
    ``consecutive_hysteresis=True``, on every clean step (only back-to-back overflows count).
    Unlike DeepSpeed, which grows after ``scale_window + 1`` clean steps, growth here always comes
    after exactly ``growth_interval`` clean steps, as in GradScaler.

    ``min_scale``: the scale never goes below it (a backoff below it lands on it). An overflow that
    is due to back off while the scale already sits at the floor means the loss keeps overflowing
    even at the smallest allowed scale: ``on_min_scale="raise"`` raises RuntimeError (fairseq's
    "Minimum loss scale reached"; the scaler's state is left as it was before that update call),
    ``"warn"`` warns and carries on skipping such steps. Without ``min_scale`` the floor is the
    smallest positive FP32 value, where torch would instead reach a scale of zero.

    Non-power-of-two ``init_scale``, ``growth_factor`` or ``backoff_factor`` are allowed with a
    UserWarning (the scale/unscale round trip is no longer exact).

    The keyword arguments after ``init_scale`` are the fields of :class:`DynamicScalerConfig`
    (``scaler.config``); each can also be read as an attribute of the scaler, as GradScaler's.

    >>> scaler = DynamicLossScaler(init_scale=1024.0, growth_interval=2)
    >>> [(scaler.update(found_inf), float(scaler.scale)) for found_inf in (False, False, True)]
    [(False, 1024.0), (False, 2048.0), (True, 1024.0)]
    >>> scaler.history, scaler.skipped_steps
    ([1024.0, 1024.0, 2048.0], [2])
    """

    # GradScaler's key names and meanings (scale, the factors, growth_interval, _growth_tracker), and ours
    _KEYS = ("scale", *_CONFIG_FIELDS, "_growth_tracker", "_hysteresis_tracker", "history", "skipped_steps")

    def __init__(self, init_scale: float = 2.0**16, **settings: Any) -> None:
        scale = _fp32_scale("init_scale", init_scale)
        config = DynamicScalerConfig(**settings)
        if config.min_scale is not None and scale < config.min_scale:
            raise ValueError(f"init_scale={init_scale!r} is below min_scale={config.min_scale!r}")
        for name, value in (("init_scale", float(scale)), ("growth_factor", config.growth_factor),
                            ("backoff_factor", config.backoff_factor)):
            _warn_if_not_power_of_two(name, value)
        super().__init__(scale)
        self.config = config
        self._growth_tracker = 0
        self._hysteresis_tracker = config.hysteresis

    growth_tracker = property(
        lambda self: self._growth_tracker, doc="Clean steps since the last growth or overflow."
    )

    def update_factors(self) -> dict[str, Any]:
        """The arguments of GradScaler's scale update (``torch._amp_update_scale_``) besides the
        state: growth and backoff factors, growth interval.

        >>> DynamicLossScaler().update_factors()
        {'growth_factor': 2.0, 'backoff_factor': 0.5, 'growth_interval': 2000}
        """
        return {name: getattr(self.config, name) for name in ("growth_factor", "backoff_factor", "growth_interval")}

    def update(self, found_inf: bool) -> bool:
        """As :meth:`LossScaler.update`; reported to a :mod:`sim.trace` tracer as
        ``loss_scale.update`` with GradScaler's state (scale, growth tracker) in and out."""
        before = self._scale, self._growth_tracker
        skipped = super().update(found_inf)
        if trace.active():
            def state(scale: np.float32, tracker: int) -> trace.Values:
                return {"scale": (np.asarray(scale, dtype=np.float32).view(np.uint32), "fp32"),
                        "growth_tracker": (np.asarray(tracker, dtype=np.int32), "int32")}

            trace.op("scaler_update", "loss_scale.update",
                     {**state(*before), "found_inf": (np.bool_(found_inf), "bool")},
                     state(self._scale, self._growth_tracker), **self.update_factors())
        return skipped
    hysteresis_tracker = property(
        lambda self: self._hysteresis_tracker, doc="Overflow budget left before a backoff."
    )

    @property
    def _floor(self) -> np.float32:
        return FP32_SMALLEST_SUBNORMAL if self.config.min_scale is None else self.config.min_scale

    def _advance(self, found_inf: bool) -> None:
        config = self.config
        if found_inf:
            if self._hysteresis_tracker > 1:
                self._hysteresis_tracker -= 1  # spend budget, keep the scale
            elif self._scale <= self._floor:
                message = (
                    f"Minimum loss scale reached ({float(self._floor)!r}): gradients still "
                    "overflow at the smallest allowed loss scale. The loss is probably exploding; "
                    "try a lower learning rate, gradient clipping, or a lower min_scale."
                )
                if config.on_min_scale == "raise":
                    raise RuntimeError(message)
                warnings.warn(message + " Skipping the step.", UserWarning, stacklevel=3)
            else:
                self._scale = max(_fp32_times(self._scale, config.backoff_factor), self._floor)
            self._growth_tracker = 0
            return
        if config.consecutive_hysteresis:
            self._hysteresis_tracker = config.hysteresis
        self._growth_tracker += 1
        if self._growth_tracker == config.growth_interval:
            self._growth_tracker = 0
            self._hysteresis_tracker = config.hysteresis
            grown = _fp32_times(self._scale, config.growth_factor)
            if np.isfinite(grown):  # as torch: never grow past FP32's range
                self._scale = grown

    def state_dict(self) -> dict[str, Any]:
        """The state as plain Python values (JSON-serialisable), with GradScaler's key names.

        Call it after :meth:`update`, at a step boundary.

        >>> state = DynamicLossScaler().state_dict()
        >>> state["scale"], state["_growth_tracker"], state["min_scale"]
        (65536.0, 0, None)
        """
        return {
            "scale": float(self._scale),
            **self.config.state_dict(),
            "_growth_tracker": self._growth_tracker,
            "_hysteresis_tracker": self._hysteresis_tracker,
            **self._record_state(),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore everything from :meth:`state_dict`, configuration included (as torch does).

        The whole dict is checked before anything changes: missing or unknown keys, wrong types
        and out-of-range values raise ValueError naming the key.

        >>> source = DynamicLossScaler(init_scale=4.0, growth_interval=1)
        >>> _ = source.update(False)
        >>> target = DynamicLossScaler()
        >>> target.load_state_dict(source.state_dict())
        >>> target.scale, target.growth_interval, target.history
        (np.float32(8.0), 1, [4.0])
        """
        owner = "DynamicLossScaler"
        with _state_errors_as_value_errors():
            _check_keys(owner, state, self._KEYS)
            try:
                config = DynamicScalerConfig(**{name: state[name] for name in _CONFIG_FIELDS})
            except (TypeError, ValueError) as error:
                raise ValueError(f"{owner} state: {error}") from None
            scale = _fp32_scale(f"{owner} state scale", state["scale"])
            if float(scale) != float(state["scale"]):
                raise ValueError(f"{owner} state scale={state['scale']!r} is not an FP32 value")
            if config.min_scale is not None and scale < config.min_scale:
                raise ValueError(f"{owner} state scale={state['scale']!r} is below its min_scale")
            growth_tracker = _integer(f"{owner} state _growth_tracker", state["_growth_tracker"])
            if not 0 <= growth_tracker < config.growth_interval:
                raise ValueError(
                    f"{owner} state _growth_tracker={growth_tracker} is outside "
                    f"[0, growth_interval={config.growth_interval})"
                )
            budget = _integer(f"{owner} state _hysteresis_tracker", state["_hysteresis_tracker"])
            if not 1 <= budget <= config.hysteresis:
                raise ValueError(
                    f"{owner} state _hysteresis_tracker={budget} is outside "
                    f"[1, hysteresis={config.hysteresis}]"
                )
            history, skipped = self._parse_record(owner, state)
        self.config = config
        self._scale = scale
        self._growth_tracker = growth_tracker
        self._hysteresis_tracker = budget
        self.history, self.skipped_steps = history, skipped
        self._unscaled = False


# The config's fields read as the scaler's own (GradScaler users read ``scaler.growth_interval``).
for _name in _CONFIG_FIELDS:
    setattr(DynamicLossScaler, _name, property(lambda self, name=_name: getattr(self.config, name),
                                               doc=f"``config.{_name}``"))
del _name
