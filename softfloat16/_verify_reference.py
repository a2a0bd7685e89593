"""The independent reference used by ``softfloat16.verify``: host float hardware plus exact proofs.

Nothing here calls the softfloat16 kernels or shares their method (integer significands and one
round-pack routine). Three ways to the correctly rounded result:

1. ``hardware_rne`` / ``hardware_convert`` (numpy, RNE only): compute in a wider hardware format
   and let numpy / ml_dtypes round once more, where that second rounding is provably innocuous
   (Figueroa: with p' >= 2p + 2 bits, + - * / sqrt double rounding is harmless under
   round-to-nearest). FP16 (p = 11) goes through float32 (p' = 24; float32 normals reach 2^-126,
   so FP16 subnormal results keep all 24 bits). BF16 (p = 8) add/sub/div/sqrt go through float32
   too: a subnormal BF16 sum is exact in float32, and a quotient a/b that is not a BF16 midpoint
   m stays |a - m*b| / |b| >= 2^-142 away from it, while float32 moves it by at most 2^-150. BF16
   products can fall into float32's subnormal range, where float32 has too few bits, so they are
   formed exactly in float64 and rounded once from there: by ml_dtypes' float64 -> bfloat16 where
   that is one rounding (ml_dtypes 0.7 and later, ``ml_dtypes_rounds_correctly``), else through
   float32 (exact above 2^-126) and, below 2^-126, as an integer count of 2^-133 by ``rint``
   (earlier ml_dtypes releases convert float64 through float32: two roundings).
2. ``exact_round`` (every mode; a Numba loop of plain float64 arithmetic): for a threshold t
   (a representable value or the midpoint of two), sign(x - t) of the exact result x is decided
   with error-free transformations. Products of FP16/BF16 values are exact in float64; TwoSum
   writes a sum exactly as s + e; and the sign of a two-term float sum is the sign of its exact
   value (rounding is monotone and a nonzero sum never rounds to 0). Division and sqrt become
   sign(a - t*b) and sign(a - t*t) with exact t*b and t*t. From the signs at the two bracketing
   values and at their midpoint, each rounding mode is a choice between the two neighbours.
3. ``softfloat16.exact`` (``round_fraction`` / ``round_sqrt``): ``fractions.Fraction`` exact
   rounding, the fallback for any element where (2) cannot prove its bracket, and the oracle the
   tests hold (1) and (2) to.

The formats of 8 bits or fewer (FP8 E5M2, E4M3FN, E4M3FNUZ, E5M2FNUZ, FP6, FP4) take the same
three ways, their values decoded by ml_dtypes; (1) is one float32 operation and ml_dtypes' float32
-> format conversion, (2) runs on their ordered line, and the special values of each encoding
(overflow value, NaN or its +0 stand-in, no -0 in FNUZ; ``saturate``) are written afterwards from
docs/formats-spec.md (``encode_specials``, ``round_float32``). Stochastic rounding with given
random words is rounded by (3) (``stochastic_round``).
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction
from typing import NamedTuple

import numpy as np
from numba import njit

from .exact import round_fraction, round_sqrt
from .formats import Format, format as parse_format

MODES = ("rne", "rna", "rtz", "rup", "rdn", "rod")
BINARY = ("add", "sub", "mul", "div")
OPS = BINARY + ("fma", "sqrt", "convert")
ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "fma": 3, "sqrt": 1, "convert": 1}
_OP_CODE = {op: i for i, op in enumerate(OPS)}
ADD, SUB, MUL, DIV, FMA, SQRT, CONVERT = range(7)
RNE, RNA, RTZ, RUP, RDN, ROD = range(6)


# --- exact rational results (rounded by softfloat16.exact) -----------------------------------------

def exact_fraction(op: str, operands: list[float]) -> Fraction:
    """The exact rational result of a rational op on float operand values."""
    f = [Fraction(float(x)) for x in operands]
    if op == "add":
        return f[0] + f[1]
    if op == "sub":
        return f[0] - f[1]
    if op == "mul":
        return f[0] * f[1]
    if op == "div":
        return f[0] / f[1]
    if op == "fma":
        return f[0] * f[1] + f[2]
    if op == "convert":
        return f[0]
    raise ValueError(f"op: {op!r} has no rational result")


# --- format tables -----------------------------------------------------------------------------

#: Formats whose + - * / sqrt (and fma) the reference rounds: FP16, BF16 and every format of 8 bits
#: or fewer that has arithmetic (E8M0 has none), with the special values of docs/formats-spec.md.
ARITHMETIC_FORMATS = ("fp16", "bf16", "fp8_e5m2", "fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp6_e2m3",
                      "fp6_e3m2", "fp4_e2m1")
#: Those of 8 bits or fewer: sums, products and quotients of their values are exact in float64.
SMALL_FORMATS = ARITHMETIC_FORMATS[2:]
#: The "NaN" written by the sign loop, mapped to the format's NaN (or stand-in) afterwards.
_NAN = -1
#: The sign bit of the sign loop's output, far above every key: a format's own sign bit can be
#: the key one beyond max finite (0x80 in the FNUZ formats, 0x8 in FP4 E2M1).
_LOOP_SIGN = 1 << 40


def _ml_dtype(fmt: Format):
    """ml_dtypes' dtype of a format of 8 bits or fewer (None without ml_dtypes)."""
    try:
        import ml_dtypes
    except ImportError:
        return None
    return np.dtype(getattr(ml_dtypes, fmt.float_dtype_name))


@functools.cache
def value_table(fmt: Format) -> np.ndarray:
    """float64 value of every bit pattern of a 16-bit (or narrower) format, by hardware widening
    (numpy for fp16, the top half of a float32 for bf16, ml_dtypes for the formats of 8 bits or
    fewer, whose decoding thus owes nothing to this package; without ml_dtypes, ``Format.value``)."""
    bits = np.arange(1 << fmt.width, dtype=np.uint32)
    with np.errstate(all="ignore"):
        if fmt.name == "fp16":
            return bits.astype(np.uint16).view(np.float16).astype(np.float64)
        if fmt.name == "bf16":  # a bf16 is the top half of an fp32
            return (bits << 16).view(np.float32).astype(np.float64)
        if fmt.width <= 8 and fmt.float_dtype_name and _ml_dtype(fmt) is not None:
            return bits.astype(np.uint8).view(_ml_dtype(fmt)).astype(np.float64)
    return np.array([float(fmt.value(int(b))) for b in bits])


def values(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """Exact float64 values of bit patterns."""
    if fmt.width == 32:
        with np.errstate(all="ignore"):  # signaling NaNs may warn as they widen
            return np.asarray(bits, dtype=np.uint32).view(np.float32).astype(np.float64)
    return value_table(fmt)[bits]


class Grid(NamedTuple):
    """The ordered line of a signed format, read off its table of values."""

    line: np.ndarray     # line[k + top]: the value of key k (the signed magnitude of a pattern)
    top: int             # the key one beyond max finite
    fraction_bits: int
    bias: int            # the exponent field of 1.0
    emin: int            # log2 of the smallest normal
    emax: int            # floor(log2(max finite))


@functools.cache
def grid(fmt: Format) -> Grid:
    """Keys 0 .. max finite are the magnitudes in increasing order in every encoding (special
    patterns, where there are any, sit above). The ends of the line, keys +-top, hold max finite
    plus the top binade's spacing: the value rounding with an unbounded exponent would give next
    (2^(emax+1) in IEEE formats; 480 in E4M3FN, whose 0x7f is its NaN). Rounding needs it as max
    finite's far neighbour; a result rounded to it has overflowed."""
    table = value_table(fmt)
    magnitudes = table[: 1 << (fmt.width - 1)]
    finite = np.isfinite(magnitudes)
    max_key = int(np.flatnonzero(finite)[-1])
    if not finite[: max_key + 1].all() or not np.all(np.diff(magnitudes[: max_key + 1]) > 0):
        raise ValueError(f"format: {fmt.name}'s patterns are not in the order of their values")
    biggest = magnitudes[max_key]
    line = np.append(magnitudes[: max_key + 1], 2 * biggest - magnitudes[max_key - 1])
    bias = int(np.flatnonzero(magnitudes == 1.0)[0]) >> fmt.fraction_bits
    return Grid(np.concatenate([-line[:0:-1], line]), max_key + 1, fmt.fraction_bits, bias, 1 - bias,
                int(math.floor(math.log2(biggest))))


def line(fmt: Format) -> np.ndarray:
    """``grid(fmt).line``."""
    return grid(fmt).line


# --- special values per encoding (docs/formats-spec.md) -------------------------------------------

def nan_result(fmt: Format) -> int:
    """The pattern of a NaN result (an invalid operation, a NaN operand) compared by class: the
    default NaN, and in a format without NaN its stand-in +0 (``finite``: FP6, FP4)."""
    return fmt.default_nan if fmt.has_nan else 0


def overflow_value(fmt: Format, negative: np.ndarray, saturate: bool) -> np.ndarray:
    """Format.overflow_value for an array of signs: also the result of x/0 and of an infinite
    operand where there is no infinity."""
    negative = np.asarray(negative, dtype=bool)
    return np.where(negative, fmt.overflow_value(True, saturate), fmt.overflow_value(False, saturate))


def encode_specials(fmt: Format, loop_out: np.ndarray, saturate: bool = False) -> np.ndarray:
    """Patterns from the sign loop's output (``_LOOP_SIGN`` | key, with key = top for a result
    beyond max finite or infinite, or ``_NAN``): the overflow value, the format's NaN, and no -0
    in the FNUZ formats."""
    loop_out = np.asarray(loop_out, dtype=np.int64)
    nan = loop_out == _NAN
    negative = (loop_out & _LOOP_SIGN) != 0
    key = loop_out & (_LOOP_SIGN - 1)
    out = np.where(negative, fmt.sign_mask, 0) | key
    beyond = ~nan & (key == grid(fmt).top)
    out[beyond] = overflow_value(fmt, negative[beyond], saturate)
    if not fmt.has_negative_zero:
        out[~nan & negative & (key == 0)] = 0  # a negative result rounded to zero: +0, the only zero
    out[nan] = nan_result(fmt)
    return out


# --- (2) exact rounding from signs, in a Numba loop -----------------------------------------------
# error_model="numpy": x / 0 gives inf, not an exception. Numba never contracts a*b + c into an
# FMA or reassociates without fastmath, which TwoSum relies on.

@njit(cache=True, error_model="numpy")
def _two_sum(x, y):
    s = x + y
    y_virtual = s - x
    return s, (x - (s - y_virtual)) + (y - y_virtual)


@njit(cache=True, error_model="numpy")
def _sign(x):
    return 1 if x > 0.0 else (-1 if x < 0.0 else 0)


@njit(cache=True, error_model="numpy")
def _sign_minus(op, x0, x1, x2, t):
    """(sign of exact(op(x0, x1, x2)) - t, proven)."""
    if op == MUL:
        return _sign(x0 * x1 - t), True          # x0*x1 exact; one rounded subtraction
    if op == DIV:
        return _sign(x0 - t * x1) * _sign(x1), True  # t*x1 exact (<= 12 + 11 bits)
    if op == SQRT:
        return (1, True) if t < 0.0 else (_sign(x0 - t * t), True)
    if op == CONVERT:
        return _sign(x0 - t), True
    if op == FMA:
        u, w = x0 * x1, x2                       # product exact
    else:
        u, w = x0, (x1 if op == ADD else -x1)
    s, e = _two_sum(u, w)                        # u + w = s + e
    d, e2 = _two_sum(s, -t)                      # s - t = d + e2, so x - t = d + e2 + e
    if e2 == 0.0:
        return _sign(d + e), True
    if abs(d) > 2.0 * (abs(e) + abs(e2)):       # x far outside the range: d alone decides
        return _sign(d), True
    return _sign(d), False


@functools.cache
def _exact_loop(op: int):
    """The loop for one op: a compile-time constant, so its branches fold (the mode's branches
    are the same for the whole array and predict perfectly)."""
    @njit(cache=True, error_model="numpy")
    def loop(mode, v0, v1, v2, grid, top, fbits, bias, emin, emax, sign_mask, default_nan, out, undecided):
        _exact_body(op, mode, v0, v1, v2, grid, top, fbits, bias, emin, emax, sign_mask, default_nan,
                    out, undecided)
    return loop


@njit(cache=True, error_model="numpy", inline="always")
def _exact_body(op, mode, v0, v1, v2, grid, top, fbits, bias, emin, emax, sign_mask, default_nan,
                out, undecided):
    min_normal = 2.0 ** emin
    min_subnormal = 2.0 ** (emin - fbits)
    overflow_point = 2.0 ** (emax + 1)
    scale = 1 << fbits
    word = np.empty(1, dtype=np.float64)
    word_bits = word.view(np.int64)
    for i in range(out.size):
        x0, x1, x2 = v0[i], v1[i], v2[i]
        if op == ADD:
            y = x0 + x1
        elif op == SUB:
            y = x0 - x1
        elif op == MUL:
            y = x0 * x1
        elif op == DIV:
            y = x0 / x1
        elif op == SQRT:
            y = math.sqrt(x0) if x0 >= 0.0 else np.nan
        elif op == FMA:
            y = x0 * x1 + x2
        else:
            y = x0
        finite = np.isfinite(x0) and np.isfinite(x1) and np.isfinite(x2)
        if not finite or (op == DIV and x1 == 0.0) or np.isnan(y):
            # inf/NaN operands, x/0, invalid: the result is exact (inf, a zero or NaN)
            if np.isnan(y):
                out[i] = default_nan
            else:
                out[i] = (sign_mask if math.copysign(1.0, y) < 0.0 else 0) | (top if np.isinf(y) else 0)
            continue
        # the sign of an exact zero result
        if op == ADD or op == SUB or op == FMA:
            u = x0 * x1 if op == FMA else x0
            w = x2 if op == FMA else (x1 if op == ADD else -x1)
            both_zero = u == 0.0 and w == 0.0
            if mode == RDN:
                zero_negative = not (both_zero and math.copysign(1.0, u) > 0.0 and math.copysign(1.0, w) > 0.0)
            else:
                zero_negative = both_zero and math.copysign(1.0, u) < 0.0 and math.copysign(1.0, w) < 0.0
        else:
            zero_negative = math.copysign(1.0, y) < 0.0
        # a candidate key near x: y truncated to the format
        ay = abs(y)
        if ay >= overflow_point:
            c = top
        elif ay < min_normal:
            c = int(ay / min_subnormal)
        else:  # truncate the float64 fields: exponent, then the top fbits of the fraction
            word[0] = ay
            ybits = word_bits[0]
            c = (((ybits >> 52) - 1023 + bias) << fbits) | ((ybits >> (52 - fbits)) & (scale - 1))
        if y < 0.0:
            c = -c
        s0, ok = _sign_minus(op, x0, x1, x2, grid[c + top])
        if s0 == 0 and abs(c) < top:
            key, negative = c, zero_negative
        else:
            lo = c - 1 if s0 < 0 else c
            lo = min(max(lo, -top), top - 1)
            hi = lo + 1
            other = hi if lo == c else lo
            s_other, ok1 = _sign_minus(op, x0, x1, x2, grid[other + top])
            s_lo = s0 if lo == c else s_other
            s_hi = s0 if hi == c else s_other
            # lo < x < hi, except beyond the ends of the line (those overflow anyway)
            bracketed = (s_lo > 0 or lo == -top) and (s_hi < 0 or hi == top)
            s_mid, ok2 = 0, True
            if mode == RNE or mode == RNA:  # only the nearest modes look at the midpoint
                s_mid, ok2 = _sign_minus(op, x0, x1, x2, 0.5 * (grid[lo + top] + grid[hi + top]))
            ok = ok and ok1 and ok2 and bracketed
            lo_odd = (lo & 1) == 1
            if mode == RNE:
                up = s_mid > 0 or (s_mid == 0 and lo_odd)
            elif mode == RNA:
                up = s_mid > 0 or (s_mid == 0 and lo >= 0)
            elif mode == RTZ:
                up = lo < 0
            elif mode == RUP:
                up = True
            elif mode == RDN:
                up = False
            else:  # ROD: the odd neighbour
                up = not lo_odd
            key = hi if up else lo
            if mode == ROD and abs(key) == top:
                # round to odd goes toward zero on overflow: max finite (the key beyond it is odd
                # where the top binade ends in a NaN, as in E4M3FN, and rod would pick it)
                key = key - 1 if key > 0 else key + 1
            negative = hi == 0  # a tiny x rounded to zero keeps its sign
        undecided[i] = not ok
        if key < 0 or (key == 0 and negative):
            out[i] = sign_mask | abs(key)
        else:
            out[i] = key


def exact_round(fmt: Format, op: str, mode: str, v: list[np.ndarray], saturate: bool = False) -> tuple[np.ndarray, int]:
    """Correctly rounded bits of ``op`` on float64 operand values (exact, see the module
    docstring), NaN results as ``nan_result``, overflow as the encoding and ``saturate`` say.
    Returns (bits, elements settled by Fraction)."""
    if fmt.name not in ARITHMETIC_FORMATS:
        raise ValueError(f"format: the exact reference supports {', '.join(ARITHMETIC_FORMATS)}, not {fmt.name}")
    g = grid(fmt)
    v = [np.ascontiguousarray(x, dtype=np.float64) for x in v]
    v0, v1, v2 = (v + [v[0], v[0]])[:3]
    out = np.empty(v0.size, dtype=np.int64)
    undecided = np.zeros(v0.size, dtype=np.bool_)
    _exact_loop(_OP_CODE[op])(
        MODES.index(mode), v0, v1, v2, g.line, g.top, g.fraction_bits, g.bias, g.emin, g.emax,
        _LOOP_SIGN, _NAN, out, undecided)
    out = encode_specials(fmt, out, saturate)
    settle = np.flatnonzero(undecided)
    for i in settle:  # rare: settle with exact rationals
        args = [float(x[i]) for x in (v0, v1, v2)]
        if op == "sqrt":
            out[i] = round_sqrt(Fraction(args[0]), fmt, mode, saturate=saturate)[0]
        else:
            out[i] = round_fraction(exact_fraction(op, args), fmt, mode, saturate=saturate)[0]
    return out.astype(fmt.dtype), int(settle.size)


# --- (1) hardware RNE --------------------------------------------------------------------------

def _bf16_from_float32(x: np.ndarray) -> np.ndarray:
    import ml_dtypes
    return x.astype(ml_dtypes.bfloat16).view(np.uint16)


@functools.cache
def ml_dtypes_rounds_correctly() -> bool:
    """Whether ml_dtypes' conversions round correctly (0.7 and later). Earlier releases convert float64
    to bfloat16 and the formats of 8 bits or fewer through float32 (two roundings), and round float32
    subnormals in (2^-127, 1.5 * 2^-127) to E8M0's 2^-126: the reference never gives them float64."""
    try:
        import ml_dtypes
    except ImportError:
        return False
    major, minor = (int(part) for part in ml_dtypes.__version__.split(".")[:2])
    return (major, minor) >= (0, 7)


def bf16_products(product: np.ndarray, by_ml_dtypes: bool | None = None) -> np.ndarray:
    """Exact float64 products rounded (RNE) to BF16: by ml_dtypes' float64 -> bfloat16 (default: where
    it rounds once), or by float32 (exact >= 2^-126) and, below, ``rint`` of the integer count of
    2^-133 (every BF16 there is a multiple of it)."""
    if by_ml_dtypes is None:
        by_ml_dtypes = ml_dtypes_rounds_correctly()
    if by_ml_dtypes:
        import ml_dtypes
        return product.astype(ml_dtypes.bfloat16).view(np.uint16)
    fmt = parse_format("bf16")
    result = _bf16_from_float32(product.astype(np.float32))
    tiny = np.flatnonzero(np.abs(product) < 2.0**fmt.emin)
    count = np.rint(np.abs(product[tiny]) * 2.0**-fmt.min_subnormal_exponent).astype(np.uint16)
    result[tiny] = count | np.where(np.signbit(product[tiny]), fmt.sign_mask, 0).astype(np.uint16)
    return result


@functools.cache
def _float32_table(fmt: Format) -> np.ndarray:
    return value_table(fmt).astype(np.float32)  # exact


def round_float32(fmt: Format, y: np.ndarray, saturate: bool = False) -> np.ndarray:
    """float32 values rounded once (RNE) to a format of 8 bits or fewer by ml_dtypes' conversion,
    then given docs/formats-spec.md's special values where ml_dtypes differs or has no say: a NaN
    is ``nan_result`` (ml_dtypes turns a NaN into -0 in FP6/FP4), an infinite y (x/0) and a
    finite y that overflowed (ml_dtypes: inf or NaN) the overflow value, with ``saturate`` too.
    Overflow itself is ml_dtypes' call: rounding with an unbounded exponent beyond max finite."""
    y = np.asarray(y, dtype=np.float32)
    out = y.astype(_ml_dtype(fmt)).view(np.uint8).astype(np.int64)
    nan = np.isnan(y)
    overflowed = ~nan & (np.isinf(y) | ~np.isfinite(value_table(fmt)[out]))
    if fmt.encoding == "finite":  # ml_dtypes saturates: max finite is its answer to overflow
        overflowed |= np.isfinite(y) & (np.abs(y) > value_table(fmt)[fmt.max_finite])
    out[overflowed] = overflow_value(fmt, np.signbit(y[overflowed]), saturate)
    out[nan] = nan_result(fmt)
    return out.astype(fmt.dtype)


def hardware_rne(fmt: Format, op: str, bits: list[np.ndarray], saturate: bool = False) -> np.ndarray:
    """RNE results of + - * / sqrt on bit patterns via host floats (NaNs: some qNaN). FP16 and
    BF16 as the module docstring says; the formats of 8 bits or fewer through one float32
    operation (exact for + - *; for / and sqrt p' = 24 >= 2p + 2 with p <= 4, and every quotient
    and root of their values is a float32 normal) and ml_dtypes' float32 -> format (``round_float32``)."""
    if fmt.name not in ARITHMETIC_FORMATS or op not in BINARY + ("sqrt",):
        raise ValueError(f"no hardware RNE path for {fmt.name} {op}")
    if saturate and fmt.name not in SMALL_FORMATS:
        raise ValueError(f"no hardware path for {fmt.name} with saturate")
    with np.errstate(all="ignore"):
        if fmt.name == "bf16" and op == "mul":
            return bf16_products(value_table(fmt)[bits[0]] * value_table(fmt)[bits[1]])  # exact in float64
        table = _float32_table(fmt)
        x = [table[b] for b in bits]
        if op == "add":
            y = x[0] + x[1]
        elif op == "sub":
            y = x[0] - x[1]
        elif op == "mul":
            y = x[0] * x[1]
        elif op == "div":
            y = x[0] / x[1]
        else:
            y = np.sqrt(x[0])
        if fmt.name == "fp16":
            return y.astype(np.float16).view(np.uint16)
        if fmt.name == "bf16":
            return _bf16_from_float32(y)
        return round_float32(fmt, y, saturate)


def hardware_convert(src: Format, dst: Format, bits: np.ndarray, saturate: bool = False) -> np.ndarray:
    """RNE conversion by numpy (float32 -> float16, direct) or ml_dtypes (float32 -> bfloat16 and
    the formats of 8 bits or fewer, direct); narrower sources are first widened to float32,
    exactly. NaNs are quieted (into a format without NaN: +0)."""
    with np.errstate(all="ignore"):
        x = values(bits, src).astype(np.float32)
        if dst.name in SMALL_FORMATS:
            return round_float32(dst, x, saturate)
        if saturate:
            raise ValueError(f"no hardware conversion to {dst.name} with saturate")
        if dst.name == "fp32":
            out = x.view(np.uint32).copy()
        elif dst.name == "fp16":
            out = x.astype(np.float16).view(np.uint16)
        elif dst.name == "bf16":
            out = _bf16_from_float32(x)
        else:
            raise ValueError(f"no hardware conversion to {dst.name}")
    nan = np.flatnonzero(np.isnan(x))
    out[nan] |= out.dtype.type(dst.quiet_bit)  # numpy keeps signaling NaNs
    return out


# --- NaN bits and the dispatcher ------------------------------------------------------------------

def ieee_nan_bits(fmt: Format, operands: list[np.ndarray], src: Format | str | None = None) -> np.ndarray:
    """The "ieee" profile's NaN result for NaN-producing elements (docs/formats-spec.md): the first
    NaN operand quieted (payload kept; conversions keep the top payload bits), else the default NaN.
    In E4M3FN the NaN of the operand's sign; in the FNUZ formats 0x80; in FP6/FP4 the stand-in +0."""
    src = parse_format(src) if src is not None else None
    in_fmt = src or fmt
    shape = np.shape(operands[0])
    if not fmt.has_nan:
        return np.zeros(shape, dtype=fmt.dtype)
    result = np.full(shape, fmt.default_nan, dtype=np.int64)
    for b in reversed(operands):
        b = np.asarray(b).astype(np.int64)
        is_nan = in_fmt.is_nan(b)
        sign = np.where(b & in_fmt.sign_mask, fmt.sign_mask, 0)
        if fmt.encoding == "fn":
            nan = sign | fmt.default_nan          # one NaN per sign, no payload to keep
        elif fmt.encoding != "ieee":
            nan = np.full(b.shape, fmt.default_nan)   # FNUZ, E8M0: the one NaN
        elif src is not None:
            # the payload: the fraction field, aligned at the top of the destination's fraction
            # (FNUZ and E8M0 NaNs have none; an FNUZ NaN has its sign bit set)
            payload = (b & in_fmt.fraction_mask) >> in_fmt.storage_shift if in_fmt.encoding in ("ieee", "fn") else 0
            shift = in_fmt.fraction_bits - fmt.fraction_bits
            payload = payload >> shift if shift >= 0 else payload << -shift
            nan = sign | fmt.default_nan | (payload << fmt.storage_shift)
        else:
            nan = b | fmt.quiet_bit
        result = np.where(is_nan, nan, result)
    return result.astype(fmt.dtype)


def method_for(fmt: Format, op: str, mode: str, src: Format | str | None = None, method: str = "auto",
               saturate: bool = False) -> str:
    """"hardware" or "exact": what ``reference`` uses for this job. ``method="auto"`` picks the
    hardware path where it is proven (RNE + - * / sqrt and conversions; widening between IEEE
    formats in every mode), "hardware" insists on it (a ValueError where there is none).

    >>> import softfloat16 as sf
    >>> method_for(sf.fp16, "add", "rne"), method_for(sf.fp16, "add", "rtz"), method_for(sf.fp8_e4m3fn, "div", "rne")
    ('hardware', 'exact', 'hardware')
    """
    src_fmt = parse_format(src) if src is not None else fmt
    widening = op == "convert" and fmt.width > src_fmt.width and fmt.encoding == "ieee" \
        and src_fmt.encoding == "ieee"  # exact; other encodings' NaNs and overflow are mapped by exact_round
    hardware_ok = widening or (mode == "rne" and op != "fma" and not (saturate and fmt.name not in SMALL_FORMATS))
    if method == "hardware" and not hardware_ok:
        raise ValueError(f"no hardware reference for {fmt.name} {op} {mode}")
    return "hardware" if hardware_ok and method != "exact" else "exact"


def stochastic_round(fmt: Format, op: str, bits: list[np.ndarray], words: np.ndarray, sr_bits: int = 32,
                     src: Format | str | None = None, saturate: bool = False,
                     strict_nan: bool = False) -> tuple[np.ndarray, int]:
    """Stochastic rounding (docs/formats-spec.md) with the random integer of each element given:
    ``words`` (uint32, one per element), of which the top ``sr_bits`` bits are r. Every element
    with finite operands and a nonzero exact result is rounded by ``softfloat16.exact`` (exact
    rationals; d + r >= 2^R rounds up); the rest (NaN, infinite operands, x/0, exact zeros: the
    same in every mode) by the sign loop. ``strict_nan``: NaN results as ``ieee_nan_bits``.
    Returns (bits, elements rounded with Fractions).

    >>> import numpy as np, softfloat16 as sf
    >>> # 1 + 2^-4 in fp8_e5m2 (ulp 1/4): d = 2^32 / 4, so r rounds up from 3 * 2^30 on
    >>> words = np.array([0, 0xBFFFFFFF, 0xC0000000], np.uint32)
    >>> out, _ = stochastic_round(sf.fp8_e5m2, "add", [np.full(3, 0x3C), np.full(3, 0x2C)], words)
    >>> [hex(b) for b in out]
    ['0x3c', '0x3c', '0x3d']
    """
    src_fmt = parse_format(src) if src is not None else fmt
    v = [values(np.asarray(b), src_fmt) for b in bits]
    out, _ = exact_round(fmt, op, "rtz", v, saturate)
    out = out.astype(np.int64)
    if op == "convert":
        out = _ieee_nans(fmt, op, bits, src_fmt, out)
    finite = np.logical_and.reduce([np.isfinite(x) for x in v])
    if op == "div":
        finite &= v[1] != 0
    if op == "sqrt":
        finite &= v[0] > 0
    r = np.asarray(words, dtype=np.uint32).astype(np.int64) >> (32 - sr_bits)
    rounded = 0
    for i in np.flatnonzero(finite):
        args = [float(x[i]) for x in v]
        options = dict(random=int(r[i]), sr_bits=sr_bits, saturate=saturate)
        if op == "sqrt":
            out[i] = round_sqrt(Fraction(args[0]), fmt, "sr", **options)[0]
        else:
            value = exact_fraction(op, args)
            if value == 0:
                continue  # an exact zero: its sign is the loop's (IEEE's rule)
            out[i] = round_fraction(value, fmt, "sr", **options)[0]
        rounded += 1
    if strict_nan:
        out = _ieee_nans(fmt, op, bits, src_fmt, out)
    return out.astype(fmt.dtype), rounded


def nan_results(op: str, v: list[np.ndarray]) -> np.ndarray:
    """Where the exact result is a NaN (a NaN operand, or an invalid operation: inf - inf, 0 * inf,
    0/0, inf/inf, sqrt(x < 0)): float64 arithmetic decides these exactly. An overflow to E4M3FN's
    or the FNUZ formats' NaN is not among them."""
    with np.errstate(all="ignore"):
        x0, x1, x2 = (list(v) + [v[0], v[0]])[:3]
        y = {"add": lambda: x0 + x1, "sub": lambda: x0 - x1, "mul": lambda: x0 * x1, "div": lambda: x0 / x1,
             "fma": lambda: x0 * x1 + x2, "sqrt": lambda: np.sqrt(x0), "convert": lambda: x0}[op]()
    return np.isnan(y)


def _ieee_nans(fmt: Format, op: str, bits: list[np.ndarray], src_fmt: Format, out: np.ndarray) -> np.ndarray:
    """``out`` with the "ieee" profile's NaN (``ieee_nan_bits``) wherever the exact result is a NaN."""
    nan = np.flatnonzero(nan_results(op, [values(b, src_fmt) for b in bits]))
    out = np.asarray(out).copy()
    out[nan] = ieee_nan_bits(fmt, [np.asarray(b)[nan] for b in bits], src_fmt if op == "convert" else None)
    return out


#: Sources and destinations of ``convert``.
CONVERT_FORMATS = ("fp16", "bf16", "fp32") + SMALL_FORMATS


def reference(fmt: Format | str, op: str, mode: str, bits: list[np.ndarray],
              src: Format | str | None = None, method: str = "auto", saturate: bool = False,
              strict_nan: bool = False) -> tuple[np.ndarray, int]:
    """Correctly rounded results of ``op`` on bit-pattern arrays (default options, or
    ``saturate``). NaN results are some quiet NaN (compare them by class), or with
    ``strict_nan`` the "ieee" profile's (``ieee_nan_bits``); in FP6/FP4 the stand-in +0.
    ``method``: "auto" (hardware for RNE where proven, else exact), "hardware" or "exact".
    Returns (bits, number of elements settled by the Fraction fallback).

    >>> import numpy as np, softfloat16 as sf
    >>> r, _ = reference(sf.fp16, "add", "rtz", [np.array([0x3C00]), np.array([0x0001])])
    >>> hex(int(r[0]))
    '0x3c00'
    >>> [hex(reference(sf.fp8_e4m3fn, "mul", "rne", [np.array([0x7E]), np.array([0x40])], saturate=s)[0][0])
    ...  for s in (False, True)]     # 448 * 2: the NaN, or saturated to 448
    ['0x7f', '0x7e']
    """
    fmt = parse_format(fmt)
    if mode not in MODES:
        raise ValueError(f"rounding: unknown mode {mode!r}; accepted: {', '.join(MODES)}")
    if op not in OPS:
        raise ValueError(f"op: unknown op {op!r}; accepted: {', '.join(OPS)}")
    src_fmt = parse_format(src) if src is not None else fmt
    bits = [np.asarray(b) for b in bits]
    settled = 0
    if method_for(fmt, op, mode, src_fmt, method, saturate) == "hardware":
        if op == "convert":
            out = hardware_convert(src_fmt, fmt, bits[0], saturate)
        else:
            out = hardware_rne(fmt, op, bits, saturate)
    elif op == "convert" and fmt.name == "fp32":  # widening into fp32: exact, whatever the mode
        out = hardware_convert(src_fmt, fmt, bits[0])
    else:
        out, settled = exact_round(fmt, op, mode, [values(b, src_fmt) for b in bits], saturate)
    if op == "convert" or strict_nan:  # a converted NaN is the source's, not the default NaN
        out = _ieee_nans(fmt, op, bits, src_fmt, out)
    return out.astype(fmt.dtype), settled
