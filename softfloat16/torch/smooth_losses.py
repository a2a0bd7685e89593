"""The smooth L1 and Huber losses and their gradients, written as torch CPU's kernels compute them.

torch CPU computes these losses elementwise (``smooth_l1_kernel``, ``huber_kernel``), then reduces
the loss tensor with ``mean`` or ``sum`` (the mode's, docs/torch.md). The elementwise steps follow
torch's vectorised loops (x86-64, the loops that process all but the last few elements of a line):

- ``Vectorized<Half>`` / ``Vectorized<BFloat16>`` arithmetic rounds **every** operation into the
  16-bit format (an FP32 step, then one rounding): the FP16 smooth L1 loss, the BF16 Huber loss,
  the FP16 and BF16 Huber gradient;
- the BF16 smooth L1 loss, the FP16 Huber loss and the FP16/BF16 smooth L1 gradient widen to FP32
  and round once (torch 2.13 CPU, measured: rounding each operation instead differs from it in 18%
  (delta = 1) and 44% (delta = 0.1) of 3,200 random FP16 Huber losses);
- FP32 tensors: FP32 steps.

``beta`` and ``delta`` are doubles in torch: they enter as the tensor's format (the double rounded
to float32, then to the format: :func:`~softfloat16.torch.machine.scalar_bits`) where the kernel
computes in the format, as float32 where it computes in FP32. The gradient's ``norm`` is
``1 / numel`` (double) for ``mean``, else 1, converted the same way.

torch's scalar tail (the last ``n mod 64`` elements of a contiguous line, or fewer) evaluates the
same formulas in another order and in float: its results can differ from the vectorised loop's
(docs/torch.md lists where); the mode follows the vectorised loop everywhere.
"""
from __future__ import annotations

import numpy as np
import torch

from softfloat16.formats import Format

from .machine import FP32, Machine, scalar_bits
from .operands import meta_call, operand_bits
from .opmath import ARITHMETIC
from .reductions import mean, sum_
from .registry import NotEmulated, aten, aten_arg, implements
from .tensors import DTYPE_FORMATS, from_bits, is_emulated

__all__ = ["huber_loss", "huber_loss_backward", "smooth_l1_loss", "smooth_l1_loss_backward"]

_NONE, _MEAN, _SUM = 0, 1, 2  # torch's Reduction enum


class _Arithmetic:
    """+ - * / and comparisons of ``fmt`` patterns, each operation rounded into ``fmt`` by the
    machine's step rounding: FP32 (torch's opmath steps) or FP16/BF16 (``Vectorized<Half>``)."""

    def __init__(self, machine: Machine, fmt: Format) -> None:
        self.fmt, self.step = fmt, machine.step
        self.half = scalar_bits(0.5, fmt)
        self.one, self.minus_one = scalar_bits(1, fmt), scalar_bits(-1, fmt)
        self.zero = fmt.dtype(0)

    def sub(self, a, b):
        return np.asarray(self.fmt.sub(a, b, **self.step))

    def mul(self, a, b):
        return np.asarray(self.fmt.mul(a, b, **self.step))

    def div(self, a, b):
        return np.asarray(self.fmt.div(a, b, **self.step))

    def abs(self, a):
        return np.asarray(a) & self.fmt.dtype(self.fmt.magnitude_mask)

    def at_least(self, a, b):
        """``a >= b`` (false for a NaN)."""
        return np.asarray(self.fmt.le(b, a))

    def sign(self, a):
        """``a > 0 ? 1 : -1`` (the kernels' blend: -1 for zeros and NaNs)."""
        return np.where(self.fmt.lt(self.zero, a), self.one, self.minus_one)


def _formats(func, dtype: torch.dtype, per_operation: bool) -> tuple[Format, Format]:
    """(the tensor's format, the format the kernel computes in): the tensor's format where torch's
    kernel rounds every operation into it (``per_operation``) or for FP32, FP32 otherwise."""
    if dtype not in ARITHMETIC:
        raise NotEmulated(f"{func} of {dtype} (torch CPU has no such kernel)")
    fmt = DTYPE_FORMATS[dtype]
    return fmt, fmt if per_operation else FP32


def _operands(machine: Machine, tensors, dtype: torch.dtype, shape, compute: Format) -> list[np.ndarray]:
    """The tensors as patterns of ``dtype``'s format (converted by the machine where torch's
    TensorIterator casts them), broadcast to ``shape``, widened to ``compute`` (exact)."""
    fmt = DTYPE_FORMATS[dtype]
    patterns = [np.broadcast_to(operand_bits(machine, t, dtype), tuple(shape)).reshape(-1) for t in tensors]
    return patterns if compute is fmt else [np.asarray(machine.widen(p, fmt)) for p in patterns]


def _result(machine: Machine, patterns, compute: Format, dtype: torch.dtype, shape) -> torch.Tensor:
    fmt = DTYPE_FORMATS[dtype]
    rounded = patterns if compute is fmt else machine.narrow(np.asarray(patterns), fmt)
    return from_bits(np.asarray(rounded).reshape(tuple(shape)), dtype, tuple(shape))


def _no_out(func, kwargs) -> None:
    if func._overloadname != "default" or kwargs.get("out") is not None:
        raise NotEmulated(f"{func}: only the default overload is emulated (not out=)")


def _parameter(func, name: str, value, smallest_exclusive: bool) -> float:
    """``beta`` (>= 0) or ``delta`` (> 0), checked as torch checks it."""
    value = float(value)
    if not (value > 0 or (value == 0 and not smallest_exclusive)):
        bound = "positive" if smallest_exclusive else "non-negative"
        raise ValueError(f"{func}: {name} must be {bound}, got {value!r}")
    return value


def _loss(machine, func, args, kwargs, name: str, per_operation, elementwise):
    """The shared frame of the two losses: the elementwise loss in torch's steps, then ``mean`` /
    ``sum`` (the mode's reductions) or none."""
    _no_out(func, kwargs)
    x, y = args[0], args[1]
    reduction = aten_arg(args, kwargs, 2, "reduction", _MEAN)
    if reduction not in (_NONE, _MEAN, _SUM):
        raise ValueError(f"{func}: reduction must be 0 (none), 1 (mean) or 2 (sum), got {reduction!r}")
    parameter = _parameter(func, name, aten_arg(args, kwargs, 3, name, 1.0), name == "delta")
    out = meta_call(func, args, kwargs)
    if not is_emulated(out.dtype):
        return func(*args, **kwargs)
    fmt, compute = _formats(func, out.dtype, per_operation(out.dtype))
    shape = torch.broadcast_shapes(x.shape, y.shape)
    a, b = _operands(machine, (x, y), out.dtype, shape, compute)
    loss = _result(machine, elementwise(_Arithmetic(machine, compute), a, b, scalar_bits(parameter, compute)),
                   compute, out.dtype, shape)
    if reduction == _MEAN:
        return mean(machine, aten.mean.default, (loss,), {})
    if reduction == _SUM:
        return sum_(machine, aten.sum.default, (loss,), {})
    return loss


def _smooth_l1(ar: _Arithmetic, a, b, beta):
    z = ar.abs(ar.sub(a, b))
    quadratic = ar.div(ar.mul(ar.mul(ar.half, z), z), beta)
    return np.where(ar.at_least(z, beta), ar.sub(z, ar.mul(ar.half, beta)), quadratic)


def _huber(ar: _Arithmetic, a, b, delta):
    z = ar.abs(ar.sub(a, b))
    linear = ar.mul(delta, ar.sub(z, ar.mul(ar.half, delta)))
    return np.where(ar.at_least(z, delta), linear, ar.mul(ar.mul(ar.half, z), z))


@implements("smooth_l1_loss", inplace=False)
def smooth_l1_loss(machine, func, args, kwargs):
    """``z = |x - y|``, ``z >= beta ? z - 0.5 * beta : 0.5 * z * z / beta`` (left to right), each
    operation rounded into FP16 for FP16 tensors (torch's ``Vectorized<Half>``), FP32 steps and one
    rounding for BF16, FP32 steps for FP32; then ``mean`` / ``sum`` as the mode computes them."""
    return _loss(machine, func, args, kwargs, "beta", lambda dtype: dtype == torch.float16, _smooth_l1)


@implements("huber_loss", inplace=False)
def huber_loss(machine, func, args, kwargs):
    """``z = |x - y|``, ``z >= delta ? delta * (z - 0.5 * delta) : 0.5 * z * z``, each operation
    rounded into BF16 for BF16 tensors (torch's ``Vectorized<BFloat16>``), FP32 steps and one rounding
    for FP16, FP32 steps for FP32; then ``mean`` / ``sum`` as the mode computes them."""
    return _loss(machine, func, args, kwargs, "delta", lambda dtype: dtype == torch.bfloat16, _huber)


def _gradient(machine, func, args, kwargs, name: str, per_operation: bool, elementwise):
    """The shared frame of the two gradients: ``norm = 1/numel`` (mean) or 1, the elementwise
    gradient of ``(input, target, grad_output)`` broadcast to the input's shape."""
    _no_out(func, kwargs)
    grad, x, y = args[0], args[1], args[2]
    reduction = aten_arg(args, kwargs, 3, "reduction")
    if reduction not in (_NONE, _MEAN, _SUM):
        raise ValueError(f"{func}: reduction must be 0 (none), 1 (mean) or 2 (sum), got {reduction!r}")
    parameter = float(aten_arg(args, kwargs, 4, name))
    out = meta_call(func, args, kwargs)
    if not is_emulated(out.dtype):
        return func(*args, **kwargs)
    fmt, compute = _formats(func, out.dtype, per_operation)
    norm = 1.0 / x.numel() if reduction == _MEAN else 1.0
    a, b, g = _operands(machine, (x, y, grad), out.dtype, out.shape, compute)
    result = elementwise(_Arithmetic(machine, compute), a, b, g, scalar_bits(norm, compute),
                         scalar_bits(parameter, compute))
    return _result(machine, result, compute, out.dtype, out.shape)


def _smooth_l1_gradient(ar: _Arithmetic, a, b, g, norm, beta):
    x = ar.sub(a, b)
    slope = np.where(ar.at_least(ar.abs(x), beta), ar.sign(x), ar.div(x, beta))
    return ar.mul(ar.mul(norm, slope), g)


def _huber_gradient(ar: _Arithmetic, a, b, g, norm, delta):
    x = ar.sub(a, b)
    slope = np.where(ar.at_least(ar.abs(x), delta), ar.mul(ar.sign(x), delta), x)
    return ar.mul(ar.mul(norm, slope), g)


@implements("smooth_l1_loss_backward", inplace=False)
def smooth_l1_loss_backward(machine, func, args, kwargs):
    """``x = input - target``, ``|x| >= beta ? (x > 0 ? 1 : -1) : x / beta``, times ``norm``, times
    ``grad`` (left to right): FP32 steps and one rounding (FP16, BF16 and FP32 alike, torch's
    kernel); ``beta = 0`` gives ``-norm * grad`` where ``x`` is a zero, as torch's blend does."""
    return _gradient(machine, func, args, kwargs, "beta", False, _smooth_l1_gradient)


@implements("huber_loss_backward", inplace=False)
def huber_loss_backward(machine, func, args, kwargs):
    """``x = input - target``, ``|x| >= delta ? (x > 0 ? 1 : -1) * delta : x``, times ``norm``, times
    ``grad`` (left to right), each operation rounded into the tensor's format (torch's
    ``Vectorized<Half/BFloat16>``; FP32 steps for FP32)."""
    return _gradient(machine, func, args, kwargs, "delta", True, _huber_gradient)

