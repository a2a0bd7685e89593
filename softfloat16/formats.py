"""Binary floating-point formats as parameters: exponent and fraction widths, storage dtype.

All formats share the IEEE 754 encoding (biased exponent, implicit leading bit, all-ones exponent
for inf/NaN, quiet bit = top fraction bit), so one set of generic kernels serves every one of them.
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
        return 1 - self.bias

    @property
    def emax(self) -> int:
        return self.bias

    @property
    def sign_mask(self) -> int:
        return 1 << (self.width - 1)

    @property
    def inf(self) -> int:
        """Bits of +inf."""
        return ((1 << self.exponent_bits) - 1) << self.fraction_bits

    @property
    def max_finite(self) -> int:
        """Bits of the largest finite value."""
        return self.inf - 1

    @property
    def min_normal(self) -> int:
        """Bits of the smallest positive normal value."""
        return 1 << self.fraction_bits

    def value(self, bits: int) -> Fraction | float:
        """Exact value of one bit pattern: a Fraction, or a float for inf/NaN.

        >>> from softfloat16 import fp16
        >>> fp16.value(0x0001)
        Fraction(1, 16777216)
        """
        bits = int(as_bits(bits, self, "bits"))
        sign = -1 if bits & self.sign_mask else 1
        field_ = (bits >> self.fraction_bits) & ((1 << self.exponent_bits) - 1)
        frac = bits & ((1 << self.fraction_bits) - 1)
        if field_ == (1 << self.exponent_bits) - 1:
            return sign * float("inf") if frac == 0 else float("nan")
        if field_ == 0:
            return sign * Fraction(frac) * Fraction(2) ** (self.emin - self.fraction_bits)
        significand = Fraction(frac | (1 << self.fraction_bits))
        return sign * significand * Fraction(2) ** (field_ - self.bias - self.fraction_bits)

    def __repr__(self) -> str:
        return f"Format({self.name!r}: 1-{self.exponent_bits}-{self.fraction_bits}, bias {self.bias})"

    # Arithmetic: thin wrappers over softfloat16.ops so that `sf.fp16.add(a, b)` reads naturally.
    def add(self, a, b, **options):
        """Correctly rounded a + b on bit patterns.

        >>> import softfloat16 as sf
        >>> hex(sf.fp16.add(0x3C00, 0x3C00))   # 1 + 1
        '0x4000'
        """
        from . import ops
        return ops.binary("add", self, a, b, **options)

    def sub(self, a, b, **options):
        """Correctly rounded a - b.

        >>> import softfloat16 as sf
        >>> hex(sf.fp16.sub(0x3C00, 0x3C00))   # 1 - 1 = +0
        '0x0'
        """
        from . import ops
        return ops.binary("sub", self, a, b, **options)

    def mul(self, a, b, **options):
        """Correctly rounded a * b.

        >>> import softfloat16 as sf
        >>> hex(sf.fp16.mul(0x4000, 0xC200))   # 2 * -3
        '0xc600'
        """
        from . import ops
        return ops.binary("mul", self, a, b, **options)

    def div(self, a, b, **options):
        """Correctly rounded a / b.

        >>> import softfloat16 as sf
        >>> r, fl = sf.fp16.div(0x3C00, 0x0000, flags=True)   # 1 / 0
        >>> hex(r), sf.Flag(fl)
        ('0x7c00', <Flag.DIVIDE_BY_ZERO: 8>)
        """
        from . import ops
        return ops.binary("div", self, a, b, **options)

    def fma(self, a, b, c, **options):
        """a * b + c with a single rounding.

        >>> import softfloat16 as sf
        >>> hex(sf.fp16.fma(0x3C01, 0x3C01, 0xBC02))   # (1+2^-10)^2 - (1+2^-9) = 2^-20, exact
        '0x10'
        """
        from . import ops
        return ops.ternary("fma", self, a, b, c, **options)

    def sqrt(self, a, **options):
        """Correctly rounded square root.

        >>> import softfloat16 as sf
        >>> hex(sf.fp16.sqrt(0x4400))   # sqrt(4)
        '0x4000'
        """
        from . import ops
        return ops.unary("sqrt", self, a, **options)

    def eq(self, a, b, **options):
        """IEEE quiet equality (NaN != NaN, +0 == -0) -> bool array.

        >>> import softfloat16 as sf
        >>> bool(sf.fp16.eq(0x0000, 0x8000))
        True
        """
        from . import ops
        return ops.compare("eq", self, a, b, **options)

    def lt(self, a, b, **options):
        """IEEE quiet a < b -> bool array (False when either is NaN).

        >>> import softfloat16 as sf
        >>> bool(sf.fp16.lt(0xBC00, 0x3C00))
        True
        """
        from . import ops
        return ops.compare("lt", self, a, b, **options)

    def le(self, a, b, **options):
        """IEEE quiet a <= b -> bool array (False when either is NaN).

        >>> import softfloat16 as sf
        >>> bool(sf.fp16.le(0x7E00, 0x7E00))
        False
        """
        from . import ops
        return ops.compare("le", self, a, b, **options)

    def from_float(self, x, **options):
        """Round float64/float32/float16/integer values into this format, directly from their exact value.

        >>> import softfloat16 as sf
        >>> hex(sf.fp16.from_float(0.1))
        '0x2e66'
        """
        from . import ops
        return ops.from_float(self, x, **options)

    def to_float(self, bits, **options):
        """Exact float64 values of bit patterns.

        >>> import softfloat16 as sf
        >>> float(sf.fp16.to_float(0x3555))
        0.333251953125
        """
        from . import ops
        return ops.to_float(self, bits, **options)


fp16 = Format("fp16", 5, 10, np.uint16, "float16", ("float16", "half", "binary16"))
bf16 = Format("bf16", 8, 7, np.uint16, "bfloat16", ("bfloat16",))
fp32 = Format("fp32", 8, 23, np.uint32, "float32", ("float32", "single", "binary32"))
fp8_e5m2 = Format("fp8_e5m2", 5, 2, np.uint8, "float8_e5m2", ("e5m2", "float8_e5m2"))
tf32 = Format("tf32", 8, 10, np.uint32, None, ("tensorfloat32",))

FORMATS = {f.name: f for f in (fp16, bf16, fp32, fp8_e5m2, tf32)}
_BY_NAME = {name: f for f in FORMATS.values() for name in (f.name, *f.aliases)}


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
