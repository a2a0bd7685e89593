"""Elementwise aten ops on the emulator: arithmetic, comparisons, selections, fills and casts.

Arithmetic on FP16/BF16/FP8 results follows torch's opmath: operands widened to FP32, each step
an FP32 operation, one rounding into the result's format (``Machine.narrow``). FP32 results are
the FP32 steps themselves. Float64, complex, integer and boolean results are left to torch.
"""
from __future__ import annotations

import numpy as np
import torch

from .machine import Machine, scalar_bits
from .operands import as_signed, elementwise_result, fill_bits, is_scalar, operand32, operand_bits, unary_shape
from .registry import NotEmulated, aten, aten_arg, implements
from .tensors import DTYPE_FORMATS, INTEGER_VIEWS, bits, format_of, from_bits, is_emulated, with_layout

ONE32 = np.uint32(0x3F800000)


def _native(func, args, kwargs):
    return func(*args, **kwargs)


def _result(machine: Machine, patterns32, dtype: torch.dtype, shape) -> torch.Tensor:
    return from_bits(machine.narrow(patterns32, DTYPE_FORMATS[dtype]), dtype, shape)


def _direct(machine: Machine, dtype: torch.dtype) -> bool:
    """Whether an FP32 step of FP16/BF16 operands, rounded into the format, may be computed as one
    correctly rounded operation in the format itself: the same bits for + - * / sqrt (FP32 has
    at least 2p+2 bits, so rounding twice equals rounding once; the directed modes nest;
    tests/test_torch_mode.py checks every mode), but not under FTZ (the FP32 step flushes by FP32's
    threshold) or "sr" (stochastic rounding of an FP32 value, not of the exact one). Only a
    shortcut: one kernel call, not four."""
    return dtype in (torch.float16, torch.bfloat16) and not machine.ftz and machine.rounding != "sr"


# -- + - * / -------------------------------------------------------------------------------------
@implements("add", "sub", "rsub")
def add_sub(machine: Machine, func, args, kwargs):
    """``self + alpha * other`` (``sub``: minus; ``rsub``: ``other - alpha * self``). ``other``
    and ``alpha`` are first converted to the result's dtype, as torch does; with ``alpha != 1``
    the FP32 step is one fma (torch CPU: ``vec::fmadd``; for FP16/BF16 the product is exact)."""
    out = elementwise_result(func, args, kwargs)
    if not is_emulated(out.dtype):
        return _native(func, args, kwargs)
    self, other = args[0], aten_arg(args, kwargs, 1, "other")
    alpha = aten_arg(args, kwargs, 2, "alpha", 1)
    packet = func.overloadpacket
    if packet is aten.rsub:
        self, other = other, self
    subtract = packet is not aten.add
    plain = alpha == 1 and not isinstance(alpha, bool)
    if plain and _direct(machine, out.dtype):
        fmt = DTYPE_FORMATS[out.dtype]
        a, b = operand_bits(machine, self, out.dtype), operand_bits(machine, other, out.dtype)
        result = (fmt.sub if subtract else fmt.add)(a, b, **machine.final())
        return from_bits(result, out.dtype, out.shape)
    a, b = operand32(machine, self, out.dtype), operand32(machine, other, out.dtype)
    if plain:
        result = machine.sub(a, b) if subtract else machine.add(a, b)
    else:
        scale = operand32(machine, alpha, out.dtype)
        result = machine.fma(b, machine.neg(scale) if subtract else scale, a)
    return _result(machine, result, out.dtype, out.shape)


@implements("mul")  # div: division.py (true division through mul_div)
def mul_div(machine: Machine, func, args, kwargs):
    """``self * other``, ``self / other`` (true division only). A scalar ``other`` enters the FP32
    step as an FP32 value, not rounded to the tensor's format first (torch CPU's reduced-float
    kernels read the original scalar)."""
    if func.overloadpacket is aten.div and aten_arg(args, kwargs, 2, "rounding_mode") is not None:
        raise NotEmulated("div with rounding_mode")
    out = elementwise_result(func, args, kwargs)
    if not is_emulated(out.dtype):
        return _native(func, args, kwargs)
    self, other = args[0], aten_arg(args, kwargs, 1, "other")
    multiply = func.overloadpacket is aten.mul
    if _direct(machine, out.dtype) and all(isinstance(x, torch.Tensor) and x.dtype == out.dtype for x in (self, other)):
        fmt = DTYPE_FORMATS[out.dtype]
        result = (fmt.mul if multiply else fmt.div)(bits(self), bits(other), **machine.final())
        return from_bits(result, out.dtype, out.shape)
    a = operand32(machine, self, out.dtype)
    b = operand32(machine, other, out.dtype, scalar="opmath")
    result = machine.mul(a, b) if multiply else machine.div(a, b)
    return _result(machine, result, out.dtype, out.shape)


# -- unary -----------------------------------------------------------------------------------------
def _unary(machine: Machine, func, args, kwargs, step):
    out = elementwise_result(func, args, kwargs)
    if not is_emulated(out.dtype):
        return _native(func, args, kwargs)
    return _result(machine, step(operand32(machine, args[0], out.dtype)), out.dtype, out.shape)


@implements("sqrt")
def sqrt(machine, func, args, kwargs):
    """Square root in FP32, rounded once into the format (correctly rounded)."""
    x = args[0]
    if isinstance(x, torch.Tensor) and _direct(machine, x.dtype):
        return from_bits(DTYPE_FORMATS[x.dtype].sqrt(bits(x), **machine.final()), x.dtype, unary_shape(x))
    return _unary(machine, func, args, kwargs, machine.sqrt)


@implements("rsqrt")
def rsqrt(machine, func, args, kwargs):
    """``1 / sqrt(x)`` as two FP32 steps (sqrt, then divide), then one rounding into the format:
    torch CPU's definition (bit-identical for all FP16 and BF16 inputs)."""
    return _unary(machine, func, args, kwargs, lambda x: machine.div(ONE32, machine.sqrt(x)))


@implements("reciprocal")
def reciprocal(machine, func, args, kwargs):
    """``1 / x``: one FP32 division, one rounding (correctly rounded)."""
    x = args[0]
    if isinstance(x, torch.Tensor) and _direct(machine, x.dtype):
        fmt = DTYPE_FORMATS[x.dtype]
        return from_bits(fmt.div(fmt.dtype(fmt.one), bits(x), **machine.final()), x.dtype, unary_shape(x))
    return _unary(machine, func, args, kwargs, lambda x: machine.div(ONE32, x))


def _sign_op(machine, func, args, kwargs, negate: bool):
    out = elementwise_result(func, args, kwargs)
    fmt = format_of(out.dtype)
    if fmt is None:
        return _native(func, args, kwargs)
    if not fmt.signed:
        raise NotEmulated(f"{func} of the unsigned {fmt.name}")
    x = operand_bits(machine, args[0], out.dtype)
    sign = fmt.dtype(fmt.sign_mask)
    result = x ^ sign if negate else x & fmt.dtype(~fmt.sign_mask & ((1 << fmt.width) - 1))
    if not fmt.has_negative_zero:  # FNUZ: 0x80 is the NaN and zero has one sign
        result = np.where(fmt.is_nan(x) | fmt.is_zero(x), x, result)
    return from_bits(result, out.dtype, out.shape)


@implements("neg")
def neg(machine, func, args, kwargs):
    """Sign flip of the bits (IEEE negate: exact, NaN payload and signaling kept)."""
    return _sign_op(machine, func, args, kwargs, negate=True)


@implements("abs")
def abs_(machine, func, args, kwargs):
    """Sign cleared (IEEE abs: exact, NaN payload kept)."""
    return _sign_op(machine, func, args, kwargs, negate=False)


# -- comparisons and selections --------------------------------------------------------------------
def _common(machine: Machine, func, args, kwargs, names=("self", "other")):
    """(result meta, common dtype, operand bit arrays in that dtype's format) for a binary op."""
    a, b = args[0], aten_arg(args, kwargs, 1, names[1])
    common = torch.result_type(a, b)
    if not is_emulated(common):
        return common, None, None
    return common, operand_bits(machine, a, common), operand_bits(machine, b, common)


_COMPARE = {"eq": ("eq", False), "ne": ("eq", True), "lt": ("lt", False), "le": ("le", False),
            "gt": ("lt", False), "ge": ("le", False)}


@implements("eq", "ne", "lt", "le", "gt", "ge")
def compare(machine, func, args, kwargs):
    """IEEE quiet comparisons in the common dtype (a Python scalar converted to it first, as torch
    does): NaN compares unequal and unordered."""
    common, a, b = _common(machine, func, args, kwargs)
    if not is_emulated(common):
        return _native(func, args, kwargs)
    name = func.overloadpacket.__name__
    test, invert = _COMPARE[name]
    if name in ("gt", "ge"):
        a, b = b, a
    result = getattr(DTYPE_FORMATS[common], test)(a, b)
    result = np.logical_not(result) if invert else np.asarray(result)
    out = elementwise_result(func, args, kwargs)
    return with_layout(torch.from_numpy(np.array(np.broadcast_to(result, out.shape), dtype=np.bool_)), out.shape)


def _pick(machine: Machine, fmt, a, b, largest: bool, ignore_nan: bool):
    """IEEE 754-2019 maximum / minimum (``-0 < +0``); NaN propagates per the NaN profile, or is
    ignored when the other operand is a number (``fmax``/``fmin``)."""
    first, second = (a, b) if largest else (b, a)
    zero_a, zero_b = fmt.is_zero(a), fmt.is_zero(b)
    sign = fmt.dtype(fmt.sign_mask)
    a_negative_zero = zero_a & ((a & sign) != 0) & zero_b & ((b & sign) == 0)
    b_negative_zero = zero_b & ((b & sign) != 0) & zero_a & ((a & sign) == 0)
    take_b = fmt.lt(first, second) | (a_negative_zero if largest else b_negative_zero)
    result = np.where(take_b, b, a)
    nan_a, nan_b = fmt.is_nan(a), fmt.is_nan(b)
    if ignore_nan:
        result = np.where(nan_a & ~nan_b, b, np.where(nan_b & ~nan_a, a, result))
        nan = nan_a & nan_b
    else:
        nan = nan_a | nan_b
    if nan.any():
        result = np.where(nan, machine.propagate_nan(fmt, a, b), result)
    return result


@implements("maximum", "minimum", "fmax", "fmin")
def maximum(machine, func, args, kwargs):
    """Elementwise maximum / minimum: exact selection, ``-0 < +0``; a NaN operand gives the NaN
    profile's NaN (``fmax``/``fmin`` ignore a NaN next to a number)."""
    common, a, b = _common(machine, func, args, kwargs)
    if not is_emulated(common):
        return _native(func, args, kwargs)
    name = func.overloadpacket.__name__
    out = elementwise_result(func, args, kwargs)
    fmt = DTYPE_FORMATS[common]
    result = _pick(machine, fmt, np.asarray(a), np.asarray(b), largest=name in ("maximum", "fmax"),
                   ignore_nan=name.startswith("f"))
    return from_bits(result, common, out.shape)


@implements("clamp", "clamp_min", "clamp_max")
def clamp(machine, func, args, kwargs):
    """``x < min ? min : x``, then ``x > max ? max : x``, bounds converted to the result's dtype:
    exact selection keeping ``x`` when it equals a bound (so ``clamp(-0, min=0) = -0``, as torch);
    a NaN ``x`` or bound gives the profile's NaN."""
    out = elementwise_result(func, args, kwargs)
    if not is_emulated(out.dtype):
        return _native(func, args, kwargs)
    name = func.overloadpacket.__name__
    if name == "clamp":
        low, high = aten_arg(args, kwargs, 1, "min"), aten_arg(args, kwargs, 2, "max")
    elif name == "clamp_min":
        low, high = aten_arg(args, kwargs, 1, "min"), None
    else:
        low, high = None, aten_arg(args, kwargs, 1, "max")
    fmt = DTYPE_FORMATS[out.dtype]
    x = operand_bits(machine, args[0], out.dtype)
    result, first_nan = x, x  # first_nan: the first NaN among x, min, max (where there is one)
    for bound, below in ((low, True), (high, False)):
        if bound is None:
            continue
        limit = operand_bits(machine, bound, out.dtype)
        result = np.where(fmt.lt(result, limit) if below else fmt.lt(limit, result), limit, result)
        first_nan = np.where(fmt.is_nan(first_nan), first_nan, limit)
    nan = fmt.is_nan(first_nan)
    if nan.any():
        result = np.where(nan, machine.propagate_nan(fmt, first_nan), result)
    return from_bits(np.broadcast_to(result, out.shape), out.dtype, out.shape)


@implements("relu")
def relu(machine, func, args, kwargs):
    """``x < 0 ? +0 : x`` (so ``relu(-0) = -0``, as torch CPU); NaN: the profile's propagated NaN."""
    out = elementwise_result(func, args, kwargs)
    if not is_emulated(out.dtype):
        return _native(func, args, kwargs)
    fmt = DTYPE_FORMATS[out.dtype]
    x = operand_bits(machine, args[0], out.dtype)
    result = np.where(fmt.lt(x, fmt.dtype(0)), fmt.dtype(0), x)
    nan = fmt.is_nan(x)
    if nan.any():
        result = np.where(nan, machine.propagate_nan(fmt, x), result)
    return from_bits(result, out.dtype, out.shape)


@implements("threshold_backward", inplace=False)
def threshold_backward(machine, func, args, kwargs):
    """``self <= threshold ? +0 : grad_output`` (ReLU's backward): exact selection, grad bits kept."""
    out = elementwise_result(func, args, kwargs)
    if not is_emulated(out.dtype):
        return _native(func, args, kwargs)
    grad, self, threshold = args[0], args[1], aten_arg(args, kwargs, 2, "threshold")
    fmt = DTYPE_FORMATS[out.dtype]
    x = operand_bits(machine, self, out.dtype)
    below = fmt.le(x, operand_bits(machine, threshold, out.dtype))
    result = np.where(below, fmt.dtype(0), operand_bits(machine, grad, out.dtype))
    return from_bits(result, out.dtype, out.shape)


@implements("threshold")
def threshold(machine, func, args, kwargs):
    """``self <= threshold ? value : self``, threshold and value converted to the dtype."""
    out = elementwise_result(func, args, kwargs)
    if not is_emulated(out.dtype):
        return _native(func, args, kwargs)
    fmt = DTYPE_FORMATS[out.dtype]
    x = operand_bits(machine, args[0], out.dtype)
    limit = operand_bits(machine, aten_arg(args, kwargs, 1, "threshold"), out.dtype)
    value = operand_bits(machine, aten_arg(args, kwargs, 2, "value"), out.dtype)
    return from_bits(np.where(fmt.le(x, limit), value, x), out.dtype, out.shape)


@implements("where", inplace=False)
def where(machine, func, args, kwargs):
    """Selection, after converting both branches to the result's dtype (rounded by the machine)."""
    if len(args) + len(kwargs) == 1:  # where(condition): the indices of nonzero elements
        return _native(func, args, kwargs)
    out = elementwise_result(func, args, kwargs)
    if not is_emulated(out.dtype):
        return _native(func, args, kwargs)
    condition = args[0]
    branches = [aten_arg(args, kwargs, 1, "self"), aten_arg(args, kwargs, 2, "other")]
    # Branches already of the result's dtype go in as they are (torch then lays the result out
    # from them); converted ones keep their layout.
    converted = [x if isinstance(x, torch.Tensor) and x.dtype == out.dtype else from_bits(
        operand_bits(machine, x, out.dtype), out.dtype, unary_shape(x) if isinstance(x, torch.Tensor) else ())
        for x in branches]
    return torch.where(condition, *converted)


# -- values: fills and casts -----------------------------------------------------------------------
@implements("full", "scalar_tensor", "full_like", "new_full", inplace=False)
def full(machine, func, args, kwargs):
    """Tensors of one value: the value converted as torch converts a scalar (double -> float32 ->
    format, to nearest even), written as bits. Torch runs the op first, for its dtype, layout and
    its refusals (a finite value beyond float32's range raises, in some ops and sizes)."""
    name = func.overloadpacket.__name__
    index = {"full": 1, "scalar_tensor": 0, "full_like": 1, "new_full": 2}[name]
    value = aten_arg(args, kwargs, index, "s" if name == "scalar_tensor" else "fill_value")
    result = func(*args, **kwargs)
    if not is_scalar(value) or not is_emulated(result.dtype):
        return result
    return fill_bits(result, scalar_bits(value, DTYPE_FORMATS[result.dtype], machine.nan))


def _fill_value(machine, self, value) -> int:
    """The value as ``self``'s integer view holds its bit pattern."""
    return as_signed(operand_bits(machine, value, self.dtype), DTYPE_FORMATS[self.dtype])


@implements("fill", "fill_", inplace=False)
def fill(machine, func, args, kwargs):
    """``fill`` / ``fill_``: torch fills (and refuses what it refuses), then the bits are written."""
    result = func(*args, **kwargs)
    self, value = args[0], aten_arg(args, kwargs, 1, "value")
    if not is_emulated(self.dtype):
        return result
    result.view(INTEGER_VIEWS[result.element_size()]).fill_(_fill_value(machine, self, value))
    return result


@implements("masked_fill", "masked_fill_", inplace=False)
def masked_fill(machine, func, args, kwargs):
    """``self.masked_fill(mask, value)``: the value converted as torch converts a scalar (a tensor
    value by the machine) and written where ``mask`` is set; the fill itself is native (it moves bits)."""
    result = func(*args, **kwargs)
    self, mask, value = args[0], args[1], aten_arg(args, kwargs, 2, "value")
    if not is_emulated(self.dtype):
        return result
    result.view(INTEGER_VIEWS[result.element_size()]).masked_fill_(mask, _fill_value(machine, self, value))
    return result


@implements("scatter", "scatter_", inplace=False)
def scatter(machine, func, args, kwargs):
    """``self.scatter_(dim, index, src or value)`` without ``reduce``: a scalar value converted as
    torch converts a scalar, a ``src`` of another dtype by the machine; the scatter itself is
    native (it moves bits). ``reduce="add"``/``"multiply"`` compute, and are not emulated."""
    self, dim, index = args[0], aten_arg(args, kwargs, 1, "dim"), aten_arg(args, kwargs, 2, "index")
    source = aten_arg(args, kwargs, 3, "value" if func._overloadname.startswith("value") else "src")
    if aten_arg(args, kwargs, 4, "reduce") is not None:
        raise NotEmulated("scatter with reduce")
    if not is_emulated(self.dtype):
        return _native(func, args, kwargs)
    integers = INTEGER_VIEWS[self.element_size()]
    target = self if func.overloadpacket is aten.scatter_ else self.clone()
    if isinstance(source, torch.Tensor):
        source = (source if source.dtype == self.dtype else machine.convert(source, self.dtype)).view(integers)
    else:
        source = _fill_value(machine, self, source)
    target.view(integers).scatter_(dim, index, source)
    return target


@implements("constant_pad_nd", inplace=False)
def constant_pad_nd(machine, func, args, kwargs):
    """Padding with a value converted as a scalar (the padded copy itself is native)."""
    result = func(*args, **kwargs)
    self, pad, value = args[0], aten_arg(args, kwargs, 1, "pad"), aten_arg(args, kwargs, 2, "value", 0)
    if not is_emulated(self.dtype):
        return result
    integers = INTEGER_VIEWS[self.element_size()]
    return func(self.view(integers), pad, _fill_value(machine, self, value)).view(self.dtype)


@implements("_to_copy", inplace=False)
def to_copy(machine, func, args, kwargs):
    """``tensor.to(dtype)``: a conversion into an emulated dtype is rounded by the machine (FP8
    E4M3FN saturating, E5M2 overflowing to inf, as torch converts); float64 and integer sources
    go through FP32 as torch's do. Conversions to float64, integers or bool are native (exact or
    truncating, no choice of rounding)."""
    self, dtype = args[0], kwargs.get("dtype")
    if dtype is None or dtype == self.dtype or not is_emulated(dtype):
        return _native(func, args, kwargs)
    rest = {k: v for k, v in kwargs.items() if k != "dtype"}
    return func(with_layout(machine.convert(self, dtype), unary_shape(self)), *args[1:], **rest)


@implements("copy", inplace=False)
def copy(machine, func, args, kwargs):
    """``self.copy_(src)`` (and its functional form): a ``src`` of another dtype is converted
    by the machine first; the copy itself is native."""
    self, src = args[0], args[1]
    if src.dtype != self.dtype and is_emulated(self.dtype):
        src = machine.convert(src, self.dtype)
    return func(self, src, *args[2:], **kwargs)


@implements("copy_", inplace=False)
def copy_(machine, func, args, kwargs):
    """``self.copy_(src)``: as :func:`copy` (a ``src`` of another dtype converted by the machine)."""
    return copy(machine, func, args, kwargs)
