"""Loss functions that reach the mode as single aten ops, written as the steps torch CPU takes
(each step one emulated elementwise op, rounded into the tensor's format)."""
from __future__ import annotations

from .elementwise import add_sub, mul_div
from .machine import scalar_bits
from .operands import meta_call
from .reductions import mean, sum_
from .registry import aten, aten_arg, implements
from .tensors import DTYPE_FORMATS, from_bits, is_emulated

__all__ = ["mse_loss", "mse_loss_backward"]

_NONE, _MEAN, _SUM = 0, 1, 2  # torch's Reduction enum


@implements("mse_loss", inplace=False)
def mse_loss(machine, func, args, kwargs):
    """``d = x - y`` rounded, ``d * d`` rounded, then ``mean`` / ``sum`` of those (or none)."""
    out = meta_call(func, args, kwargs)
    if not is_emulated(out.dtype):
        return func(*args, **kwargs)
    x, y, reduction = args[0], args[1], aten_arg(args, kwargs, 2, "reduction", _MEAN)
    difference = add_sub(machine, aten.sub.Tensor, (x, y), {})
    squares = mul_div(machine, aten.mul.Tensor, (difference, difference), {})
    if reduction == _MEAN:
        return mean(machine, aten.mean.default, (squares,), {})
    if reduction == _SUM:
        return sum_(machine, aten.sum.default, (squares,), {})
    return squares


@implements("mse_loss_backward", inplace=False)
def mse_loss_backward(machine, func, args, kwargs):
    """torch CPU's ``norm * (x - y) * grad`` with ``norm = 2/numel`` (mean) or 2 (sum, none)
    converted to the tensor's dtype first, each of the three steps rounded into it."""
    out = meta_call(func, args, kwargs)
    if not is_emulated(out.dtype):
        return func(*args, **kwargs)
    grad, x, y = args[0], args[1], args[2]
    reduction = aten_arg(args, kwargs, 3, "reduction", _MEAN)
    norm = 2.0 / x.numel() if reduction == _MEAN else 2.0
    norm = from_bits(scalar_bits(norm, DTYPE_FORMATS[out.dtype], machine.nan), out.dtype, ())
    gradient = add_sub(machine, aten.sub.Tensor, (x, y), {})
    gradient = mul_div(machine, aten.mul.Tensor, (norm, gradient), {})
    return mul_div(machine, aten.mul.Tensor, (gradient, grad), {})
