"""Torch building blocks whose every result is defined to the bit, on CPU and on CUDA.

The torch reference (``exact`` mode) is written with these and with single eager elementwise ops
(``+ - * /``, comparisons, ``where``, conversions), each of which torch computes correctly
rounded: FP16/BF16 arithmetic is done in FP32 and rounded once (exact for + - * /), FP32 and
FP64 arithmetic is IEEE, conversions round to nearest even, subnormals are kept.

What torch has no single op for is built from error-free transformations in FP64:

- :func:`fma32`: ``round32(a*b + c)``. The FP64 product of two FP32 values is exact; the FP64 sum
  is made *round-to-odd* (TwoSum gives its exact error; an inexact sum with an even last bit
  moves one ulp toward the error), and round-to-odd in 53 bits followed by one rounding to 24
  bits is correctly rounded (Boldo and Melquiond, 2008).
- :func:`matmul`: the emulator's sequential accumulation ``((0 + p_0) + p_1) + ...`` as an
  explicit k-loop: FP16 products are exact in FP32 and added with FP32 ``+``; so are BF16
  products (16 significant bits) when every one of them lies in FP32's normal range, which is
  checked first; otherwise, and for FP32 inputs, products are formed exactly in FP64 and added
  with the round-to-odd sum above.
- :func:`sqrt`: ``torch.sqrt`` is *not* correctly rounded on CPU (a vectorized approximation:
  about 1 in 6 random FP32 inputs lands one ulp off), so the square root is estimated in FP64,
  rounded to FP32 and corrected by comparing the exact FP64 squares of the two neighbouring
  midpoints (25 bits, so their squares are exact) with the input.
- :func:`exp32` / :func:`log32`: the operation sequence of :mod:`sim.fp32math`, op for op.

Nothing here imports torch at module level, so the module can be imported (and its doctests
collected) without torch installed.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from sim import fp32math

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["add_round32", "exp32", "fma32", "log32", "matmul", "sequential_sum", "sqrt"]


def _torch():
    import torch

    return torch


def _f32_constant(bits, like: torch.Tensor) -> torch.Tensor:
    """An FP32 scalar tensor holding ``bits`` (a numpy uint32), on ``like``'s device."""
    torch = _torch()
    return torch.tensor(int(bits), dtype=torch.int64).to(torch.int32).view(torch.float32).to(like.device)


def add_round32(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """``round32(x + y)`` for FP64 tensors holding exact values (FP32 values, exact products).

    >>> import pytest; torch = pytest.importorskip("torch")
    >>> x = torch.tensor([1.0], dtype=torch.float64)
    >>> y = torch.tensor([2.0**-24 + 2.0**-60], dtype=torch.float64)  # just above a tie
    >>> add_round32(x, y).item() == 1 + 2.0**-23, (x + y).float().item() == 1.0
    (True, True)
    """
    torch = _torch()
    total = x + y
    b_virtual = total - x
    error = (x - (total - b_virtual)) + (y - b_virtual)  # TwoSum: x + y == total + error exactly
    even = (total.view(torch.int64) & 1) == 0
    toward = torch.where(error > 0, torch.full_like(total, float("inf")), torch.full_like(total, float("-inf")))
    odd = torch.where((error != 0) & even, torch.nextafter(total, toward), total)
    # Infinite or NaN operands make the error NaN; the plain sum is then already right.
    return torch.where(torch.isfinite(total), odd, total).to(torch.float32)


def fma32(a: torch.Tensor, b: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
    """``a * b + c`` with one rounding, for FP32 tensors (broadcasting).

    >>> import pytest; torch = pytest.importorskip("torch")
    >>> one_ulp = torch.tensor([1.0 + 2.0**-23])
    >>> (fma32(one_ulp, one_ulp, torch.tensor([-1.0 - 2.0**-22])) == 2.0**-46).item()
    True
    """
    return add_round32(a.double() * b.double(), c.double())


def sqrt(x: torch.Tensor) -> torch.Tensor:
    """Correctly rounded square root of an FP32, FP16 or BF16 tensor (FP16/BF16 via an exact FP32
    root: rounding a correctly rounded 24-bit root once more to 11 or 8 bits is still correct).

    >>> import pytest; torch = pytest.importorskip("torch")
    >>> sqrt(torch.tensor([4.0, 2.0, -1.0, -0.0])).tolist()
    [2.0, 1.4142135381698608, nan, -0.0]
    """
    torch = _torch()
    if x.dtype != torch.float32:
        return sqrt(x.float()).to(x.dtype)
    root = torch.sqrt(x.double()).float()
    up, down = torch.nextafter(root, torch.full_like(root, float("inf"))), torch.nextafter(root, torch.zeros_like(root))
    wide, value = root.double(), x.double()
    above, below = (wide + up.double()) * 0.5, (wide + down.double()) * 0.5  # exact midpoints
    corrected = torch.where(above * above < value, up, torch.where(below * below > value, down, root))
    # Zeros, infinities, NaN and negative inputs: the FP64 root is already right (or NaN).
    return torch.where(torch.isfinite(x) & (x > 0), corrected, root)


def matmul(a: torch.Tensor, b: torch.Tensor, out_dtype: torch.dtype) -> torch.Tensor:
    """``a @ b`` (2-D, one dtype) as the emulator's sequential FP32 accumulation, rounded once to
    ``out_dtype``: ``acc = +0; acc = round32(acc + a[:, t] * b[t, :])`` for t ascending.

    >>> import pytest; torch = pytest.importorskip("torch")
    >>> a = torch.tensor([[1.0, 2.0**-11]], dtype=torch.float16)
    >>> matmul(a, torch.ones(2, 1, dtype=torch.float16), torch.float32).item() == 1 + 2.0**-11
    True
    """
    torch = _torch()
    if a.dtype != b.dtype or a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: expected (m, k) @ (k, n) of one dtype, got {a.dtype}{tuple(a.shape)} "
                         f"and {b.dtype}{tuple(b.shape)}")
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
    if a.dtype == torch.float16 or (a.dtype == torch.bfloat16 and _products_normal_in_fp32(a, b)):
        left, right = a.float(), b.float()
        for t in range(a.shape[1]):
            acc = acc + left[:, t:t + 1] * right[t:t + 1, :]
    else:
        left, right = a.double(), b.double()
        for t in range(a.shape[1]):
            acc = add_round32(acc.double(), left[:, t:t + 1] * right[t:t + 1, :])
    return acc.to(out_dtype)


def _products_normal_in_fp32(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether every nonzero finite product a[i, t] * b[t, j] lies in FP32's normal range, so an
    FP32 multiply of two BF16 values (8 x 8 significant bits) is exact."""
    torch = _torch()
    magnitudes = []
    for x in (a, b):
        values = x.double().abs()
        values = values[(values > 0) & torch.isfinite(values)]
        if values.numel() == 0:
            return True  # every product is a zero, an infinity or NaN: the same in FP32
        magnitudes.append((values.min().item(), values.max().item()))
    (a_low, a_high), (b_low, b_high) = magnitudes
    return a_low * b_low >= 2.0**-126 and a_high * b_high < 2.0**128  # exact FP64 products


def sequential_sum(x: torch.Tensor, dim: int) -> torch.Tensor:
    """Sum of an FP32 tensor along ``dim`` (0 or 1 of a 2-D tensor, or 0 of a 1-D one) in order
    from +0, one FP32 rounding per addition: what the emulator's matmul with a ones vector does.

    >>> import pytest; torch = pytest.importorskip("torch")
    >>> sequential_sum(torch.tensor([2.0**24, 1.0, 1.0]), 0).item()   # each +1 rounds away
    16777216.0
    """
    torch = _torch()
    moved = x.movedim(dim, 0)
    acc = torch.zeros(moved.shape[1:], dtype=torch.float32, device=x.device)
    for t in range(moved.shape[0]):
        acc = acc + moved[t]
    return acc


def _power_of_two(k: torch.Tensor) -> torch.Tensor:
    """FP32 2**k for integer tensors -126 <= k <= 127 (as fp32math._power_of_two)."""
    torch = _torch()
    return ((k + 127) << 23).to(torch.int32).view(torch.float32)


def _constants(like: torch.Tensor, names: list[str]) -> list[torch.Tensor]:
    return [_f32_constant(getattr(fp32math, name), like) for name in names]


def exp32(x: torch.Tensor) -> torch.Tensor:
    """``e**x`` for an FP32 tensor with :func:`sim.fp32math.exp`'s operation sequence.

    >>> import pytest; torch = pytest.importorskip("torch")
    >>> exp32(torch.tensor([0.0, 1.0, float("-inf")])).tolist()
    [1.0, 2.7182817459106445, 0.0]
    """
    torch = _torch()
    # The constants are fp32math's own bit patterns (private there; shared so both sides agree).
    low, high, inv_ln2, rounder, ln2_hi, ln2_lo, nan = _constants(
        x, ["_EXP_LOW", "_EXP_HIGH", "_INV_LN2", "_ROUNDER", "_LN2_HI", "_LN2_LO", "_NAN"])
    taylor = [_f32_constant(c, x) for c in fp32math._EXP_TAYLOR]
    is_nan = x != x
    x_in = torch.where(x < low, low, torch.where(high < x, high, x))
    x_in = torch.where(is_nan, low, x_in)
    shifted = x_in * inv_ln2 + rounder  # two roundings, as the emulator's mul then add
    k_float = shifted - rounder
    k = shifted.view(torch.int32).to(torch.int64) - rounder.view(torch.int32).to(torch.int64)
    minus_k = -k_float
    r = fma32(minus_k, ln2_hi, x_in)
    r = fma32(minus_k, ln2_lo, r)
    poly = taylor[0].expand_as(r)
    for coefficient in taylor[1:]:
        poly = fma32(poly, r, coefficient)
    k_half = k >> 1
    result = (poly * _power_of_two(k_half)) * _power_of_two(k - k_half)
    return torch.where(is_nan, nan, result)


def log32(x: torch.Tensor) -> torch.Tensor:
    """Natural logarithm of an FP32 tensor with :func:`sim.fp32math.log`'s operation sequence.

    >>> import pytest; torch = pytest.importorskip("torch")
    >>> log32(torch.tensor([1.0, 2.0, 0.0, float("inf")])).tolist()
    [0.0, 0.6931471824645996, -inf, inf]
    """
    torch = _torch()
    one, two, half, two_pow_24, ln2_hi, ln2_lo, nan = _constants(
        x, ["_ONE", "_TWO", "_HALF", "_TWO_POW_24", "_LN2_HI", "_LN2_LO", "_NAN"])
    series_coefficients = [_f32_constant(c, x) for c in fp32math._LOG_SERIES]
    bits = x.view(torch.int32).to(torch.int64) & 0xFFFFFFFF
    magnitude = bits & 0x7FFFFFFF
    negative = ((bits >> 31) == 1) & (magnitude != 0)
    special_nan = (x != x) | negative
    zero = magnitude == 0
    infinite = bits == 0x7F800000
    subnormal = (magnitude < 0x00800000) & ~zero
    one_bits = one.view(torch.int32).to(torch.int64)
    ordinary = torch.where(special_nan | zero | infinite, one_bits, magnitude)
    scaled = (ordinary.to(torch.int32).view(torch.float32) * two_pow_24).view(torch.int32).to(torch.int64)
    ordinary = torch.where(subnormal, scaled, ordinary)
    e = (ordinary >> 23) - 127 - torch.where(subnormal, 24, 0)
    m = (ordinary & 0x007FFFFF) | 0x3F800000
    high = m > fp32math._SQRT2_BITS
    m = torch.where(high, m - 0x00800000, m)
    e = e + high.to(torch.int64)
    e_float = e.to(torch.float32)  # |e| <= 150: exact
    f = m.to(torch.int32).view(torch.float32) - one
    s = f / (two + f)
    z = s * s
    series = series_coefficients[0].expand_as(z)
    for coefficient in series_coefficients[1:]:
        series = fma32(series, z, coefficient)
    r = z * series
    h = half * (f * f)
    inner = fma32(e_float, ln2_lo, s * (h + r))
    result = e_float * ln2_hi - ((h - inner) - f)
    result = torch.where(zero, torch.full_like(result, float("-inf")),
                         torch.where(infinite, torch.full_like(result, float("inf")), result))
    return torch.where(special_nan, nan, result)
