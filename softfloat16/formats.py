"""Binary floating-point formats as parameters: exponent and fraction widths, storage dtype.

All formats share the IEEE 754 encoding (biased exponent, implicit leading bit, all-ones exponent
for inf/NaN, quiet bit = top fraction bit), so one set of generic kernels serves every one of them.
Here: the widths, the special patterns and exponents, and the classification of bit patterns. The
arithmetic methods (``fp16.add`` ...) are attached by ``softfloat16.format_methods``: this module
imports nothing of the arithmetic, so everything can import it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np


@dataclass(frozen=True, eq=False)
class Format:
    """A binary floating-point format of at most 32 bits.

    >>> from softfloat16 import fp16
    >>> (fp16.exponent_bits, fp16.fraction_bits, fp16.bias, fp16.width, fp16.dtype)
    (5, 10, 15, 16, <class 'numpy.uint16'>)
    """

    name: str
    exponent_bits: int
    fraction_bits: int
    dtype: type
    float_dtype_name: str | None = None   # numpy/ml_dtypes float dtype holding these bits
    aliases: tuple[str, ...] = field(default=())

    # --- widths and exponents ---------------------------------------------------------------

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def width(self) -> int:
        return 1 + self.exponent_bits + self.fraction_bits

    @property
    def precision(self) -> int:
        """Significand bits including the implicit one."""
        return self.fraction_bits + 1

    @property
    def emin(self) -> int:
        """log2 of the smallest positive normal value (fp16: -14)."""
        return 1 - self.bias

    @property
    def emax(self) -> int:
        """The exponent of the largest finite value: 2**emax <= max finite < 2**(emax + 1) (fp16: 15)."""
        return self.bias

    @property
    def min_subnormal_exponent(self) -> int:
        """log2 of the smallest positive subnormal value (fp16: -24, bf16: -133, fp32: -149).

        >>> from softfloat16 import fp16, fp32
        >>> fp16.min_subnormal_exponent, fp32.min_subnormal_exponent
        (-24, -149)
        """
        return self.emin - self.fraction_bits

    # --- bit patterns and masks -------------------------------------------------------------

    @property
    def sign_mask(self) -> int:
        return 1 << (self.width - 1)

    @property
    def magnitude_mask(self) -> int:
        """Every bit but the sign: ``bits & magnitude_mask`` is the pattern of ``abs``."""
        return self.sign_mask - 1

    @property
    def fraction_mask(self) -> int:
        return (1 << self.fraction_bits) - 1

    @property
    def inf(self) -> int:
        """Bits of +inf (also the mask of the exponent field)."""
        return ((1 << self.exponent_bits) - 1) << self.fraction_bits

    @property
    def max_finite(self) -> int:
        """Bits of the largest finite value."""
        return self.inf - 1

    @property
    def min_normal(self) -> int:
        """Bits of the smallest positive normal value."""
        return 1 << self.fraction_bits

    @property
    def min_subnormal(self) -> int:
        """Bits of the smallest positive subnormal value."""
        return 1

    @property
    def one(self) -> int:
        """Bits of 1.0."""
        return self.bias << self.fraction_bits

    @property
    def quiet_bit(self) -> int:
        """The top fraction bit: set in a quiet NaN, clear in a signaling one."""
        return 1 << (self.fraction_bits - 1)

    @property
    def default_nan(self) -> int:
        """Bits of the IEEE default NaN: +qNaN with only the quiet bit set (fp16 0x7e00).

        >>> from softfloat16 import fp16, bf16, fp32
        >>> [hex(f.default_nan) for f in (fp16, bf16, fp32)]
        ['0x7e00', '0x7fc0', '0x7fc00000']
        """
        return self.inf | self.quiet_bit

    # --- classification of bit patterns (vectorised) ----------------------------------------

    def fields(self, bits) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sign, biased exponent field and fraction field of bit patterns (arrays of ``dtype``).

        >>> from softfloat16 import fp16
        >>> [int(x) for x in fp16.fields(0xBC01)]
        [1, 15, 1]
        """
        b = as_bits(bits, self, "bits")
        return b >> (self.width - 1), (b & self.inf) >> self.fraction_bits, b & self.fraction_mask

    def _classify(self, bits, test) -> np.ndarray:
        """``test`` applied to the magnitudes (sign cleared) of bit patterns; numpy bools for scalars."""
        result = test(as_bits(bits, self, "bits") & self.magnitude_mask)
        return result[()] if result.ndim == 0 else result

    def is_nan(self, bits) -> np.ndarray:
        """True where the pattern is a NaN (quiet or signaling).

        >>> import numpy as np, softfloat16 as sf
        >>> sf.fp16.is_nan(np.array([0x7C00, 0x7C01, 0xFE00, 0x3C00])).tolist()
        [False, True, True, False]
        """
        return self._classify(bits, lambda m: m > self.inf)

    def is_inf(self, bits) -> np.ndarray:
        """True where the pattern is +inf or -inf.

        >>> import softfloat16 as sf
        >>> bool(sf.fp16.is_inf(0xFC00)), bool(sf.fp16.is_inf(0x7BFF))
        (True, False)
        """
        return self._classify(bits, lambda m: m == self.inf)

    def is_zero(self, bits) -> np.ndarray:
        """True where the pattern is +0 or -0.

        >>> import softfloat16 as sf
        >>> sf.fp16.is_zero([0x0000, 0x8000, 0x0001]).tolist()
        [True, True, False]
        """
        return self._classify(bits, lambda m: m == 0)

    def is_subnormal(self, bits) -> np.ndarray:
        """True where the pattern is a nonzero subnormal.

        >>> import softfloat16 as sf
        >>> sf.fp16.is_subnormal([0x0000, 0x8001, 0x03FF, 0x0400]).tolist()
        [False, True, True, False]
        """
        return self._classify(bits, lambda m: (m != 0) & (m < self.min_normal))

    def is_normal(self, bits) -> np.ndarray:
        """True where the pattern is a normal number (finite, nonzero, not subnormal).

        >>> import softfloat16 as sf
        >>> sf.fp16.is_normal([0x03FF, 0x0400, 0xFBFF, 0x7C00]).tolist()
        [False, True, True, False]
        """
        return self._classify(bits, lambda m: (m >= self.min_normal) & (m < self.inf))

    def is_finite(self, bits) -> np.ndarray:
        """True where the pattern is neither an infinity nor a NaN.

        >>> import softfloat16 as sf
        >>> sf.bf16.is_finite([0x7F7F, 0xFF80, 0x7FC0, 0x8000]).tolist()
        [True, False, False, True]
        """
        return self._classify(bits, lambda m: m < self.inf)

    def is_signaling(self, bits) -> np.ndarray:
        """True where the pattern is a signaling NaN (quiet bit clear).

        >>> import softfloat16 as sf
        >>> sf.fp16.is_signaling([0x7C01, 0x7E01, 0x7C00]).tolist()
        [True, False, False]
        """
        return self._classify(bits, lambda m: (m > self.inf) & ((m & self.quiet_bit) == 0))

    # --- values -------------------------------------------------------------------------------

    def value(self, bits: int) -> Fraction | float:
        """Exact value of one bit pattern: a Fraction, or a float for inf/NaN.

        >>> from softfloat16 import fp16
        >>> fp16.value(0x0001)
        Fraction(1, 16777216)
        """
        sign_bit, field_, frac = (int(x) for x in self.fields(int(as_bits(bits, self, "bits"))))
        sign = -1 if sign_bit else 1
        if field_ == self.inf >> self.fraction_bits:
            return sign * float("inf") if frac == 0 else float("nan")
        if field_ == 0:
            return sign * Fraction(frac) * Fraction(2) ** self.min_subnormal_exponent
        significand = Fraction(frac | (1 << self.fraction_bits))
        return sign * significand * Fraction(2) ** (field_ - self.bias - self.fraction_bits)

    def __repr__(self) -> str:
        return f"Format({self.name!r}: 1-{self.exponent_bits}-{self.fraction_bits}, bias {self.bias})"


fp16 = Format("fp16", 5, 10, np.uint16, "float16", ("float16", "half", "binary16"))
bf16 = Format("bf16", 8, 7, np.uint16, "bfloat16", ("bfloat16",))
fp32 = Format("fp32", 8, 23, np.uint32, "float32", ("float32", "single", "binary32"))
fp8_e5m2 = Format("fp8_e5m2", 5, 2, np.uint8, "float8_e5m2", ("e5m2", "float8_e5m2"))
tf32 = Format("tf32", 8, 10, np.uint32, None, ("tensorfloat32",))

FORMATS = {f.name: f for f in (fp16, bf16, fp32, fp8_e5m2, tf32)}
_BY_NAME = {name: f for f in FORMATS.values() for name in (f.name, *f.aliases)}


def format_table() -> str:
    """The markdown table of every format, from the Format objects themselves: docs/softfloat16.md
    holds this text, and a test keeps the two equal.

    >>> print(format_table().splitlines()[2])
    | `fp16` (`float16`, `half`, `binary16`) | 1-5-10 | 15 | `uint16` | 65504 | 2^-14 | 2^-24 |
    """
    def largest(fmt: Format) -> str:
        value = fmt.value(fmt.max_finite)
        return str(value) if value < 10**6 else "~" + f"{float(value):.2e}".replace("e+", "e")

    def storage(fmt: Format) -> str:
        bits = np.dtype(fmt.dtype).itemsize * 8
        return f"`{np.dtype(fmt.dtype).name}`" + (f" (low {fmt.width} bits)" if fmt.width < bits else "")

    rows = ["| name (aliases) | layout (sign-exponent-fraction) | bias | storage | max finite | min normal "
            "| min subnormal |", "|---|---|---|---|---|---|---|"]
    for fmt in FORMATS.values():
        aliases = f" ({', '.join(f'`{a}`' for a in fmt.aliases if a != fmt.name)})" if fmt.aliases else ""
        rows.append(f"| `{fmt.name}`{aliases} | 1-{fmt.exponent_bits}-{fmt.fraction_bits} | {fmt.bias} | "
                    f"{storage(fmt)} | {largest(fmt)} | 2^{fmt.emin} | 2^{fmt.min_subnormal_exponent} |")
    return "\n".join(rows)


def format(name: str | Format) -> Format:  # noqa: A001 - the public API name is `sf.format`
    """Look up a format by name or alias.

    >>> format("half") is format("fp16")
    True
    """
    if isinstance(name, Format):
        return name
    if isinstance(name, str) and name.strip().lower() in _BY_NAME:
        return _BY_NAME[name.strip().lower()]
    raise ValueError(f"format: unknown format {name!r}; accepted: {', '.join(sorted(_BY_NAME))}")


def as_bits(x, fmt: Format, name: str = "x") -> np.ndarray:
    """Bit patterns of ``fmt`` from integers or from a float array of the same width: the one
    reader of operands, for the arithmetic and for the comparison tools alike.

    >>> as_bits(np.float16(1.0), format("fp16"))
    array(15360, dtype=uint16)
    """
    arr = np.asarray(x)
    kind = arr.dtype.kind
    if kind in "iu":
        if kind == "i" and arr.dtype.itemsize * 8 == fmt.width:
            return arr.view(fmt.dtype)  # signed storage of the same width: reinterpret
        # Unsigned storage no wider than the format holds only valid patterns: skip the two scans.
        fits = kind == "u" and arr.dtype.itemsize * 8 <= fmt.width
        if arr.size and not fits and (arr.min() < 0 or int(arr.max()) >> fmt.width):
            bad = int(arr[(arr < 0) | (arr >= (1 << fmt.width))].flat[0])
            raise ValueError(f"{name}: value {bad} ({bad:#x}) is not a {fmt.width}-bit {fmt.name} bit pattern")
        return arr.astype(fmt.dtype, copy=False)
    if arr.dtype.name == fmt.float_dtype_name:
        return arr.view(fmt.dtype)
    if kind in "fcVb" or arr.dtype.name in ("bfloat16",):
        expected = f"{fmt.float_dtype_name} or integer bit patterns" if fmt.float_dtype_name else "integer bit patterns"
        raise TypeError(f"{name}: {fmt.name} operands must be {expected}, got dtype {arr.dtype}")
    raise TypeError(f"{name}: cannot read {fmt.name} bit patterns from dtype {arr.dtype}")
