"""Optimizers (SGD with momentum, Adam) and global-norm gradient clipping, on bit arrays.

All arithmetic happens in the parameters' format ``fmt`` (FP32 for master weights, the compute
format with ``--no-master-weights``), one softfloat16 operation at a time, following torch's
single-tensor formulas with one rounding per elementary operation. Each step returns the new
parameters and the *update* ``u`` that was subtracted: ``u = step_size * direction`` (rounded)
and ``w_new = w - u`` (rounded), so a caller can see which updates the weights swallowed. Given
parameter ``names``, each parameter's update is reported to a :mod:`sim.trace` tracer as
``<name>.sgd_step`` / ``<name>.adam_step`` (its state in and out, the hyperparameters as attributes).
"""
from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

import numpy as np

import softfloat16 as sf
import softfloat16.linalg as linalg
from sim import trace

__all__ = ["SGD", "Adam", "ClipResult", "clip_grad_norm", "global_norm"]


def _hyper(name: str, value: Any, low: float = 0.0, allow_low: bool = True) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not np.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    if value < low or (value == low and not allow_low):
        raise ValueError(f"{name} must be {'>=' if allow_low else '>'} {low}, got {value!r}")
    return float(value)


class _Optimizer:
    """Shared: the format, hyperparameters as bits, per-parameter state arrays, state dicts."""

    kind = ""

    def __init__(self, fmt: sf.Format, hyper: dict[str, float]) -> None:
        self.fmt = fmt
        self.hyper = hyper
        self._bits = {name: np.asarray(fmt.from_float(value)) for name, value in hyper.items()}
        self.state: dict[str, list[np.ndarray]] = {}
        self.steps = 0

    def _trace(self, name: str, inputs: dict[str, Any], outputs: dict[str, Any]) -> None:
        """Report one parameter's update: bit arrays of this format by role (int64 for ``step``)."""
        def values(arrays: dict[str, Any]) -> trace.Values:
            return {role: (np.asarray(a), "int64" if role == "step" else self.fmt.name) for role, a in arrays.items()}

        trace.op(f"{self.kind}_step", f"{name}.{self.kind}_step", values(inputs), values(outputs), **self.hyper)

    def _check(self, params: Sequence[np.ndarray], grads: Sequence[np.ndarray]) -> None:
        if len(params) != len(grads):
            raise ValueError(f"got {len(params)} parameters but {len(grads)} gradients")
        for p, g in zip(params, grads):
            if p.shape != g.shape or p.dtype != self.fmt.dtype or g.dtype != self.fmt.dtype:
                raise ValueError(
                    f"parameter {p.dtype}{p.shape} and gradient {g.dtype}{g.shape} must both be "
                    f"{self.fmt.name} arrays of one shape"
                )

    def _decayed(self, param: np.ndarray, grad: np.ndarray) -> np.ndarray:
        """``grad + weight_decay * param`` (L2 decay, as torch's SGD and Adam)."""
        if self.hyper["weight_decay"] == 0.0:
            return grad
        return self.fmt.add(grad, self.fmt.mul(self._bits["weight_decay"], param))

    def state_dict(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """(arrays, meta): the state arrays by name and the JSON-able rest."""
        arrays = {f"{name}.{i}": a for name, items in self.state.items() for i, a in enumerate(items)}
        meta = {"kind": self.kind, "format": self.fmt.name, "hyper": dict(self.hyper), "steps": self.steps}
        return arrays, {**meta, **self._extra_state()}

    def load_state_dict(self, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`; ValueError if it belongs to another optimizer or setup."""
        mine = {"kind": self.kind, "format": self.fmt.name, "hyper": dict(self.hyper)}
        for key, value in mine.items():
            if meta.get(key) != value:
                raise ValueError(f"optimizer state has {key}={meta.get(key)!r}, this optimizer has {value!r}")
        state: dict[str, list[np.ndarray]] = {}
        def order(item: tuple[str, np.ndarray]) -> tuple[str, int]:
            name, _, index = item[0].rpartition(".")
            return name, int(index) if index.isdigit() else -1

        for name, array in sorted(arrays.items(), key=order):
            if array.dtype != self.fmt.dtype:
                raise ValueError(f"optimizer state {name} has dtype {array.dtype}, expected {np.dtype(self.fmt.dtype)}")
            state.setdefault(name.rsplit(".", 1)[0], []).append(array)
        steps = meta.get("steps")
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 0:
            raise ValueError(f"optimizer state steps must be a non-negative integer, got {steps!r}")
        self._load_extra(meta)
        self.state, self.steps = state, steps

    def _extra_state(self) -> dict[str, Any]:
        return {}

    def _load_extra(self, meta: dict[str, Any]) -> None:
        pass


class SGD(_Optimizer):
    """Stochastic gradient descent with momentum and L2 weight decay (torch.optim.SGD, no
    dampening, no Nesterov)::

        d = g + weight_decay * w
        buf = d (first step), else momentum * buf + d
        u = lr * buf;  w = w - u

    >>> import numpy as np, softfloat16 as sf
    >>> opt = SGD(sf.fp32, lr=0.5, momentum=0.9)
    >>> w, g = sf.fp32.from_float(np.array([1.0])), sf.fp32.from_float(np.array([0.25]))
    >>> for _ in range(2):
    ...     (w,), (u,) = opt.step([w], [g])
    >>> sf.fp32.to_float(w), sf.fp32.to_float(u)   # 1 - 0.125 - 0.2375
    (array([0.63749999]), array([0.2375]))
    """

    kind = "sgd"

    def __init__(self, fmt: sf.Format, lr: float, momentum: float = 0.0, weight_decay: float = 0.0) -> None:
        super().__init__(fmt, {
            "lr": _hyper("lr", lr, 0.0, allow_low=False),
            "momentum": _hyper("momentum", momentum),
            "weight_decay": _hyper("weight_decay", weight_decay),
        })
        if self.hyper["momentum"] >= 1.0:
            raise ValueError(f"momentum must be < 1, got {momentum!r}")

    def step(
        self, params: Sequence[np.ndarray], grads: Sequence[np.ndarray], names: Sequence[str] | None = None
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """One update: returns (new parameters, updates subtracted)."""
        self._check(params, grads)
        fmt, new_params, updates = self.fmt, [], []
        buffers = self.state.get("momentum_buffer", [])
        new_buffers = []
        for i, (param, grad) in enumerate(zip(params, grads)):
            direction = self._decayed(param, grad)
            if self.hyper["momentum"] != 0.0:
                if buffers:
                    direction = fmt.add(fmt.mul(self._bits["momentum"], buffers[i]), direction)
                new_buffers.append(np.asarray(direction))
            update = np.asarray(fmt.mul(self._bits["lr"], direction))
            new_params.append(np.asarray(fmt.sub(param, update)))
            updates.append(update)
            if names is not None and trace.active():
                state_in = {"buffer": buffers[i]} if buffers else {}
                state_out = {"buffer": new_buffers[i]} if new_buffers else {}
                self._trace(names[i], {"param": param, "grad": grad, **state_in}, {"param": new_params[i], **state_out})
        if new_buffers:
            self.state["momentum_buffer"] = new_buffers
        self.steps += 1
        return new_params, updates


class Adam(_Optimizer):
    """Adam with L2 weight decay (torch.optim.Adam, amsgrad off)::

        g = g + weight_decay * w
        m = m + (1 - beta1) * (g - m);  v = beta2 * v + ((1 - beta2) * g) * g
        beta1**t and beta2**t are kept as running products in the format
        step_size = lr / (1 - beta1**t);  denom = sqrt(v) / sqrt(1 - beta2**t) + eps
        u = step_size * (m / denom);  w = w - u

    >>> import numpy as np, softfloat16 as sf
    >>> opt = Adam(sf.fp32, lr=0.1)
    >>> (w,), (u,) = opt.step([sf.fp32.from_float(np.array([1.0]))], [sf.fp32.from_float(np.array([3.0]))])
    >>> sf.fp32.to_float(u)   # the first Adam step is lr * sign(g), up to eps
    array([0.1])
    """

    kind = "adam"

    def __init__(
        self,
        fmt: sf.Format,
        lr: float = 1e-3,
        betas: tuple[float, float] = (0.9, 0.999),
        eps: float = 1e-8,
        weight_decay: float = 0.0,
    ) -> None:
        beta1, beta2 = betas
        super().__init__(fmt, {
            "lr": _hyper("lr", lr, 0.0, allow_low=False),
            "beta1": _hyper("beta1", beta1),
            "beta2": _hyper("beta2", beta2),
            "eps": _hyper("eps", eps),
            "weight_decay": _hyper("weight_decay", weight_decay),
        })
        if not (self.hyper["beta1"] < 1.0 and self.hyper["beta2"] < 1.0):
            raise ValueError(f"betas must be in [0, 1), got {betas!r}")
        one = fmt.from_float(1.0)
        self._one = one
        self._one_minus = {b: np.asarray(fmt.sub(one, self._bits[b])) for b in ("beta1", "beta2")}
        self._powers = {"beta1": one, "beta2": one}

    def step(
        self, params: Sequence[np.ndarray], grads: Sequence[np.ndarray], names: Sequence[str] | None = None
    ) -> tuple[list[np.ndarray], list[np.ndarray]]:
        """One update: returns (new parameters, updates subtracted)."""
        self._check(params, grads)
        fmt, bits = self.fmt, self._bits
        powers_before = self._powers
        if not self.state:
            self.state = {
                "exp_avg": [np.zeros_like(p) for p in params],
                "exp_avg_sq": [np.zeros_like(p) for p in params],
            }
        self._powers = {b: fmt.mul(self._powers[b], bits[b]) for b in ("beta1", "beta2")}
        step_size = fmt.div(bits["lr"], fmt.sub(self._one, self._powers["beta1"]))
        correction2 = fmt.sqrt(fmt.sub(self._one, self._powers["beta2"]))
        new_params, updates = [], []
        for i, (param, raw_grad) in enumerate(zip(params, grads)):
            grad = self._decayed(param, raw_grad)
            m_before, v_before = self.state["exp_avg"][i], self.state["exp_avg_sq"][i]
            m = np.asarray(fmt.add(m_before, fmt.mul(self._one_minus["beta1"], fmt.sub(grad, m_before))))
            v = np.asarray(fmt.add(fmt.mul(bits["beta2"], v_before),
                                   fmt.mul(fmt.mul(self._one_minus["beta2"], grad), grad)))
            self.state["exp_avg"][i], self.state["exp_avg_sq"][i] = m, v
            denom = fmt.add(fmt.div(fmt.sqrt(v), correction2), bits["eps"])
            update = np.asarray(fmt.mul(step_size, fmt.div(m, denom)))
            new_params.append(np.asarray(fmt.sub(param, update)))
            updates.append(update)
            if names is not None and trace.active():
                state_in = {"exp_avg": m_before, "exp_avg_sq": v_before, "beta1_power": powers_before["beta1"],
                            "beta2_power": powers_before["beta2"], "step": np.int64(self.steps)}
                state_out = {"exp_avg": m, "exp_avg_sq": v, "beta1_power": self._powers["beta1"],
                             "beta2_power": self._powers["beta2"], "step": np.int64(self.steps + 1)}
                self._trace(names[i], {"param": param, "grad": raw_grad, **state_in},
                            {"param": new_params[i], **state_out})
        self.steps += 1
        return new_params, updates

    def _extra_state(self) -> dict[str, Any]:
        return {"beta_powers": [int(self._powers["beta1"]), int(self._powers["beta2"])]}

    def _load_extra(self, meta: dict[str, Any]) -> None:
        powers = meta.get("beta_powers")
        limit = 1 << self.fmt.width
        valid = isinstance(powers, list) and len(powers) == 2
        if not (valid and all(isinstance(p, int) and not isinstance(p, bool) and 0 <= p < limit for p in powers)):
            raise ValueError(f"Adam state beta_powers must be two {self.fmt.name} bit patterns, got {powers!r}")
        self._powers = {b: self.fmt.dtype(p) for b, p in zip(("beta1", "beta2"), powers)}


def global_norm(grads: Sequence[np.ndarray], fmt: sf.Format = sf.fp32) -> np.ndarray:
    """The L2 norm of all gradients together, as torch's clip_grad_norm_ builds it: the norm of
    the per-tensor norms. Each sum of squares accumulates in order in FP32 (exact products).

    >>> import numpy as np, softfloat16 as sf
    >>> grads = [sf.fp32.from_float(np.array([3.0])), sf.fp32.from_float(np.array([[4.0, 12.0]]))]
    >>> float(sf.fp32.to_float(global_norm(grads)))
    13.0
    """
    def norm(values: np.ndarray) -> np.ndarray:
        flat = values.reshape(1, -1)
        square_sum = linalg.matmul(flat, flat.T, fmt, accumulate=sf.fp32, out_format=fmt)
        return fmt.sqrt(square_sum.reshape(()))

    if not grads:
        return fmt.dtype(0)
    return norm(np.array([norm(g) for g in grads], dtype=fmt.dtype))


class ClipResult(tuple):
    """(grads, norm, fired): clipped gradients, the norm before clipping (bits), and whether the
    gradients were scaled down."""

    __slots__ = ()

    def __new__(cls, grads: list[np.ndarray], norm: np.ndarray, fired: bool) -> ClipResult:
        return super().__new__(cls, (grads, norm, fired))


def clip_grad_norm(grads: Sequence[np.ndarray], max_norm: float, fmt: sf.Format = sf.fp32) -> ClipResult:
    """Scale gradients so their global norm is at most ``max_norm`` (torch.nn.utils.clip_grad_norm_):
    ``coef = max_norm / (norm + 1e-6)``; if ``coef < 1`` every gradient is multiplied by it
    (so clipped gradients land just below max_norm, as in torch).

    >>> import numpy as np, softfloat16 as sf
    >>> grads, norm, fired = clip_grad_norm([sf.fp32.from_float(np.array([3.0, 4.0]))], 1.0)
    >>> sf.fp32.to_float(grads[0]), float(sf.fp32.to_float(norm)), fired
    (array([0.5999999 , 0.79999983]), 5.0, True)
    """
    norm = global_norm(grads, fmt)
    limit = _hyper("max_norm", max_norm, 0.0, allow_low=False)
    coef = fmt.div(fmt.from_float(limit), fmt.add(norm, fmt.from_float(1e-6)))
    fired = bool(fmt.lt(coef, fmt.from_float(1.0)))
    if not fired:
        return ClipResult(list(grads), norm, False)
    return ClipResult([np.asarray(fmt.mul(g, coef)) for g in grads], norm, True)
