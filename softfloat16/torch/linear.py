"""The matmul family (mm, addmm, bmm, baddbmm, mv, dot) through ``softfloat16.linalg.matmul``.

``nn.Linear``, ``torch.matmul`` and ``@`` reach the mode as these ops (plus views and ``t``).
Each output element is ``sum_k a[i,k] * b[k,j]``: exact products accumulated in the machine's
``accumulate`` format in its ``order`` (sequential: k ascending from +0), then, for ``addmm`` /
``baddbmm``, the epilogue ``alpha * acc + beta * bias`` in FP32, and one rounding into the
result's format.
"""
from __future__ import annotations

import numpy as np
import torch

import softfloat16 as sf

from .machine import FP32, Machine, scalar_bits
from .operands import Result, meta_call, operand32
from .registry import NotEmulated, aten_arg, implements
from .tensors import DTYPE_FORMATS, bits, from_bits, is_emulated

__all__ = ["accumulate_products"]


def accumulate_products(machine: Machine, a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """FP32 patterns of the accumulated ``a @ b`` (2-D tensors of one emulated dtype): exact
    products summed in ``machine.accumulate`` in ``machine.order``, widened exactly to FP32; under a
    low-precision recipe (``machine.recipe``) the operands quantised and multiplied as it says
    (softfloat16.torch.recipes)."""
    if machine.recipe is not None:  # a low-precision GEMM recipe: quantised operands on its instruction
        return machine.recipe.products(machine, a, b)
    if a.dtype != b.dtype:
        raise NotEmulated(f"a matmul of {a.dtype} and {b.dtype}")
    fmt = DTYPE_FORMATS[a.dtype]
    if fmt.precision > 24 or not fmt.has_arithmetic:
        raise NotEmulated(f"a matmul of {fmt.name}")
    return np.asarray(sf.linalg.matmul(bits(a), bits(b), fmt, accumulate=machine.accumulate, out_format=FP32,
                                       rounding=machine.step["rounding"], **machine.gemm_policy(fmt)))


def _batched(machine: Machine, a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    if a.shape[0] != b.shape[0]:
        raise NotEmulated("batch sizes differ")
    out = np.empty((a.shape[0], a.shape[1], b.shape[2]), dtype=np.uint32)
    for index in range(a.shape[0]):
        out[index] = accumulate_products(machine, a[index], b[index])
    return out


def _epilogue(machine: Machine, acc32: np.ndarray, dtype: torch.dtype, bias, alpha, beta) -> np.ndarray:
    """``alpha * acc + beta * bias`` in FP32 steps (alpha and beta as FP32 scalars; a zero beta
    ignores bias, NaNs included, as BLAS does)."""
    result = acc32
    if alpha != 1:
        result = machine.mul(scalar_bits(alpha, FP32, machine.nan), result)
    if bias is not None and beta != 0:
        addend = operand32(machine, bias, dtype)
        if beta != 1:
            addend = machine.mul(scalar_bits(beta, FP32, machine.nan), addend)
        result = machine.add(result, addend)
    return np.asarray(result)


def _finish(machine: Machine, acc32, out) -> torch.Tensor:
    return from_bits(machine.narrow(acc32, DTYPE_FORMATS[out.dtype]), out.dtype, out.shape)


def _product_result(func, args, kwargs) -> Result:
    """dtype and shape of mm / bmm / mv / dot, directly for well-formed operands of one dtype
    (a meta call costs ~0.2 ms); torch's own answer (and its errors) otherwise."""
    a, b = args[0], args[1]
    name = func.overloadpacket.__name__
    dims = {"mm": (2, 2), "bmm": (3, 3), "mv": (2, 1), "dot": (1, 1)}[name]
    if (not kwargs and len(args) == 2 and a.dtype == b.dtype and (a.dim(), b.dim()) == dims
            and a.shape[-1] == b.shape[-2 if b.dim() > 1 else 0] and (name != "bmm" or a.shape[0] == b.shape[0])):
        shape = {"mm": lambda: (a.shape[0], b.shape[1]), "bmm": lambda: (a.shape[0], a.shape[1], b.shape[2]),
                 "mv": lambda: (a.shape[0],), "dot": lambda: ()}[name]()
        return Result(a.dtype, torch.Size(shape))
    out = meta_call(func, args, kwargs)
    return Result(out.dtype, out.shape)


@implements("mm", "bmm", "mv", "dot", inplace=False)
def mm(machine, func, args, kwargs):
    """``a @ b`` for matrices (mm), batches of matrices (bmm), matrix-vector (mv), vectors (dot)."""
    a, b = args[0], args[1]
    name = func.overloadpacket.__name__
    out = _product_result(func, args, kwargs)
    if not is_emulated(out.dtype):
        return func(*args, **kwargs)
    if name == "bmm":
        acc = _batched(machine, a, b)
    elif name == "mv":
        acc = accumulate_products(machine, a, b.unsqueeze(1))
    elif name == "dot":
        acc = accumulate_products(machine, a.unsqueeze(0), b.unsqueeze(1))
    else:
        acc = accumulate_products(machine, a, b)
    return _finish(machine, acc, out)


@implements("addmm", "baddbmm", inplace=True)
def addmm(machine, func, args, kwargs):
    """``beta * self + alpha * (mat1 @ mat2)`` (batched: baddbmm): the accumulated products, then
    the epilogue in FP32, one rounding (``nn.Linear``: ``x @ W.T + b``)."""
    out = meta_call(func, args, kwargs)
    if not is_emulated(out.dtype):
        return func(*args, **kwargs)
    bias, a, b = args[0], args[1], args[2]
    beta, alpha = aten_arg(args, kwargs, 3, "beta", 1), aten_arg(args, kwargs, 4, "alpha", 1)
    if func.overloadpacket.__name__ == "baddbmm":
        acc = _batched(machine, a, b)
    else:
        acc = accumulate_products(machine, a, b)
    bias = bias.expand(out.shape) if isinstance(bias, torch.Tensor) else bias
    return _finish(machine, _epilogue(machine, acc, out.dtype, bias, alpha, beta), out)
