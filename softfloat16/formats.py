"""Binary floating-point formats as parameters: widths, storage, and which patterns are special.

One set of generic kernels serves every format: the exponent and fraction widths and the
*encoding* of special values are their parameters. ``ieee`` formats have IEEE 754's infinities
and NaNs; the low-precision formats of today's accelerators have fewer (``fn``: no infinity, one
NaN per sign; ``fnuz``: no infinity, no -0, one NaN; ``finite``: every pattern a number;
``e8m0``: unsigned powers of two). docs/formats-spec.md defines each. Here: the widths, the
special patterns and exponents, and the classification of bit patterns. The arithmetic methods
(``fp16.add`` ...) are attached by ``softfloat16.format_methods``: this module imports nothing of
the arithmetic, so everything can import it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

#: The encodings of special values, with the integer codes the kernels use (_kernels/core.py).
ENCODINGS = ("ieee", "fn", "fnuz", "finite", "e8m0")


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
    encoding: str = "ieee"                # one of ENCODINGS
    storage_shift: int = 0                # zero bits below the pattern in storage (TF32 in FP32 layout)

    def __post_init__(self) -> None:
        if self.encoding not in ENCODINGS:
            raise ValueError(f"encoding: unknown encoding {self.encoding!r}; accepted: {', '.join(ENCODINGS)}")

    # --- what the encoding has ------------------------------------------------------------------

    @property
    def encoding_code(self) -> int:
        """The kernels' code of the encoding (index into ENCODINGS)."""
        return ENCODINGS.index(self.encoding)

    @property
    def signed(self) -> bool:
        """Whether there is a sign bit (every format but E8M0)."""
        return self.encoding != "e8m0"

    @property
    def has_inf(self) -> bool:
        return self.encoding == "ieee"

    @property
    def has_nan(self) -> bool:
        return self.encoding != "finite"

    @property
    def has_negative_zero(self) -> bool:
        return self.encoding in ("ieee", "fn", "finite")

    # --- widths and exponents ---------------------------------------------------------------

    @property
    def bias(self) -> int:
        """Exponent bias: 2**(e-1) - 1, one more in the FNUZ formats (as ml_dtypes and AMD define them)."""
        return (1 << (self.exponent_bits - 1)) - (0 if self.encoding == "fnuz" else 1)

    @property
    def width(self) -> int:
        """Bits of a pattern (with the zero bits below it in TF32's FP32 layout: 32)."""
        return int(self.signed) + self.exponent_bits + self.fraction_bits + self.storage_shift

    @property
    def precision(self) -> int:
        """Significand bits including the implicit one."""
        return self.fraction_bits + 1

    @property
    def emin(self) -> int:
        """log2 of the smallest positive normal value (fp16: -14; E8M0: -127, its smallest value)."""
        return -self.bias if self.encoding == "e8m0" else 1 - self.bias

    @property
    def emax(self) -> int:
        """The exponent of the largest finite value: 2**emax <= max finite < 2**(emax + 1) (fp16: 15)."""
        top_field = (1 << self.exponent_bits) - 1
        return (top_field - 1 if self.encoding in ("ieee", "e8m0") else top_field) - self.bias

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
        """The sign bit (for the unsigned E8M0: the bit above its 8, never set in a pattern)."""
        return 1 << (self.exponent_bits + self.fraction_bits + self.storage_shift)

    @property
    def magnitude_mask(self) -> int:
        """Every bit but the sign: ``bits & magnitude_mask`` is the pattern of ``abs``."""
        return self.sign_mask - 1

    @property
    def fraction_mask(self) -> int:
        return ((1 << self.fraction_bits) - 1) << self.storage_shift

    @property
    def exponent_mask(self) -> int:
        """The exponent field, in place."""
        return ((1 << self.exponent_bits) - 1) << (self.fraction_bits + self.storage_shift)

    @property
    def _unit(self) -> int:
        """The lowest bit of a pattern in storage (1, or 2**13 for TF32 in FP32 layout)."""
        return 1 << self.storage_shift

    @property
    def inf(self) -> int:
        """Bits of +inf (formats without infinities raise a ValueError).

        >>> import softfloat16 as sf
        >>> hex(sf.fp16.inf)
        '0x7c00'
        """
        if not self.has_inf:
            raise ValueError(f"{self.name} has no infinity")
        return self.exponent_mask

    @property
    def max_finite(self) -> int:
        """Bits of the largest finite value.

        >>> import softfloat16 as sf
        >>> [hex(f.max_finite) for f in (sf.fp16, sf.fp8_e4m3fn, sf.fp8_e4m3fnuz, sf.fp4_e2m1, sf.e8m0)]
        ['0x7bff', '0x7e', '0x7f', '0x7', '0xfe']
        """
        if self.encoding in ("ieee", "e8m0"):
            return self.exponent_mask - self._unit if self.encoding == "ieee" else self.magnitude_mask - 1
        return self.magnitude_mask - (1 if self.encoding == "fn" else 0)

    @property
    def min_normal(self) -> int:
        """Bits of the smallest positive normal value."""
        return 0 if self.encoding == "e8m0" else self._unit << self.fraction_bits

    @property
    def min_subnormal(self) -> int:
        """Bits of the smallest positive subnormal value (E8M0, without subnormals: its smallest value)."""
        return 0 if self.encoding == "e8m0" else self._unit

    @property
    def one(self) -> int:
        """Bits of 1.0."""
        return self.bias << (self.fraction_bits + self.storage_shift)

    @property
    def quiet_bit(self) -> int:
        """The top fraction bit: set in a quiet NaN, clear in a signaling one (IEEE formats; 0 in
        the others, whose NaNs are all quiet)."""
        return self._unit << (self.fraction_bits - 1) if self.encoding == "ieee" else 0

    @property
    def default_nan(self) -> int | None:
        """Bits of the default NaN: +qNaN with only the quiet bit set in IEEE formats (fp16 0x7e00),
        the positive NaN in the others; None in a format without NaN.

        >>> import softfloat16 as sf
        >>> [hex(f.default_nan) for f in (sf.fp16, sf.bf16, sf.fp32, sf.fp8_e4m3fn, sf.fp8_e5m2fnuz)]
        ['0x7e00', '0x7fc0', '0x7fc00000', '0x7f', '0x80']
        """
        return {"ieee": self.exponent_mask | self.quiet_bit, "fn": self.magnitude_mask, "fnuz": self.sign_mask,
                "finite": None, "e8m0": self.magnitude_mask}[self.encoding]

    def overflow_value(self, negative: bool = False, saturate: bool = False) -> int:
        """Bits of what a result beyond the largest finite value becomes when it rounds away from
        zero (docs/formats-spec.md): +-inf in IEEE formats, the NaN of the sign in fn, the one NaN
        in fnuz and E8M0, +-max finite in the finite formats and whenever ``saturate``.

        >>> import softfloat16 as sf
        >>> [hex(f.overflow_value(negative=True)) for f in (sf.fp16, sf.fp8_e4m3fn, sf.fp8_e4m3fnuz, sf.fp4_e2m1)]
        ['0xfc00', '0xff', '0x80', '0xf']
        """
        sign = self.sign_mask if negative and self.signed else 0
        if saturate or self.encoding == "finite":
            return sign | self.max_finite
        if self.encoding == "ieee":
            return sign | self.inf
        if self.encoding == "fn":
            return sign | self.default_nan
        return self.default_nan  # fnuz, e8m0: one NaN

    # --- classification of bit patterns (vectorised) ----------------------------------------

    def fields(self, bits) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sign, biased exponent field and fraction field of bit patterns (arrays of ``dtype``).

        >>> from softfloat16 import fp16
        >>> [int(x) for x in fp16.fields(0xBC01)]
        [1, 15, 1]
        """
        b = as_bits(bits, self, "bits")
        sign = (b >> (self.exponent_bits + self.fraction_bits + self.storage_shift)) & 1  # 0 for the unsigned E8M0
        return sign, (b & self.exponent_mask) >> (self.fraction_bits + self.storage_shift), \
            (b & self.fraction_mask) >> self.storage_shift

    def _classify(self, bits, test) -> np.ndarray:
        """``test(magnitudes, bits)`` on bit patterns (the sign cleared in the first); numpy bools for scalars."""
        b = as_bits(bits, self, "bits")
        result = test(b & self.magnitude_mask, b)
        return result[()] if result.ndim == 0 else result

    def _nan_test(self, m, b):
        if self.encoding == "ieee":
            return m > self.exponent_mask
        if self.encoding in ("fn", "e8m0"):
            return m == self.magnitude_mask
        if self.encoding == "fnuz":
            return b == self.sign_mask
        return np.zeros(np.shape(b), bool)

    def is_nan(self, bits) -> np.ndarray:
        """True where the pattern is a NaN (quiet or signaling).

        >>> import numpy as np, softfloat16 as sf
        >>> sf.fp16.is_nan(np.array([0x7C00, 0x7C01, 0xFE00, 0x3C00])).tolist()
        [False, True, True, False]
        >>> sf.fp8_e4m3fn.is_nan([0x7E, 0x7F, 0xFF]).tolist(), sf.fp8_e4m3fnuz.is_nan([0x00, 0x80]).tolist()
        ([False, True, True], [False, True])
        """
        return self._classify(bits, self._nan_test)

    def is_inf(self, bits) -> np.ndarray:
        """True where the pattern is +inf or -inf (never, in formats without infinities).

        >>> import softfloat16 as sf
        >>> bool(sf.fp16.is_inf(0xFC00)), bool(sf.fp16.is_inf(0x7BFF))
        (True, False)
        """
        if not self.has_inf:
            return self._classify(bits, lambda m, b: np.zeros(np.shape(b), bool))
        return self._classify(bits, lambda m, b: m == self.exponent_mask)

    def is_zero(self, bits) -> np.ndarray:
        """True where the pattern is +0 or -0.

        >>> import softfloat16 as sf
        >>> sf.fp16.is_zero([0x0000, 0x8000, 0x0001]).tolist()
        [True, True, False]
        """
        if self.encoding == "e8m0":
            return self._classify(bits, lambda m, b: np.zeros(np.shape(b), bool))
        return self._classify(bits, lambda m, b: (m == 0) & ~self._nan_test(m, b))

    def is_subnormal(self, bits) -> np.ndarray:
        """True where the pattern is a nonzero subnormal.

        >>> import softfloat16 as sf
        >>> sf.fp16.is_subnormal([0x0000, 0x8001, 0x03FF, 0x0400]).tolist()
        [False, True, True, False]
        """
        if self.encoding == "e8m0":
            return self._classify(bits, lambda m, b: np.zeros(np.shape(b), bool))
        return self._classify(bits, lambda m, b: (m != 0) & (m < self.min_normal))

    def is_finite(self, bits) -> np.ndarray:
        """True where the pattern is neither an infinity nor a NaN.

        >>> import softfloat16 as sf
        >>> sf.bf16.is_finite([0x7F7F, 0xFF80, 0x7FC0, 0x8000]).tolist()
        [True, False, False, True]
        """
        if self.has_inf:
            return self._classify(bits, lambda m, b: m < self.exponent_mask)
        return self._classify(bits, lambda m, b: ~self._nan_test(m, b))

    def is_normal(self, bits) -> np.ndarray:
        """True where the pattern is a normal number (finite, nonzero, not subnormal).

        >>> import softfloat16 as sf
        >>> sf.fp16.is_normal([0x03FF, 0x0400, 0xFBFF, 0x7C00]).tolist()
        [False, True, True, False]
        """
        return self._classify(bits, lambda m, b: (m >= self.min_normal) & self.is_finite(b)
                              & ~self.is_zero(b))

    def is_signaling(self, bits) -> np.ndarray:
        """True where the pattern is a signaling NaN (quiet bit clear; only IEEE formats have them).

        >>> import softfloat16 as sf
        >>> sf.fp16.is_signaling([0x7C01, 0x7E01, 0x7C00]).tolist()
        [True, False, False]
        """
        if self.encoding != "ieee":
            return self._classify(bits, lambda m, b: np.zeros(np.shape(b), bool))
        return self._classify(bits, lambda m, b: (m > self.exponent_mask) & ((m & self.quiet_bit) == 0))

    # --- values -------------------------------------------------------------------------------

    def value(self, bits: int) -> Fraction | float:
        """Exact value of one bit pattern: a Fraction, or a float for inf/NaN.

        >>> from softfloat16 import fp16, fp8_e4m3fn, e8m0
        >>> fp16.value(0x0001), fp8_e4m3fn.value(0x7E), e8m0.value(0x00)
        (Fraction(1, 16777216), Fraction(448, 1), Fraction(1, 170141183460469231731687303715884105728))
        """
        b = int(as_bits(bits, self, "bits"))
        if bool(self.is_nan(b)):
            return float("nan")
        sign = -1 if b & self.sign_mask else 1
        field_ = (b & self.exponent_mask) >> (self.fraction_bits + self.storage_shift)
        frac = (b & self.fraction_mask) >> self.storage_shift
        if self.has_inf and field_ == (1 << self.exponent_bits) - 1:
            return sign * float("inf")
        if field_ == 0 and self.encoding != "e8m0":
            return sign * Fraction(frac) * Fraction(2) ** self.min_subnormal_exponent
        significand = Fraction(frac | (1 << self.fraction_bits))
        return sign * significand * Fraction(2) ** (field_ - self.bias - self.fraction_bits)

    def __repr__(self) -> str:
        kind = "" if self.encoding == "ieee" else f", {self.encoding}"
        return f"Format({self.name!r}: {layout(self)}, bias {self.bias}{kind})"


fp16 = Format("fp16", 5, 10, np.uint16, "float16", ("float16", "half", "binary16"))
bf16 = Format("bf16", 8, 7, np.uint16, "bfloat16", ("bfloat16",))
fp32 = Format("fp32", 8, 23, np.uint32, "float32", ("float32", "single", "binary32"))
tf32 = Format("tf32", 8, 10, np.uint32, None, ("tensorfloat32",))
# TF32 as the hardware holds it: FP32 bits whose low 13 bits are zero.
tf32_fp32 = Format("tf32_fp32", 8, 10, np.uint32, "float32", ("tf32_in_fp32", "tensorfloat32_fp32"), storage_shift=13)
fp8_e5m2 = Format("fp8_e5m2", 5, 2, np.uint8, "float8_e5m2", ("e5m2", "float8_e5m2"))
fp8_e4m3fn = Format("fp8_e4m3fn", 4, 3, np.uint8, "float8_e4m3fn", ("float8_e4m3fn", "e4m3fn", "e4m3"), "fn")
fp8_e4m3fnuz = Format("fp8_e4m3fnuz", 4, 3, np.uint8, "float8_e4m3fnuz", ("float8_e4m3fnuz", "e4m3fnuz"), "fnuz")
fp8_e5m2fnuz = Format("fp8_e5m2fnuz", 5, 2, np.uint8, "float8_e5m2fnuz", ("float8_e5m2fnuz", "e5m2fnuz"), "fnuz")
fp6_e2m3 = Format("fp6_e2m3", 2, 3, np.uint8, "float6_e2m3fn", ("float6_e2m3fn", "e2m3"), "finite")
fp6_e3m2 = Format("fp6_e3m2", 3, 2, np.uint8, "float6_e3m2fn", ("float6_e3m2fn", "e3m2"), "finite")
fp4_e2m1 = Format("fp4_e2m1", 2, 1, np.uint8, "float4_e2m1fn", ("float4_e2m1fn", "e2m1"), "finite")
e8m0 = Format("e8m0", 8, 0, np.uint8, "float8_e8m0fnu", ("float8_e8m0fnu", "e8m0fnu"), "e8m0")

FORMATS = {f.name: f for f in (fp16, bf16, fp32, tf32, tf32_fp32, fp8_e5m2, fp8_e4m3fn, fp8_e4m3fnuz, fp8_e5m2fnuz,
                               fp6_e2m3, fp6_e3m2, fp4_e2m1, e8m0)}
_BY_NAME = {name: f for f in FORMATS.values() for name in (f.name, *f.aliases)}


def layout(fmt: Format) -> str:
    """Sign-exponent-fraction widths as text (``1-5-10``; E8M0, unsigned: ``0-8-0``)."""
    return f"{int(fmt.signed)}-{fmt.exponent_bits}-{fmt.fraction_bits}"


def special_values(fmt: Format) -> str:
    """The special patterns of a format, in words (docs/softfloat16.md's table).

    >>> special_values(format("fp8_e4m3fn"))
    'NaN 0x7f, 0xff; no inf'
    """
    if fmt.encoding == "ieee":
        return "±inf, NaNs (quiet and signaling), ±0"
    if fmt.encoding == "fn":
        return f"NaN {fmt.default_nan:#x}, {fmt.default_nan | fmt.sign_mask:#x}; no inf"
    if fmt.encoding == "fnuz":
        return f"NaN {fmt.default_nan:#x} only; no inf, no -0"
    if fmt.encoding == "finite":
        return "none: every pattern a number"
    return f"NaN {fmt.default_nan:#x}; unsigned, no zero"


def overflow_default(fmt: Format) -> str:
    """What a result beyond the largest finite value becomes by default (round to nearest)."""
    return {"ieee": "inf", "fn": "NaN", "fnuz": "NaN", "finite": "saturates (max)", "e8m0": "NaN"}[fmt.encoding]


def format_table() -> str:
    """The markdown table of every format, from the Format objects themselves: docs/softfloat16.md
    holds this text, and a test keeps the two equal.

    >>> print(format_table().splitlines()[2][:98])
    | `fp16` (`float16`, `half`, `binary16`) | 1-5-10 | ieee | 15 | `uint16` | 65504 | 2^-14 | 2^-24 |
    """
    def largest(fmt: Format) -> str:
        value = fmt.value(fmt.max_finite)
        if value < 10**6:
            return str(value.numerator) if value.denominator == 1 else str(float(value))
        return "~" + f"{float(value):.2e}".replace("e+", "e")

    def storage(fmt: Format) -> str:
        bits = np.dtype(fmt.dtype).itemsize * 8
        if fmt.storage_shift:
            return f"`{np.dtype(fmt.dtype).name}` (low {fmt.storage_shift} bits zero)"
        return f"`{np.dtype(fmt.dtype).name}`" + (f" (low {fmt.width} bits)" if fmt.width < bits else "")

    rows = ["| name (aliases) | layout (sign-exponent-fraction) | encoding | bias | storage | max finite | min normal "
            "| min subnormal | special values | overflow (default) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for fmt in FORMATS.values():
        aliases = f" ({', '.join(f'`{a}`' for a in fmt.aliases if a != fmt.name)})" if fmt.aliases else ""
        rows.append(f"| `{fmt.name}`{aliases} | {layout(fmt)} | {fmt.encoding} | {fmt.bias} | "
                    f"{storage(fmt)} | {largest(fmt)} | 2^{fmt.emin} | 2^{fmt.min_subnormal_exponent} | "
                    f"{special_values(fmt)} | {overflow_default(fmt)} |")
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
    """Bit patterns of ``fmt`` from integers or from a float array of the same width (numpy's, or
    ml_dtypes' for bfloat16 and the 8/6/4-bit formats): the one reader of operands, for the
    arithmetic and for the comparison tools alike.

    >>> as_bits(np.float16(1.0), format("fp16"))
    array(15360, dtype=uint16)
    """
    arr = np.asarray(x)
    if arr.dtype == fmt.dtype and not fmt.storage_shift:  # unsigned, the format's width: every value is valid
        return arr
    if fmt.float_dtype_name is not None and arr.dtype.name == fmt.float_dtype_name:
        arr = arr.view(np.dtype(f"u{arr.dtype.itemsize}"))  # read the bits, then check them as integers
    kind = arr.dtype.kind
    if kind in "iu":
        if kind == "i" and arr.dtype.itemsize * 8 == fmt.width:
            arr = arr.view(fmt.dtype)  # signed storage of the same width: reinterpret
        else:
            # Unsigned storage no wider than the format holds only valid patterns: skip the two scans.
            fits = kind == "u" and arr.dtype.itemsize * 8 <= fmt.width
            if arr.size and not fits and (arr.min() < 0 or int(arr.max()) >> fmt.width):
                bad = int(arr[(arr < 0) | (arr >= (1 << fmt.width))].flat[0])
                raise ValueError(f"{name}: value {bad} ({bad:#x}) is not a {fmt.width}-bit {fmt.name} bit pattern")
            arr = arr.astype(fmt.dtype, copy=False)
        low = (1 << fmt.storage_shift) - 1
        if low and arr.size and np.any(arr & fmt.dtype(low)):
            bad = int(arr[(arr & fmt.dtype(low)) != 0].flat[0])
            raise ValueError(f"{name}: {bad:#010x} is not a {fmt.name} value: TF32 in FP32 layout has its low "
                             f"{fmt.storage_shift} bits zero (round FP32 values with sf.convert(bits, src=sf.fp32, "
                             f"dst=sf.{fmt.name}))")
        return arr
    if kind in "fcVb" or arr.dtype.name in ("bfloat16",) or arr.dtype.name.startswith("float"):
        expected = f"{fmt.float_dtype_name} or integer bit patterns" if fmt.float_dtype_name else "integer bit patterns"
        raise TypeError(f"{name}: {fmt.name} operands must be {expected}, got dtype {arr.dtype}")
    raise TypeError(f"{name}: cannot read {fmt.name} bit patterns from dtype {arr.dtype}")
