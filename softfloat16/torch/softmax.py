"""exp, log, sigmoid, softmax, log_softmax, their backwards, and the negative log likelihood
(``F.cross_entropy`` reaches the mode as ``_log_softmax`` + ``nll_loss_forward``).

Every step is an FP32 operation of the emulator on operands widened from the tensor's format,
and the result is rounded once into the output's format. exp and log are the emulated FP32
algorithms of :mod:`softfloat16.fp32math` (bit-exact to that definition, not to a vendor's
libm). Sums along the softmax dimension accumulate in FP32 in the machine's order, over the
elements in index order. The steps of sigmoid, and softmax's subtraction with its exp, run as one
compiled program each, and so do log_softmax's backward steps (softfloat16.fp32compiled: the same FP32
operations, one call).
"""
from __future__ import annotations

import numpy as np
import torch

from .. import fp32math
from ..fp32compiled import compiled, step_options
from ..fp32math import exp_steps
from .elementwise import ONE32, _unary
from .machine import FP32, Machine
from .operands import meta_call
from .reductions import row_extreme, row_sums
from .registry import NotEmulated, aten_arg, implements
from .tensors import DTYPE_FORMATS, bits, from_bits, is_emulated

__all__ = ["exp32", "log32"]

exp32, log32 = fp32math.exp, fp32math.log


def sigmoid_steps(x, ops, steps):
    """``1 / (1 + exp(-x))``: the emulated exp, then the machine's FP32 steps (``steps``)."""
    one = ops.const(ONE32)
    return steps.div(one, steps.add(one, exp_steps(ops.neg(x), ops)))


def exp_shifted_steps(x, top, ops, steps):
    """``exp(x - top)``: the machine's FP32 subtraction, then the emulated exp (softmax's numerators)."""
    return exp_steps(steps.sub(x, top), ops)


def quotient_steps(x, total, ops, steps):
    """``x / total``: the machine's FP32 division (softmax's quotients, one compiled call)."""
    return steps.div(x, total)


def log_softmax_grad_steps(grad, y, total, ops, steps):
    """``grad - exp(y) * total``: the emulated exp, then the machine's FP32 steps (log_softmax's backward)."""
    return steps.sub(grad, steps.mul(exp_steps(y, ops), total))


@implements("exp")
def exp(machine, func, args, kwargs):
    """e**x: the emulated FP32 exp, rounded once into the format."""
    return _unary(machine, func, args, kwargs, exp32)


@implements("log")
def log(machine, func, args, kwargs):
    """Natural logarithm: the emulated FP32 log, rounded once into the format."""
    return _unary(machine, func, args, kwargs, log32)


@implements("sigmoid")
def sigmoid(machine, func, args, kwargs):
    """``1 / (1 + exp(-x))`` in three FP32 steps, rounded once into the format."""
    program, options = compiled(sigmoid_steps), step_options(**machine.step)
    return _unary(machine, func, args, kwargs, lambda x: program(x, step_options=options))


@implements("sigmoid_backward", inplace=False)
def sigmoid_backward(machine, func, args, kwargs):
    """``grad * (1 - y) * y``, left to right, as torch CPU's ``sigmoid_backward_kernel``: BF16 and
    FP32 in FP32 steps with one rounding; FP16 in ``Half`` arithmetic (torch's ``Vectorized<Half>``
    body and its scalar tail alike), each of the three operations rounded into FP16."""
    out = meta_call(func, args, kwargs)
    if not is_emulated(out.dtype):
        return func(*args, **kwargs)
    fmt = DTYPE_FORMATS[out.dtype]
    grad, y = (machine.widen(bits(t.to(out.dtype) if t.dtype != out.dtype else t), fmt) for t in args[:2])
    if out.dtype == torch.float16:
        def step(value):  # an operation of torch's Half arithmetic: FP32, rounded into FP16
            return machine.widen(machine.narrow(value, fmt), fmt)
        result = machine.mul(step(machine.mul(grad, step(machine.sub(ONE32, y)))), y)
    else:
        result = machine.mul(machine.mul(grad, machine.sub(ONE32, y)), y)
    return from_bits(machine.narrow(result, fmt), out.dtype, out.shape)


def _rows32(machine: Machine, x: torch.Tensor, dim: int) -> tuple[np.ndarray, tuple]:
    """FP32 patterns of ``x`` as (rows, size of dim), the dimension moved last; and the moved shape."""
    moved = x if dim == x.dim() - 1 else x.movedim(dim, -1) if x.dim() else x.reshape(1)
    fmt = DTYPE_FORMATS[x.dtype]
    return machine.widen(bits(moved), fmt).reshape(-1, moved.shape[-1]), tuple(moved.shape)


def _back(machine: Machine, rows32: np.ndarray, moved_shape: tuple, dim: int, dtype: torch.dtype,
          like: torch.Tensor) -> torch.Tensor:
    """Rows of FP32 results rounded into ``dtype``, in ``like``'s shape (dim moved back)."""
    result = from_bits(machine.narrow(rows32, DTYPE_FORMATS[dtype]), dtype, moved_shape)
    if dim == like.dim() - 1:  # the last dimension: already in place
        return result
    return result.movedim(-1, dim).contiguous() if like.dim() else result.reshape(())


def _dim(x: torch.Tensor, dim: int) -> int:
    return dim % x.dim() if x.dim() else 0


def _rows_top(machine: Machine, x: torch.Tensor, dim: int):
    """(rows of FP32 patterns, their maxima as a column, the moved shape): softmax's operands."""
    rows, shape = _rows32(machine, x, dim)
    if rows.shape[1] == 0:
        raise NotEmulated("softmax over an empty dimension")
    return rows, row_extreme(machine, rows, FP32, largest=True)[:, None], shape


def _softmax_setup(func, args, kwargs):
    x, dim, half_to_float = args[0], aten_arg(args, kwargs, 1, "dim"), aten_arg(args, kwargs, 2, "half_to_float")
    dtype = torch.float32 if half_to_float else x.dtype
    return x, _dim(x, dim), dtype


@implements("_softmax", inplace=False)
def softmax(machine, func, args, kwargs):
    """``e_j / sum(e)`` with ``e_j = exp(x_j - max x)``: a subtraction, the emulated exp, an FP32
    sum and one FP32 division per element, rounded once."""
    x, dim, dtype = _softmax_setup(func, args, kwargs)
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    rows, top, shape = _rows_top(machine, x, dim)
    options = step_options(**machine.step)
    exps = compiled(exp_shifted_steps)(rows, top, step_options=options)
    total = row_sums(machine, exps, FP32, accumulate=FP32)
    return _back(machine, compiled(quotient_steps)(exps, total[:, None], step_options=options), shape, dim, dtype, x)


@implements("_log_softmax", inplace=False)
def log_softmax(machine, func, args, kwargs):
    """``(x_j - max x) - log(sum exp(x - max x))`` in FP32 steps, rounded once."""
    x, dim, dtype = _softmax_setup(func, args, kwargs)
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    rows, top, shape = _rows_top(machine, x, dim)
    shifted = machine.sub(rows, top)
    total = row_sums(machine, exp32(shifted), FP32, accumulate=FP32)
    return _back(machine, machine.sub(shifted, log32(total)[:, None]), shape, dim, dtype, x)


def _backward_setup(machine, args, kwargs):
    grad, output = args[0], args[1]
    dim, input_dtype = aten_arg(args, kwargs, 2, "dim"), aten_arg(args, kwargs, 3, "input_dtype")
    dim = _dim(output, dim)
    if not (is_emulated(grad.dtype) and is_emulated(output.dtype) and is_emulated(input_dtype)):
        return None
    grad_rows, shape = _rows32(machine, grad, dim)
    output_rows, _ = _rows32(machine, output, dim)
    return grad_rows, output_rows, shape, dim, input_dtype


@implements("_softmax_backward_data", inplace=False)
def softmax_backward(machine, func, args, kwargs):
    """``y * (g - sum(g * y))`` in FP32 steps, rounded once into the input's dtype."""
    found = _backward_setup(machine, args, kwargs)
    if found is None:
        return func(*args, **kwargs)
    grad, y, shape, dim, dtype = found
    total = row_sums(machine, machine.mul(grad, y), FP32, accumulate=FP32)
    return _back(machine, machine.mul(y, machine.sub(grad, total[:, None])), shape, dim, dtype, args[1])


@implements("_log_softmax_backward_data", inplace=False)
def log_softmax_backward(machine, func, args, kwargs):
    """``g - exp(y) * sum(g)`` in FP32 steps, rounded once into the input's dtype."""
    found = _backward_setup(machine, args, kwargs)
    if found is None:
        return func(*args, **kwargs)
    grad, y, shape, dim, dtype = found
    total = row_sums(machine, grad, FP32, accumulate=FP32)
    result = compiled(log_softmax_grad_steps)(grad, y, total[:, None], step_options=step_options(**machine.step))
    return _back(machine, result, shape, dim, dtype, args[1])


_NONE, _MEAN, _SUM = 0, 1, 2  # torch's Reduction enum


def _nll_setup(args, kwargs):
    x, target = args[0], args[1]
    weight = aten_arg(args, kwargs, 2, "weight")
    reduction = aten_arg(args, kwargs, 3, "reduction", _MEAN)
    ignore_index = aten_arg(args, kwargs, 4, "ignore_index", -100)
    if weight is not None:
        raise NotEmulated("nll_loss with class weights")
    rows = x.reshape(1, -1) if x.dim() == 1 else x
    if rows.dim() != 2:
        raise NotEmulated("nll_loss of more than two dimensions")
    labels = target.reshape(-1).numpy().astype(np.int64)
    keep = labels != ignore_index
    return x, rows, labels, keep, reduction


@implements("nll_loss_forward", inplace=False)
def nll_loss_forward(machine, func, args, kwargs):
    """``-x[i, t_i]`` per sample (exact); ``sum``: the FP32 sum of those, ``mean``: that sum divided
    by the count of samples not ignored in one FP32 step; one rounding. Returns (loss, total weight)."""
    x = args[0]
    if not is_emulated(x.dtype):
        return func(*args, **kwargs)
    x, rows, labels, keep, reduction = _nll_setup(args, kwargs)
    fmt = DTYPE_FORMATS[x.dtype]
    patterns = bits(rows)
    picked = patterns[np.arange(rows.shape[0]), np.where(keep, labels, 0)] ^ fmt.dtype(fmt.sign_mask)
    picked = np.where(keep, picked, fmt.dtype(0))
    count = int(keep.sum())
    total_weight = from_bits(np.asarray(fmt.from_float(np.int64(count))), x.dtype, ())
    if reduction == _NONE:
        loss = from_bits(picked, x.dtype, (rows.shape[0],) if x.dim() == 2 else ())
        return loss, total_weight
    total = row_sums(machine, machine.widen(picked[keep], fmt).reshape(1, -1), FP32, accumulate=FP32)[0]
    if reduction == _MEAN:
        total = machine.div(total, FP32.from_float(np.int64(count)))
    return from_bits(machine.narrow(total, fmt), x.dtype, ()), total_weight


@implements("nll_loss_backward", inplace=False)
def nll_loss_backward(machine, func, args, kwargs):
    """Zeros but ``-g / total_weight`` (mean; ``-g`` for sum, ``-g_i`` for none) at each sample's
    target: an FP32 division, one rounding."""
    grad, x = args[0], args[1]
    if not (is_emulated(x.dtype) and is_emulated(grad.dtype)):
        return func(*args, **kwargs)
    _, rows, labels, keep, reduction = _nll_setup(args[1:], {k: v for k, v in kwargs.items() if k != "grad_output"})
    total_weight = aten_arg(args, kwargs, 6, "total_weight")
    fmt = DTYPE_FORMATS[x.dtype]
    g = machine.widen(bits(grad.to(x.dtype) if grad.dtype != x.dtype else grad), fmt)
    if reduction == _MEAN:
        g = machine.div(g, machine.widen(bits(total_weight.to(x.dtype)), fmt))
    values = machine.narrow(machine.neg(np.broadcast_to(g, (rows.shape[0],))), fmt)
    result = np.zeros(rows.shape, dtype=fmt.dtype)
    index = np.flatnonzero(keep)
    result[index, labels[index]] = values[index]
    return from_bits(result, x.dtype, x.shape)
