"""The machine the mode models: rounding, NaN profile, FTZ, accumulation, and the rounding steps
every op is built from.

An op on FP16/BF16/FP8 tensors is computed as torch's CPU kernels and CUDA's "opmath" compute it:
operands widened (exactly) to FP32, each arithmetic step an FP32 operation of the emulator, the
result rounded once into the tensor's format (:meth:`Machine.narrow`). For + - * / sqrt of
operands of the format that single rounding gives the correctly rounded result: FP32's 24 bits are
at least 2p+2 for FP16 (p = 11) and BF16 (p = 8), and then rounding twice equals rounding once.
"""
from __future__ import annotations

import functools
import numbers

import numpy as np
import torch

import softfloat16 as sf
from softfloat16.formats import Format
from softfloat16.formats import format as parse_format
from softfloat16 import tensor_cores
from softfloat16.linalg import ORDERS, TensorCore
from softfloat16.profiles import parse_profile
from softfloat16.rounding import Rounding, parse_rounding

from . import recipes
from .tensors import DTYPE_FORMATS, SATURATING, bits, from_bits, is_emulated

__all__ = ["FP32", "Machine"]

FP32 = sf.fp32
_SIGN32 = np.uint32(0x80000000)


class Machine:
    """The rounding and NaN rules of the modelled machine, and the emulated steps they govern.

    ``rounding`` applies to every rounding step; with ``"sr"`` (stochastic rounding, which needs a
    ``seed``) the FP32 steps round to nearest even and only the final rounding into a 16- or 8-bit
    format is stochastic (a fresh stream per op, drawn from the seed). ``ftz`` flushes tiny
    results of every rounding step. ``nan`` is the NaN profile (``"x86"``: torch CPU's).
    ``tensor_core`` is the matrix unit of ``order="tensorcore"`` and of a low-precision GEMM
    recipe (``gemm``, with ``scale_rule``, ``grad_format``, ``grad_rounding``: :attr:`recipe`,
    softfloat16.torch.recipes); an option that would have no effect is a ValueError.

    >>> m = Machine(rounding="rtz")
    >>> hex(m.narrow(np.uint32(0x3F801FFF), sf.fp16))  # 1 + 0x1FFF * 2**-23, truncated
    '0x3c00'
    """

    def __init__(self, rounding: str = "rne", accumulate: Format | str = sf.fp32, order: str = "sequential",
                 nan: str = "x86", ftz: bool = False, seed: int | None = None,
                 tensor_core: TensorCore | str | None = None, gemm: str | None = None, scale_rule: str | None = None,
                 grad_format: str | None = None, grad_rounding: str | None = None, threads: int = 1) -> None:
        mode = parse_rounding(rounding)
        if isinstance(threads, bool) or not isinstance(threads, numbers.Integral) or threads < 1:
            raise ValueError(f"threads: expected a positive integer (torch CPU's thread count), got {threads!r}")
        #: torch CPU's thread count whose results the mode reproduces where a kernel's sums depend on
        #: it (channels-last batch norm adds per-thread partial sums): a setting, never the process's.
        self.threads = int(threads)
        if not isinstance(ftz, (bool, np.bool_)):
            raise TypeError(f"ftz: expected True or False, got {ftz!r}")
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0):
            raise ValueError(f"seed: expected a non-negative integer or None, got {seed!r}")
        self.accumulate = _accumulation_format(accumulate)
        if order not in ORDERS:
            raise ValueError(f"order: unknown accumulation order {order!r}; accepted: {', '.join(ORDERS)}")
        if order == "tensorcore" and tensor_core is None:
            raise ValueError('tensor_core: order="tensorcore" needs a matrix unit: name one, e.g. tensor_core="h100" '
                             "(a GPU or architecture), an instruction preset of softfloat16.mma, or a "
                             "softfloat16.linalg.TensorCore")
        if tensor_core is not None and order != "tensorcore" and gemm is None:
            raise ValueError(f'tensor_core: {tensor_core!r} would be unused: the matrix unit is used only with '
                             f'order="tensorcore" (or a low-precision recipe, gemm=...); order is {order!r}')
        self.rounding = mode.name.lower()
        self.order = order
        self.tensor_core = None if tensor_core is None else tensor_cores.checked(tensor_core)
        self.nan = parse_profile(nan).name
        self.ftz = bool(ftz)
        self.seed = seed
        self._draws = 0
        # Every FP32 step: RNE under stochastic rounding (only the final rounding is stochastic).
        self.step = {"rounding": "rne" if mode == Rounding.SR else self.rounding, "ftz": self.ftz, "nan": self.nan}
        #: The low-precision GEMM recipe (softfloat16.torch.recipes), or None: GEMMs in the tensors' formats.
        self.recipe = recipes.recipe(gemm, self.tensor_core, scale_rule=scale_rule, grad_format=grad_format,
                                     grad_rounding=grad_rounding)
        stochastic = mode == Rounding.SR or (self.recipe is not None and self.recipe.grad_rounding == "sr")
        if mode == Rounding.SR and seed is None:
            raise ValueError("seed: rounding='sr' (stochastic rounding) needs an integer seed, e.g. seed=0")
        if stochastic and seed is None:
            raise ValueError("seed: grad_rounding='sr' (stochastic rounding of gradients) needs an integer seed, "
                             "e.g. seed=0")
        if seed is not None and not stochastic:
            raise ValueError(f"seed: {seed!r} would be unused: only stochastic rounding draws from a seed; pass "
                             "rounding='sr' (or grad_rounding='sr' with a gemm= recipe)")
        #: Set by the mode for the op running now (recipes.OpRoles): which GEMM operands are gradients.
        self.roles = None

    def __repr__(self) -> str:
        core = getattr(self.tensor_core, "name", self.tensor_core)
        core = "" if core is None else f", tensor_core={core!r}"
        recipe = "" if self.recipe is None else f", {self.recipe!r}"
        return (f"Machine(rounding={self.rounding!r}, accumulate={self.accumulate.name!r}, order={self.order!r}, "
                f"nan={self.nan!r}, ftz={self.ftz}, seed={self.seed}{core}{recipe})")

    # -- the rounding steps -------------------------------------------------------------------
    def gemm_policy(self, fmt: Format) -> dict:
        """``order`` and ``tensor_core`` of linalg.matmul for a GEMM (or sum) of ``fmt`` operands
        (under ``order="tensorcore"``: softfloat16.tensor_cores.gemm_policy)."""
        if self.order == "tensorcore":
            return tensor_cores.gemm_policy(self.tensor_core, fmt)
        return {"order": self.order}

    def final(self) -> dict:
        """Options of a final rounding into a tensor's format (a fresh random stream under "sr")."""
        if self.rounding != "sr":
            return self.step
        return {**self.step, "rounding": "sr", "seed": self.draw()}

    def draw(self) -> int:
        """A fresh seed for one stochastic rounding, drawn from ``seed`` (in draw order)."""
        self._draws += 1
        return int(np.random.SeedSequence([self.seed, self._draws]).generate_state(1, np.uint64)[0])

    def widen(self, patterns: np.ndarray, fmt: Format) -> np.ndarray:
        """Exact FP32 copies of ``fmt`` patterns (signaling NaNs quieted, as the hardware does)."""
        if fmt is FP32:
            return np.asarray(patterns)
        return np.asarray(sf.convert(patterns, src=fmt, dst=FP32, nan=self.nan))

    def narrow(self, patterns32: np.ndarray, fmt: Format) -> np.ndarray:
        """FP32 patterns rounded once into ``fmt`` (saturating where torch's conversion does)."""
        if fmt is FP32:
            return np.asarray(patterns32)
        return np.asarray(sf.convert(patterns32, src=FP32, dst=fmt, saturate=fmt in SATURATING, **self.final()))

    def add(self, a, b):
        return FP32.add(a, b, **self.step)

    def sub(self, a, b):
        return FP32.sub(a, b, **self.step)

    def mul(self, a, b):
        return FP32.mul(a, b, **self.step)

    def div(self, a, b):
        return FP32.div(a, b, **self.step)

    def fma(self, a, b, c):
        return FP32.fma(a, b, c, **self.step)

    def sqrt(self, a):
        return FP32.sqrt(a, **self.step)

    @staticmethod
    def neg(a):
        return np.asarray(a) ^ _SIGN32

    def propagate_nan(self, fmt: Format, a, b=None):
        """The NaN an arithmetic op returns for these operands (where one is NaN), per the profile:
        the first NaN operand quieted (ieee, x86), or the canonical NaN (riscv, cuda)."""
        return fmt.add(a, a if b is None else b, nan=self.nan)

    # -- conversions --------------------------------------------------------------------------
    def convert(self, tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
        """``tensor.to(dtype)`` as the machine rounds it, for an emulated destination dtype.

        Float64 and integer sources go through FP32 first, as torch's CPU conversions do (so a
        float64 value can be rounded twice); every other conversion rounds once.
        """
        if tensor.dtype == dtype:
            return tensor
        dst = DTYPE_FORMATS[dtype]
        if is_emulated(tensor.dtype):
            src = DTYPE_FORMATS[tensor.dtype]
            out = sf.convert(bits(tensor), src=src, dst=dst, saturate=dst in SATURATING, **self.final())
            return from_bits(out, dtype, tensor.shape)
        if tensor.dtype.is_complex:
            raise TypeError(f"convert: complex {tensor.dtype} to {dtype} is not emulated")
        values = tensor.detach().contiguous()
        if values.dtype == torch.bool:
            values = values.to(torch.uint8)
        array = values.numpy()
        if array.dtype.kind in "iu":
            array = array.astype(np.int64)
        wide = np.asarray(FP32.from_float(array, **(self.final() if dst is FP32 else self.step)))
        return from_bits(wide, torch.float32, tensor.shape) if dst is FP32 else from_bits(
            self.narrow(wide, dst), dtype, tensor.shape)


_ACCUMULATORS = "fp32, bf16, fp16, tf32 or fp8_e5m2"


def _accumulation_format(accumulate) -> Format:
    """The ``accumulate`` option as a Format; one line listing the accepted ones otherwise."""
    try:
        fmt = parse_format(accumulate)
    except (TypeError, ValueError):
        raise ValueError(f"accumulate: unknown accumulation format {accumulate!r}; accepted: {_ACCUMULATORS}") from None
    if fmt.precision > 24 or not fmt.ieee_like or fmt.storage_shift:
        raise ValueError(f"accumulate: {fmt.name} cannot accumulate here; accepted: {_ACCUMULATORS}")
    return fmt


def scalar_bits(value, fmt: Format, nan: str = "x86"):
    """A Python number as torch turns it into a ``fmt`` value on the host: a double rounded to
    float32, then to ``fmt``, each to nearest even (the scalar conversion ignores the machine's
    rounding mode: it happens before the op, on the CPU that launches it). A numpy scalar.

    >>> hex(scalar_bits(1 + 2**-11 + 2**-40, sf.fp16))   # rounded twice: 1 + 2**-11, then a tie to even
    '0x3c00'
    """
    if isinstance(value, complex):
        raise TypeError(f"a complex scalar ({value!r}) in an emulated op")
    if isinstance(value, (bool, np.bool_)):
        value = int(value)
    if isinstance(value, numbers.Integral) and -(1 << 63) <= int(value) < (1 << 63):
        return _scalar_bits(int(value), fmt, nan)
    # Cached by the double's bits: -0.0 == 0.0 as a dict key, and NaNs never equal.
    return _scalar_bits(("double", int(np.float64(value).view(np.int64))), fmt, nan)


@functools.lru_cache(maxsize=4096)
def _scalar_bits(value: int | tuple, fmt: Format, nan: str):
    number = np.int64(value) if isinstance(value, int) else np.int64(value[1]).view(np.float64)
    single = FP32.from_float(number, nan=nan)
    if fmt is FP32:
        return single
    return sf.convert(single, src=FP32, dst=fmt, saturate=fmt in SATURATING, nan=nan)
