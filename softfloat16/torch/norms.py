"""Vector norms: ``linalg_vector_norm`` (``torch.linalg.vector_norm``, ``torch.norm``,
``_foreach_norm``, ``clip_grad_norm_``) and the older ``aten.norm`` overloads.

Each op is written as torch 2.13's CPU kernel computes it (x86-64: the AVX2 kernels, which torch
also runs on AVX-512 machines), with the mode's conventions: operands widened exactly to FP32, each
step an emulated FP32 operation with the machine's rounding, NaN profile and FTZ, one final rounding
into the result's format. ``pow`` is the emulated FP32 algorithm of :mod:`softfloat16.fp32math`, not
Sleef's. docs/torch.md lists what is computed and the measured differences.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from .activations import _no_out, pow32
from .elementwise import ONE32, _native
from .machine import FP32, scalar_bits
from .operands import is_scalar, meta_call
from .reductions import _dims, _rows, row_extreme, row_sums
from .registry import NotEmulated, aten, aten_arg, implements
from .steps import ieee_16_or_32
from .tensors import DTYPE_FORMATS, from_bits, is_emulated

__all__ = ["linalg_vector_norm", "norm"]


@implements("linalg_vector_norm", inplace=False)
def linalg_vector_norm(machine, func, args, kwargs):
    """``torch.linalg.vector_norm`` (and ``torch.norm``, ``_foreach_norm``, ``clip_grad_norm_``) as
    torch CPU's reduction kernels define it, over the reduced elements in row-major order:
    ord 2 ``sqrt(sum(x * x))`` (squares rounded to FP32, the FP32 sum of ``sum``'s order), 1
    ``sum(|x|)``, inf / -inf ``max |x|`` / ``min |x|`` (a NaN wins), 0 the count of nonzero
    elements (NaN counts), any other p ``pow(sum(pow(|x|, p)), 1 / p)`` (fp32math.pow, ``1 / p`` an FP32
    division); one rounding. ``dtype`` converts first; reducing only dimensions of size 1 gives ``|x|``
    (``x != 0`` for ord 0), as torch."""
    self = args[0]
    ord_ = aten_arg(args, kwargs, 1, "ord", 2)
    dim = aten_arg(args, kwargs, 2, "dim")
    dtype = kwargs.get("dtype")
    _no_out(func, kwargs)
    out = meta_call(func, args, kwargs)  # torch's checks, result dtype and shape
    if not is_emulated(out.dtype):
        return _native(func, args, kwargs)
    if not is_emulated(self.dtype):
        raise NotEmulated(f"{func} of a {self.dtype} tensor")
    if isinstance(ord_, torch.Tensor) or not is_scalar(ord_):
        raise NotEmulated(f"{func}: ord {ord_!r}")
    x = self if dtype is None or dtype == self.dtype else machine.convert(self, dtype)
    fmt = ieee_16_or_32(func, DTYPE_FORMATS[out.dtype])
    if x.numel() == 0:
        return _native(func, args, kwargs)  # torch's zeros, or its refusal
    p = float(ord_)
    dims = _dims(x, dim)
    rows = np.asarray(_rows(x, dims))
    magnitudes = rows & fmt.dtype(fmt.magnitude_mask)
    if rows.shape[1] == 1:  # torch: abs(x), or x != 0 for ord 0, in the result's dtype
        result = (~fmt.eq(rows, fmt.dtype(0))).astype(fmt.dtype) * fmt.dtype(fmt.one) if p == 0 else magnitudes
        return from_bits(result[:, 0], out.dtype, out.shape)
    if p in (math.inf, -math.inf):
        return from_bits(row_extreme(machine, magnitudes, fmt, largest=p > 0), out.dtype, out.shape)
    if p == 0:
        counted = np.where(fmt.eq(rows, fmt.dtype(0)), fmt.dtype(0), fmt.dtype(fmt.one))
        total = row_sums(machine, counted, fmt, FP32)
    elif p == 1:
        total = row_sums(machine, magnitudes, fmt, FP32)
    else:
        wide = np.asarray(machine.widen(magnitudes, fmt))
        if p == 2:
            terms = machine.mul(wide, wide)
        else:
            terms = pow32(machine, wide, scalar_bits(p, FP32, machine.nan))
        total = row_sums(machine, np.asarray(terms), FP32, FP32)
        if p == 2:
            total = machine.sqrt(total)
        else:
            reciprocal = machine.div(ONE32, scalar_bits(p, FP32, machine.nan))
            total = pow32(machine, total, reciprocal)
    return from_bits(machine.narrow(np.asarray(total), fmt), out.dtype, out.shape)


@implements("norm", inplace=False)
def norm(machine, func, args, kwargs):
    """The older ``aten.norm`` overloads (reached from C++ callers; ``torch.norm`` itself calls
    ``linalg_vector_norm``): ``linalg_vector_norm`` with ``p`` (None: 2), ``dim``, ``keepdim``, ``dtype``."""
    name = func._overloadname
    if name not in ("Scalar", "ScalarOpt_dim", "ScalarOpt_dtype", "ScalarOpt_dim_dtype"):
        raise NotEmulated(f"{func}")
    p = aten_arg(args, kwargs, 1, "p")
    dim = aten_arg(args, kwargs, 2, "dim") if "dim" in name else None
    keepdim = bool(aten_arg(args, kwargs, 3, "keepdim", False)) if "dim" in name else False
    call = {"dtype": kwargs["dtype"]} if kwargs.get("dtype") is not None else {}
    return linalg_vector_norm(machine, aten.linalg_vector_norm.default,
                              (args[0], 2 if p is None else p, dim, keepdim), call)
