"""Grouped GEMM on the emulator: ``torch._grouped_mm`` (``torch.nn.functional.grouped_mm``), the
matmul of mixture-of-experts layers, group by group through the mm path of :mod:`.linear`.

torch CPU's kernel (``_grouped_mm_fallback``; float16, bfloat16 or float32, both operands and the
output of one dtype, no bias) runs one ``mm`` per group, the groups cut by ``offs``
(int32 cumulative ends, one per group):

- 2-D ``a`` (M, K) x 3-D ``b`` (G, K, N): rows ``offs[g-1]:offs[g]`` of ``a`` times ``b[g]``, out (M, N);
- 3-D ``a`` (G, M, K) x 2-D ``b`` (K, N): ``a[g]`` times columns ``offs[g-1]:offs[g]`` of ``b``, out (M, N);
- 2-D ``a`` (M, K) x 2-D ``b`` (K, N): columns of ``a`` and rows of ``b`` ``offs[g-1]:offs[g]``, out (G, M, N);
- 3-D x 3-D (no ``offs``): ``bmm``.

Each group is ``accumulate_products`` (exact products accumulated in the machine's ``accumulate``
format and ``order``), then one rounding into the output dtype, as ``mm``. torch leaves the rows
(columns) past ``offs[-1]`` unwritten; the mode writes +0 there. An empty contraction (a 2-D x 2-D
group with no columns) is +0, as torch's ``mm`` with ``K = 0``.
"""
from __future__ import annotations

import numpy as np
import torch

from .linear import accumulate_products
from .machine import Machine
from .registry import NotEmulated, aten_arg, implements
from .tensors import DTYPE_FORMATS, from_bits, is_emulated

__all__ = ["grouped_mm"]


def _bounds(offs: torch.Tensor, limit: int) -> list[tuple[int, int]]:
    """(start, end) of each group from cumulative ends, checked non-decreasing and within ``limit``."""
    ends = [int(v) for v in offs.tolist()]
    starts = [0] + ends[:-1]
    if any(end < start for start, end in zip(starts, ends)) or (ends and ends[-1] > limit):
        raise ValueError(f"offs: expected non-decreasing group ends within [0, {limit}], got {ends}")
    return list(zip(starts, ends))


def _product(machine: Machine, a: torch.Tensor, b: torch.Tensor) -> np.ndarray:
    """FP32 accumulators of ``a @ b`` (+0 for an empty contraction or an empty group)."""
    if a.shape[0] == 0 or b.shape[1] == 0 or a.shape[1] == 0:
        return np.zeros((a.shape[0], b.shape[1]), np.uint32)
    return accumulate_products(machine, a, b)


_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def _check_strides(matrix: torch.Tensor, name: str) -> None:
    """torch's rule: one of the last two dimensions unit-stride, the other's stride a multiple of 16 bytes."""
    rows, columns = matrix.stride(-2), matrix.stride(-1)
    alignment = 16 // matrix.element_size()
    if rows == 1 and columns >= max(1, matrix.shape[-2]):
        leading = columns
    elif columns == 1 and rows >= max(1, matrix.shape[-1]):
        leading = rows
    else:
        raise ValueError(f"{name}: invalid strides {matrix.stride()} for sizes {tuple(matrix.shape)}")
    if leading % alignment:
        raise ValueError(f"{name}: strides should be multiples of 16 bytes, got {matrix.stride()}")


def _output_shape(a: torch.Tensor, b: torch.Tensor, offs, out_dtype) -> tuple[int, ...]:
    """torch CPU's checks of ``_grouped_mm``'s arguments, and the output's shape."""
    for name, matrix in (("mat_a", a), ("mat_b", b)):
        if matrix.dtype not in _DTYPES or matrix.dim() not in (2, 3):
            raise ValueError(f"{name}: expected a 2-D or 3-D float16, bfloat16 or float32 tensor, got "
                             f"{matrix.dim()}-D {matrix.dtype}")
        _check_strides(matrix, name)
    if b.dtype != a.dtype:
        raise ValueError(f"mat_b: dtype {b.dtype} differs from mat_a's {a.dtype}")
    if out_dtype is not None and out_dtype != a.dtype:
        raise ValueError(f"out_dtype: must be mat_a's dtype {a.dtype}, got {out_dtype}")
    if (a.dim() == 3 or b.dim() == 3) and a.shape[-1] != b.shape[-2]:
        raise ValueError(f"mat_b: contraction dimension {b.shape[-2]} differs from mat_a's {a.shape[-1]}")
    if (offs is not None) != (a.dim() == 2 or b.dim() == 2):
        raise ValueError("offs: required when a matrix is 2-D, refused when both are 3-D")
    if offs is not None and (offs.dim() != 1 or offs.dtype != torch.int32):
        raise ValueError(f"offs: expected a 1-D int32 tensor, got {offs.dim()}-D {offs.dtype}")
    groups = offs.shape[0] if offs is not None else a.shape[0]
    if (a.dim() == 3 and a.shape[0] != groups) or (b.dim() == 3 and b.shape[0] != groups):
        raise ValueError(f"offs: {groups} groups for batch sizes {tuple(a.shape)} and {tuple(b.shape)}")
    if a.dim() == 2 and b.dim() == 2:
        return (groups, a.shape[0], b.shape[1])
    if a.dim() == 3 and b.dim() == 3:
        return (groups, a.shape[1], b.shape[2])
    return (a.shape[0], b.shape[-1]) if a.dim() == 2 else (a.shape[1], b.shape[1])


@implements("_grouped_mm", inplace=False)
def grouped_mm(machine, func, args, kwargs):
    """``_grouped_mm(a, b, offs=None, bias=None, out_dtype=None)``: one emulated mm per group (module
    docstring), each rounded once into the output dtype."""
    a, b = args[0], args[1]
    if not is_emulated(a.dtype):
        return func(*args, **kwargs)
    if func._overloadname != "default":
        raise NotEmulated(f"{func}: only the default overload is emulated")
    if aten_arg(args, kwargs, 3, "bias") is not None:
        raise ValueError("bias: not supported by torch's _grouped_mm")
    offs = aten_arg(args, kwargs, 2, "offs")
    shape = _output_shape(a, b, offs, aten_arg(args, kwargs, 4, "out_dtype"))
    acc = np.zeros(shape, np.uint32)
    if a.dim() == 3 and b.dim() == 3:
        for group in range(a.shape[0]):
            acc[group] = _product(machine, a[group], b[group])
    elif a.dim() == 2 and b.dim() == 3:
        for group, (start, end) in enumerate(_bounds(offs, a.shape[0])):
            acc[start:end] = _product(machine, a[start:end], b[group])
    elif a.dim() == 3:
        for group, (start, end) in enumerate(_bounds(offs, b.shape[1])):
            acc[:, start:end] = _product(machine, a[group], b[:, start:end])
    else:
        for group, (start, end) in enumerate(_bounds(offs, a.shape[1])):
            acc[group] = _product(machine, a[:, start:end], b[start:end])
    return from_bits(machine.narrow(acc, DTYPE_FORMATS[a.dtype]), a.dtype, shape)
