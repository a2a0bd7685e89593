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
  explicit k-loop: FP16 and FP8 (E4M3FN, E5M2, mixed) products are exact in FP32 and added with
  FP32 ``+``; so are BF16
  products (16 significant bits) when every one of them lies in FP32's normal range, which is
  checked first; otherwise, and for FP32 inputs, products are formed exactly in FP64 and added
  with the round-to-odd sum above.
- :func:`sqrt`: ``torch.sqrt`` is *not* correctly rounded on CPU (a vectorized approximation:
  about 1 in 6 random FP32 inputs lands one ulp off), so the square root is estimated in FP64,
  rounded to FP32 and corrected by comparing the exact FP64 squares of the two neighbouring
  midpoints (25 bits, so their squares are exact) with the input.
- :func:`stochastic_round_fp8`: the project's stochastic rounding rule (docs/formats-spec.md)
  from FP32 to FP8, in exact FP64 steps, fed the random words of softfloat16's Philox stream.
- :func:`exp32` / :func:`log32`: :mod:`sim.fp32math`'s algorithm itself (its ``exp_steps`` /
  ``log_steps`` and constants), driven with torch operations (:class:`TorchFp32`).

Nothing here imports torch at module level, so the module can be imported (and its doctests
collected) without torch installed.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sim import fp32math

if TYPE_CHECKING:  # pragma: no cover
    import torch

__all__ = ["TorchFp32", "add_round32", "exp32", "fma32", "log32", "matmul", "sequential_sum", "sqrt",
           "stochastic_round_fp8"]


def _torch():
    import torch

    return torch


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
    """``a @ b`` (2-D, one dtype or two FP8 dtypes) as the emulator's sequential FP32 accumulation, rounded once to
    ``out_dtype``: ``acc = +0; acc = round32(acc + a[:, t] * b[t, :])`` for t ascending.

    >>> import pytest; torch = pytest.importorskip("torch")
    >>> a = torch.tensor([[1.0, 2.0**-11]], dtype=torch.float16)
    >>> matmul(a, torch.ones(2, 1, dtype=torch.float16), torch.float32).item() == 1 + 2.0**-11
    True
    """
    torch = _torch()
    fp8 = (torch.float8_e4m3fn, torch.float8_e5m2)
    same = a.dtype == b.dtype or (a.dtype in fp8 and b.dtype in fp8)
    if not same or a.dim() != 2 or b.dim() != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: expected (m, k) @ (k, n) of one dtype (or two FP8 dtypes), got "
                         f"{a.dtype}{tuple(a.shape)} and {b.dtype}{tuple(b.shape)}")
    acc = torch.zeros(a.shape[0], b.shape[1], dtype=torch.float32, device=a.device)
    # FP16 and FP8 products (at most 11 x 11 significant bits, magnitudes 2**-48 .. 2**32) are exact in FP32.
    if a.dtype in (torch.float16, *fp8) or (a.dtype == torch.bfloat16 and _products_normal_in_fp32(a, b)):
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
    # exact FP64 products, within FP32's normal range
    return a_low * b_low >= 2.0**fp32math.FP32.emin and a_high * b_high < 2.0 ** (fp32math.FP32.emax + 1)


def _two_to(exponents: torch.Tensor) -> torch.Tensor:
    """``2.0**n`` in FP64 for integer tensors n in [-1022, 1023], built from the bits (exact; a
    vectorized ``pow`` need not be)."""
    torch = _torch()
    return ((exponents.to(torch.int64) + 1023) << 52).view(torch.float64)


def stochastic_round_fp8(x: torch.Tensor, dtype: torch.dtype, words: torch.Tensor) -> torch.Tensor:
    """FP32 ``x`` rounded stochastically to an FP8 ``dtype``, saturating, as docs/formats-spec.md
    defines it with R = 32: with q the magnitude truncated to the format's precision (subnormal
    precision below its smallest normal) and d the first 32 bits discarded, the magnitude is
    q + 1 ulp iff d + r >= 2**32, r the element's 32-bit word ``words`` (int64 tensor of x's
    shape). Beyond the largest value (inf included) it saturates; NaN stays NaN. Every step is
    exact in FP64 (an FP32 magnitude over a power-of-two ulp has at most 24 significant bits).

    >>> import pytest; torch = pytest.importorskip("torch")
    >>> x = torch.tensor([1.0625, 1.0625, 500.0, -1e-9])   # 1 + ulp/2 in E4M3: up iff r >= 2**31
    >>> r = torch.tensor([2**31 - 1, 2**31, 0, 2**32 - 1])
    >>> stochastic_round_fp8(x, torch.float8_e4m3fn, r).float().tolist()
    [1.0, 1.125, 448.0, -0.001953125]
    """
    torch = _torch()
    info = torch.finfo(dtype)
    fraction_bits = 1 - math.frexp(info.eps)[1]  # eps = 2**-fraction_bits
    emin = math.frexp(info.smallest_normal)[1] - 1
    wide = x.double()
    finite = torch.isfinite(wide)
    magnitude = torch.where(finite, wide.abs(), torch.zeros_like(wide))
    _, exponent = torch.frexp(magnitude)  # magnitude = m * 2**exponent, m in [0.5, 1): its leading bit is exponent - 1
    ulp = _two_to(torch.clamp(exponent - 1, min=emin) - fraction_bits)
    scaled = magnitude / ulp
    kept = torch.floor(scaled)
    discarded = torch.floor((scaled - kept) * 2.0**32).to(torch.int64)
    rounded = (kept + (discarded + words >= 2**32).to(torch.float64)) * ulp
    rounded = torch.where(finite, torch.clamp(rounded, max=info.max), torch.full_like(wide, info.max))
    out = torch.where(torch.isnan(wide), wide, torch.copysign(rounded, wide))
    return out.float().to(dtype)  # exact: every value is one of the format's


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


class TorchFp32:
    """:class:`sim.fp32math.Fp32Arithmetic` on float32 tensors: eager ``+ - * /`` (correctly rounded
    on CPU and CUDA), :func:`fma32`, bit views. ``device``: where constants are made."""

    def __init__(self, device: torch.device) -> None:
        self.torch, self.device = _torch(), device

    def const(self, bits) -> torch.Tensor:
        torch = self.torch
        return torch.tensor(int(bits), dtype=torch.int64).to(torch.int32).view(torch.float32).to(self.device)

    def add(self, a, b):
        return a + b

    def sub(self, a, b):
        return a - b

    def mul(self, a, b):
        return a * b

    def div(self, a, b):
        return a / b

    def fma(self, a, b, c):
        return fma32(a, b, c)

    def neg(self, a):
        return -a

    def lt(self, a, b):
        return a < b

    def isnan(self, a):
        return a != a

    def where(self, mask, a, b):
        return self.torch.where(mask, a, b)

    def bits(self, a):
        return a.view(self.torch.int32).to(self.torch.int64) & 0xFFFFFFFF

    def from_bits(self, bits):
        signed = self.torch.where(bits >= 2**31, bits - 2**32, bits)  # the int32 with those bits
        return signed.to(self.torch.int32).view(self.torch.float32)

    def from_int(self, integers):
        return integers.to(self.torch.float32)


def exp32(x: torch.Tensor) -> torch.Tensor:
    """``e**x`` for an FP32 tensor: :func:`sim.fp32math.exp_steps`, computed by torch.

    >>> import pytest; torch = pytest.importorskip("torch")
    >>> exp32(torch.tensor([0.0, 1.0, float("-inf")])).tolist()
    [1.0, 2.7182817459106445, 0.0]
    """
    return fp32math.exp_steps(x, TorchFp32(x.device))


def log32(x: torch.Tensor) -> torch.Tensor:
    """Natural logarithm of an FP32 tensor: :func:`sim.fp32math.log_steps`, computed by torch.

    >>> import pytest; torch = pytest.importorskip("torch")
    >>> log32(torch.tensor([1.0, 2.0, 0.0, float("inf")])).tolist()
    [0.0, 0.6931471824645996, -inf, inf]
    """
    return fp32math.log_steps(x, TorchFp32(x.device))
