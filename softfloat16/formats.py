"""Binary floating-point formats as independent properties: widths, bias, storage, and which
patterns are special.

One set of generic kernels serves every format. A format is described by facts that do not
depend on each other (docs/formats-spec.md): the exponent and fraction widths and the bias;
signed or unsigned; infinities or not; which codes are NaNs (the top binade as in IEEE 754, the
one largest code of each sign, the code of -0, or none); subnormals or not; what overflow gives by
default. Everything else (max finite, the NaN patterns, the classification of patterns, the
docs' table) is derived from them, here; the kernels get the same facts packed in one integer
(``encoding_code``), as compile-time constants. The IEEE P3109 formats are built by ``p3109``.
The arithmetic methods (``fp16.add`` ...) are attached by ``softfloat16.format_methods``: this
module imports nothing of the arithmetic, so everything can import it.
"""
from __future__ import annotations

import re
from dataclasses import KW_ONLY, dataclass, field
from fractions import Fraction

import numpy as np

#: Where the NaNs of a format sit at the top of each sign's codes: ``binade`` (IEEE 754: every code
#: of the top exponent with a nonzero fraction), ``one`` (only the largest code), ``none``.
TOP_NANS = ("binade", "one", "none")
#: What a result beyond the largest finite value gives by default (when it rounds away from zero).
OVERFLOWS = ("inf", "nan", "saturate")

# The properties packed into the kernels' integer (softfloat16/_kernels/core.py holds the kernels'
# copy of these bit values; tests/test_constants.py holds the two equal).
_K_SIGNED, _K_INFINITIES, _K_NAN_AT_NEGATIVE_ZERO, _K_NO_SUBNORMALS = 1, 2, 4, 8
_K_TIES_TO_EVEN_CODE, _K_TOP_NAN_ONE, _K_TOP_NANS_BINADE = 16, 32, 64
_K_OVERFLOW_NAN, _K_OVERFLOW_SATURATE = 128, 256
_K_BIAS_SHIFT = 16  # the bias minus 2**(e-1) - 1, as an 8-bit two's complement field


@dataclass(frozen=True, eq=False)
class Format:
    """A binary floating-point format of at most 32 bits, as its independent properties.

    >>> from softfloat16 import fp16
    >>> (fp16.exponent_bits, fp16.fraction_bits, fp16.bias, fp16.width, fp16.dtype)
    (5, 10, 15, 16, <class 'numpy.uint16'>)
    >>> (fp16.signed, fp16.infinities, fp16.top_nans, fp16.nan_at_negative_zero, fp16.subnormals, fp16.overflow)
    (True, True, 'binade', False, True, 'inf')
    """

    name: str
    exponent_bits: int
    fraction_bits: int
    dtype: type
    float_dtype_name: str | None = None   # numpy/ml_dtypes float dtype holding these bits
    aliases: tuple[str, ...] = field(default=())
    _: KW_ONLY                            # the properties below are keyword-only
    signed: bool = True                   # a sign bit above the exponent
    infinities: bool = True               # the largest non-NaN code of each sign is +-inf
    top_nans: str = "binade"              # one of TOP_NANS
    nan_at_negative_zero: bool = False    # the code of -0 is a NaN: the format has no -0
    subnormals: bool = True               # exponent field 0 holds the subnormals (else a normal binade)
    bias: int | None = None               # default 2**(exponent_bits - 1) - 1
    overflow: str | None = None           # one of OVERFLOWS; default: inf, else NaN, else saturate
    tie_to_even_code: bool = False        # precision 1: a tie goes to the even code (else up)
    storage_shift: int = 0                # zero bits below the pattern in storage (TF32 in FP32 layout)
    family: str = ""                      # what the docs call the layout of special values (derived)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        if self.bias is None:
            set_(self, "bias", (1 << (self.exponent_bits - 1)) - 1 if self.exponent_bits else 0)
        if self.top_nans not in TOP_NANS:
            raise ValueError(f"top_nans: unknown value {self.top_nans!r}; accepted: {', '.join(TOP_NANS)}")
        if self.nan_at_negative_zero and not self.signed:
            raise ValueError(f"{self.name}: nan_at_negative_zero needs a signed format (an unsigned one has no "
                             f"-0 code)")
        if self.tie_to_even_code and self.fraction_bits:
            raise ValueError(f"{self.name}: tie_to_even_code has no effect with fraction bits (ties go to the even "
                             f"significand)")
        if not 0 <= self.bias - ((1 << max(self.exponent_bits - 1, 0)) - 1) + 128 < 256:
            raise ValueError(f"{self.name}: bias {self.bias} is more than 128 away from 2**(e-1) - 1")
        if self.top_nans == "binade" and not self.infinities:
            raise ValueError(f"{self.name}: top_nans='binade' (IEEE 754's NaNs) needs infinities")
        default = "inf" if self.infinities else "nan" if self.has_nan else "saturate"
        overflow = default if self.overflow is None else self.overflow
        if overflow not in OVERFLOWS or (overflow == "inf" and not self.infinities) or \
                (overflow == "nan" and not self.has_nan):
            possible = [o for o in OVERFLOWS if (o != "inf" or self.infinities) and (o != "nan" or self.has_nan)]
            raise ValueError(f"{self.name}: overflow {self.overflow!r} is not possible here; accepted: "
                             f"{', '.join(possible)}")
        set_(self, "overflow", overflow)
        set_(self, "family", self.family or _family(self))

    # --- what the properties imply ------------------------------------------------------------

    @property
    def encoding(self) -> str:
        """The name of the layout of special values (``ieee``, ``fn``, ``fnuz``, ``finite``,
        ``e8m0``, ``p3109``): a label for the docs; the properties say what it means."""
        return self.family

    @property
    def encoding_code(self) -> int:
        """The properties packed into one integer: the kernels' description of the format."""
        offset = self.bias - ((1 << max(self.exponent_bits - 1, 0)) - 1)
        return (_K_SIGNED * self.signed | _K_INFINITIES * self.infinities
                | _K_NAN_AT_NEGATIVE_ZERO * self.nan_at_negative_zero | _K_NO_SUBNORMALS * (not self.subnormals)
                | _K_TIES_TO_EVEN_CODE * self.tie_to_even_code | _K_TOP_NAN_ONE * (self.top_nans == "one")
                | _K_TOP_NANS_BINADE * (self.top_nans == "binade") | _K_OVERFLOW_NAN * (self.overflow == "nan")
                | _K_OVERFLOW_SATURATE * (self.overflow == "saturate") | ((offset & 0xFF) << _K_BIAS_SHIFT))

    @property
    def has_inf(self) -> bool:
        return self.infinities

    @property
    def has_nan(self) -> bool:
        return self.top_nans != "none" or self.nan_at_negative_zero

    @property
    def has_negative_zero(self) -> bool:
        return self.signed and not self.nan_at_negative_zero and self.has_zero

    @property
    def has_zero(self) -> bool:
        """Whether there is a zero (every format but those without subnormals, like E8M0)."""
        return self.subnormals

    @property
    def has_arithmetic(self) -> bool:
        """Whether + - * / sqrt fma are defined (every format with a zero)."""
        return self.has_zero

    @property
    def quiet_nans(self) -> bool:
        """Whether every NaN is quiet and has no payload (all but IEEE 754's NaNs)."""
        return self.top_nans != "binade"

    @property
    def ieee_like(self) -> bool:
        """Whether the values and special codes are laid out as in IEEE 754's binary formats (signed,
        +-0, subnormals, NaNs in the top binade, bias 2**(e-1) - 1, overflow to inf): fp16, bf16,
        fp32, tf32, fp8_e5m2; what the accumulators and torch's float dtypes take."""
        return (self.signed and self.top_nans == "binade" and not self.nan_at_negative_zero and self.subnormals
                and self.overflow == "inf" and self.bias == (1 << (self.exponent_bits - 1)) - 1)

    @property
    def top_nan_count(self) -> int:
        """How many codes at the top of each sign are NaNs."""
        return {"binade": (1 << self.fraction_bits) - 1, "one": 1, "none": 0}[self.top_nans]

    # --- widths and exponents ---------------------------------------------------------------

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
        return 1 - self.bias if self.subnormals else -self.bias

    @property
    def emax(self) -> int:
        """The exponent of the largest finite value: 2**emax <= max finite < 2**(emax + 1) (fp16: 15)."""
        field_ = (self.max_finite & self.exponent_mask) >> (self.fraction_bits + self.storage_shift)
        return field_ - self.bias

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
    def _top(self) -> int:
        """The largest magnitude pattern (compact: without TF32's zero bits)."""
        return (1 << (self.exponent_bits + self.fraction_bits)) - 1

    @property
    def max_finite(self) -> int:
        """Bits of the largest finite value: the largest magnitude below the NaNs and infinities.

        >>> import softfloat16 as sf
        >>> [hex(f.max_finite) for f in (sf.fp16, sf.fp8_e4m3fn, sf.fp8_e4m3fnuz, sf.fp4_e2m1, sf.e8m0)]
        ['0x7bff', '0x7e', '0x7f', '0x7', '0xfe']
        """
        return (self._top - self.top_nan_count - int(self.infinities)) << self.storage_shift

    @property
    def inf(self) -> int:
        """Bits of +inf: the largest magnitude below the top NaNs (formats without infinities raise
        a ValueError).

        >>> import softfloat16 as sf
        >>> hex(sf.fp16.inf), hex(sf.format("p3109_k8p3se").inf)
        ('0x7c00', '0x7f')
        """
        if not self.has_inf:
            raise ValueError(f"{self.name} has no infinity")
        return (self._top - self.top_nan_count) << self.storage_shift

    @property
    def min_normal(self) -> int:
        """Bits of the smallest positive normal value (without subnormals: the smallest value)."""
        return self._unit << self.fraction_bits if self.subnormals else 0

    @property
    def min_subnormal(self) -> int:
        """Bits of the smallest positive subnormal value (without subnormals: the smallest value)."""
        return self._unit if self.subnormals else 0

    @property
    def one(self) -> int:
        """Bits of 1.0."""
        return self.bias << (self.fraction_bits + self.storage_shift)

    @property
    def quiet_bit(self) -> int:
        """The top fraction bit: set in a quiet NaN, clear in a signaling one (IEEE 754's NaNs; 0 in
        the other formats, whose NaNs are all quiet)."""
        return 0 if self.quiet_nans else self._unit << (self.fraction_bits - 1)

    def nan_of(self, negative: bool = False) -> int | None:
        """Bits of the NaN of a sign without payload: the quiet NaN in the top binade, the largest
        code of the sign, or the code of -0 (one NaN for both signs); None without NaN."""
        sign = self.sign_mask if negative and self.signed else 0
        if self.top_nans == "binade":
            return sign | self.exponent_mask | self.quiet_bit
        if self.top_nans == "one":
            return sign | self.magnitude_mask
        return self.sign_mask if self.nan_at_negative_zero else None

    @property
    def default_nan(self) -> int | None:
        """Bits of the default NaN: +qNaN with only the quiet bit set in IEEE formats (fp16 0x7e00),
        the positive NaN in the others; None in a format without NaN.

        >>> import softfloat16 as sf
        >>> [hex(f.default_nan) for f in (sf.fp16, sf.bf16, sf.fp32, sf.fp8_e4m3fn, sf.fp8_e5m2fnuz)]
        ['0x7e00', '0x7fc0', '0x7fc00000', '0x7f', '0x80']
        """
        return self.nan_of(False)

    def overflow_value(self, negative: bool = False, saturate: bool = False) -> int:
        """Bits of what a result beyond the largest finite value becomes when it rounds away from
        zero (docs/formats-spec.md): the format's ``overflow`` (+-inf, the NaN of the sign, or
        +-max finite), +-max finite whenever ``saturate``.

        >>> import softfloat16 as sf
        >>> [hex(f.overflow_value(negative=True)) for f in (sf.fp16, sf.fp8_e4m3fn, sf.fp8_e4m3fnuz, sf.fp4_e2m1)]
        ['0xfc00', '0xff', '0x80', '0xf']
        """
        sign = self.sign_mask if negative and self.signed else 0
        if saturate or self.overflow == "saturate":
            return sign | self.max_finite
        if self.overflow == "inf":
            return sign | self.inf
        return self.nan_of(negative)

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
        nan = m > self.magnitude_mask - (self.top_nan_count << self.storage_shift)
        if self.nan_at_negative_zero:
            nan = nan | (b == self.sign_mask)
        return nan

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
        return self._classify(bits, lambda m, b: m == self.inf)

    def is_zero(self, bits) -> np.ndarray:
        """True where the pattern is +0 or -0.

        >>> import softfloat16 as sf
        >>> sf.fp16.is_zero([0x0000, 0x8000, 0x0001]).tolist()
        [True, True, False]
        """
        if not self.has_zero:
            return self._classify(bits, lambda m, b: np.zeros(np.shape(b), bool))
        return self._classify(bits, lambda m, b: (m == 0) & ~self._nan_test(m, b))

    def is_subnormal(self, bits) -> np.ndarray:
        """True where the pattern is a nonzero subnormal.

        >>> import softfloat16 as sf
        >>> sf.fp16.is_subnormal([0x0000, 0x8001, 0x03FF, 0x0400]).tolist()
        [False, True, True, False]
        """
        if not self.subnormals:
            return self._classify(bits, lambda m, b: np.zeros(np.shape(b), bool))
        return self._classify(bits, lambda m, b: (m != 0) & (m < self.min_normal))

    def is_finite(self, bits) -> np.ndarray:
        """True where the pattern is neither an infinity nor a NaN.

        >>> import softfloat16 as sf
        >>> sf.bf16.is_finite([0x7F7F, 0xFF80, 0x7FC0, 0x8000]).tolist()
        [True, False, False, True]
        """
        if self.has_inf:
            return self._classify(bits, lambda m, b: (m < self.inf) & ~self._nan_test(m, b))
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
        if self.quiet_nans:
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
        if bool(self.is_inf(b)):
            return sign * float("inf")
        if field_ == 0 and self.subnormals:
            return sign * Fraction(frac) * Fraction(2) ** self.min_subnormal_exponent
        significand = Fraction(frac | (1 << self.fraction_bits))
        return sign * significand * Fraction(2) ** (field_ - self.bias - self.fraction_bits)

    def __repr__(self) -> str:
        kind = "" if self.family == "ieee" else f", {self.family}"
        widths = f"{int(self.signed)}-{self.exponent_bits}-{self.fraction_bits}"
        return f"Format({self.name!r}: {widths}, bias {self.bias}{kind})"


def _family(fmt: Format) -> str:
    """The docs' name of a format's special values, from its properties (``custom`` where none fits)."""
    props = (fmt.signed, fmt.infinities, fmt.top_nans, fmt.nan_at_negative_zero, fmt.subnormals)
    standard = fmt.bias == (1 << (fmt.exponent_bits - 1)) - 1
    names = {(True, True, "binade", False, True): "ieee", (True, False, "one", False, True): "fn",
             (True, False, "none", True, True): "fnuz", (True, False, "none", False, True): "finite",
             (False, False, "one", False, False): "e8m0"}
    name = names.get(props, "custom")
    if name == "fnuz" and fmt.bias == 1 << (fmt.exponent_bits - 1):
        return name
    return name if standard and name != "fnuz" else "custom"


def _ocp(name: str, ebits: int, fbits: int, float_dtype_name: str, aliases: tuple[str, ...], kind: str) -> Format:
    """The accelerators' 8-bit-and-smaller formats, named by ml_dtypes' suffixes: ``fn`` (finite
    and NaN: no inf, the top code of each sign a NaN), ``fnuz`` (also no -0: its code is the NaN,
    bias one larger), ``finite`` (every code a number)."""
    props = {"fn": {"top_nans": "one"}, "fnuz": {"top_nans": "none", "nan_at_negative_zero": True,
                                               "bias": 1 << (ebits - 1)},
             "finite": {"top_nans": "none"}}[kind]
    return Format(name, ebits, fbits, np.uint8, float_dtype_name, aliases, infinities=False, **props)


fp16 = Format("fp16", 5, 10, np.uint16, "float16", ("float16", "half", "binary16"))
bf16 = Format("bf16", 8, 7, np.uint16, "bfloat16", ("bfloat16",))
fp32 = Format("fp32", 8, 23, np.uint32, "float32", ("float32", "single", "binary32"))
tf32 = Format("tf32", 8, 10, np.uint32, None, ("tensorfloat32",))
# TF32 as the hardware holds it: FP32 bits whose low 13 bits are zero.
tf32_fp32 = Format("tf32_fp32", 8, 10, np.uint32, "float32", ("tf32_in_fp32", "tensorfloat32_fp32"), storage_shift=13)
fp8_e5m2 = Format("fp8_e5m2", 5, 2, np.uint8, "float8_e5m2", ("e5m2", "float8_e5m2"))
fp8_e4m3fn = _ocp("fp8_e4m3fn", 4, 3, "float8_e4m3fn", ("float8_e4m3fn", "e4m3fn", "e4m3"), "fn")
fp8_e4m3fnuz = _ocp("fp8_e4m3fnuz", 4, 3, "float8_e4m3fnuz", ("float8_e4m3fnuz", "e4m3fnuz"), "fnuz")
fp8_e5m2fnuz = _ocp("fp8_e5m2fnuz", 5, 2, "float8_e5m2fnuz", ("float8_e5m2fnuz", "e5m2fnuz"), "fnuz")
fp6_e2m3 = _ocp("fp6_e2m3", 2, 3, "float6_e2m3fn", ("float6_e2m3fn", "e2m3"), "finite")
fp6_e3m2 = _ocp("fp6_e3m2", 3, 2, "float6_e3m2fn", ("float6_e3m2fn", "e3m2"), "finite")
fp4_e2m1 = _ocp("fp4_e2m1", 2, 1, "float4_e2m1fn", ("float4_e2m1fn", "e2m1"), "finite")
# Unsigned powers of two: no sign, no zero, no subnormals (field 0 is 2**-127), NaN 0xff.
e8m0 = Format("e8m0", 8, 0, np.uint8, "float8_e8m0fnu", ("float8_e8m0fnu", "e8m0fnu"), signed=False,
              infinities=False, top_nans="one", subnormals=False)

FORMATS = {f.name: f for f in (fp16, bf16, fp32, tf32, tf32_fp32, fp8_e5m2, fp8_e4m3fn, fp8_e4m3fnuz, fp8_e5m2fnuz,
                               fp6_e2m3, fp6_e3m2, fp4_e2m1, e8m0)}
_BY_NAME = {name: f for f in FORMATS.values() for name in (f.name, *f.aliases)}

# --- IEEE P3109 -------------------------------------------------------------------------------

#: The widths K of the P3109 formats; precision P is 1..K-1 (signed) or 1..K (unsigned).
P3109_WIDTHS = range(3, 9)
P3109_DOMAINS = ("extended", "finite")
_P3109_NAME = re.compile(r"p3109_k(\d+)p(\d+)([su])([ef])")
_P3109: dict[tuple[int, int, bool, str], Format] = {}


def p3109(k: int, p: int, signed: bool = True, domain: str = "extended") -> Format:
    """The IEEE P3109 format binaryKpP: K bits, precision P (significand bits with the implicit
    one), signed or unsigned, ``extended`` (+-inf at the top) or ``finite`` domain. No -0: the
    signed formats' NaN is 0x80 (of K bits: 2**(K-1)), the unsigned ones' the top code; bias
    2**(K-P-1) signed, 2**(K-P) unsigned; subnormals; precision 1 rounds ties to the even code.
    Named as ``p3109_k8p3se`` (K, P, signed/unsigned, extended/finite).

    >>> f = p3109(8, 3)
    >>> f.name, f.exponent_bits, f.fraction_bits, f.bias, hex(f.default_nan), hex(f.inf), hex(f.max_finite)
    ('p3109_k8p3se', 5, 2, 16, '0x80', '0x7f', '0x7e')
    >>> g = p3109(8, 4, signed=False, domain="finite")
    >>> g.name, g.exponent_bits, g.bias, hex(g.default_nan), hex(g.max_finite), float(g.value(g.max_finite))
    ('p3109_k8p4uf', 5, 16, '0xff', '0xfe', 57344.0)
    """
    for name, value in (("k", k), ("p", p)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"p3109: {name} must be an integer, got {value!r}")
    if not isinstance(signed, (bool, np.bool_)):
        raise TypeError(f"p3109: signed must be True or False, got {signed!r}")
    if k not in P3109_WIDTHS:
        raise ValueError(f"p3109: no format of K={k} bits; K is {P3109_WIDTHS.start}..{P3109_WIDTHS.stop - 1}")
    top = k if not signed else k - 1
    if not 1 <= p <= top:
        raise ValueError(f"p3109: no {'signed' if signed else 'unsigned'} K={k} format of precision P={p}; "
                         f"P is 1..{top}")
    if domain not in P3109_DOMAINS:
        raise ValueError(f"p3109: unknown domain {domain!r}; accepted: {', '.join(P3109_DOMAINS)}")
    key = (int(k), int(p), bool(signed), domain)
    if key not in _P3109:
        name = f"p3109_k{k}p{p}{'s' if signed else 'u'}{domain[0]}"
        ebits = k - p + (0 if signed else 1)
        _P3109[key] = Format(name, ebits, p - 1, np.uint8, None, (), signed=bool(signed),
                             infinities=domain == "extended", top_nans="none" if signed else "one",
                             nan_at_negative_zero=bool(signed), bias=1 << (k - p - (1 if signed else 0)),
                             tie_to_even_code=p == 1, family="p3109")
    return _P3109[key]


def p3109_formats(k: int | None = None) -> tuple[Format, ...]:
    """Every P3109 format (of K bits, or of every K in P3109_WIDTHS): signed then unsigned, by P,
    extended then finite.

    >>> len(p3109_formats(8)), len(p3109_formats())
    (30, 120)
    """
    widths = P3109_WIDTHS if k is None else (k,)
    return tuple(p3109(w, p, s, d) for w in widths for s in (True, False) for p in range(1, w + (not s))
                 for d in P3109_DOMAINS)


def format(name: str | Format) -> Format:  # noqa: A001 - the public API name is `sf.format`
    """Look up a format by name or alias.

    >>> format("half") is format("fp16")
    True
    >>> format("p3109_k8p4uf") is p3109(8, 4, signed=False, domain="finite")
    True
    """
    if isinstance(name, Format):
        return name
    if isinstance(name, str) and name.strip().lower() in _BY_NAME:
        return _BY_NAME[name.strip().lower()]
    match = _P3109_NAME.fullmatch(name.strip().lower()) if isinstance(name, str) else None
    if match:
        k, p, s, d = match.groups()
        return p3109(int(k), int(p), s == "s", {"e": "extended", "f": "finite"}[d])
    raise ValueError(f"format: unknown format {name!r}; accepted: {', '.join(sorted(_BY_NAME))}, and "
                     f"p3109_k<K>p<P><s|u><e|f> (K {P3109_WIDTHS.start}..{P3109_WIDTHS.stop - 1}, P 1..K-1 signed, "
                     f"1..K unsigned)")


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
