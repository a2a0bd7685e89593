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
-> format conversion, (2) runs on their ordered line, and the special values of each format
(overflow value, NaN or its +0 stand-in, no -0 in FNUZ; ``saturate``) are written afterwards from
docs/formats-spec.md (``encode_specials``, ``round_float32``), from the format's properties. The
other formats of 8 bits or fewer with a zero (the IEEE P3109 formats; ``_verify_tables.covers``),
which ml_dtypes does not know, take ways (2) and (3) in every mode; an unsigned format's negative
results are its NaN. Stochastic rounding with given random words is rounded by (3)
(``stochastic_round``).

Way (1) lives in ``softfloat16._verify_hardware``; the tables all three ways read (the ops and
formats covered, the value of every pattern, each format's ordered line, the special results of
each format) in ``softfloat16._verify_tables``. This module holds (2), the NaN results and the
dispatcher, ``reference``.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import numpy as np
from numba import njit

from ._verify_hardware import hardware_convert, hardware_rne
from ._verify_hardware import ml_dtypes_rounds_correctly  # noqa: F401  (tests read it from here)
from ._verify_tables import (
    ARITHMETIC_FORMATS, CONVERT_FORMATS, OPS, SMALL_FORMATS, covers, grid, nan_result, overflow_value, values,
)
from .exact import round_fraction, round_sqrt
from .formats import Format, format as parse_format
from .rounding import ROUNDING_NAMES, Rounding

_OP_CODE = {op: i for i, op in enumerate(OPS)}
ADD, SUB, MUL, DIV, FMA, SQRT, CONVERT = range(7)
# The sign loop's mode codes: the library's (names and codes are labels; the rounding is this module's own).
RNE, RNA, RTZ, RUP, RDN, ROD = (int(mode) for mode in (Rounding.RNE, Rounding.RNA, Rounding.RTZ, Rounding.RUP,
                                                      Rounding.RDN, Rounding.ROD))


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


# --- the sign loop's output ----------------------------------------------------------------------

#: The "NaN" written by the sign loop, mapped to the format's NaN (or stand-in) afterwards.
_NAN = -1
#: The sign bit of the sign loop's output, far above every key: a format's own sign bit can be
#: the key one beyond max finite (0x80 in the FNUZ formats, 0x8 in FP4 E2M1).
_LOOP_SIGN = 1 << 40


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
            elif fbits == 0:  # ROD with one significant bit: every key but 0 is odd, so truncate (unless to 0)
                up = hi != 0 if lo < 0 else lo == 0
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
    docstring), NaN results as ``nan_result``, overflow as the format's ``overflow`` and
    ``saturate`` say; in an unsigned format a negative result (nonzero, or -inf) is the NaN.
    Returns (bits, elements settled by Fraction)."""
    if not covers(fmt):
        raise ValueError(f"format: the exact reference supports {', '.join(ARITHMETIC_FORMATS)} and the other "
                         f"formats of 8 bits or fewer with a zero (P3109 ...), not {fmt.name}")
    g = grid(fmt)
    v = [np.ascontiguousarray(x, dtype=np.float64) for x in v]
    v0, v1, v2 = (v + [v[0], v[0]])[:3]
    out = np.empty(v0.size, dtype=np.int64)
    undecided = np.zeros(v0.size, dtype=np.bool_)
    _exact_loop(_OP_CODE[op])(
        int(Rounding[mode.upper()]), v0, v1, v2, g.line, g.top, g.fraction_bits, g.bias, g.emin, g.emax,
        _LOOP_SIGN, _NAN, out, undecided)
    out = encode_specials(fmt, out, saturate)
    if not fmt.signed:
        out[_float64_result(op, [v0, v1, v2]) < 0] = nan_result(fmt)
    settle = np.flatnonzero(undecided)
    for i in settle:  # rare: settle with exact rationals
        args = [float(x[i]) for x in (v0, v1, v2)]
        if op == "sqrt":
            out[i] = round_sqrt(Fraction(args[0]), fmt, mode, saturate=saturate)[0]
        else:
            out[i] = round_fraction(exact_fraction(op, args), fmt, mode, saturate=saturate)[0]
    return out.astype(fmt.dtype), int(settle.size)



# --- NaN bits and the dispatcher ------------------------------------------------------------------

def ieee_nan_bits(fmt: Format, operands: list[np.ndarray], src: Format | str | None = None) -> np.ndarray:
    """The "ieee" profile's NaN result for NaN-producing elements (docs/formats-spec.md): the first
    NaN operand quieted (payload kept; conversions keep the top payload bits), else the default NaN.
    In the formats whose NaNs are all quiet (``quiet_nans``) the NaN of the operand's sign, without
    payload (E4M3FN 0x7f/0xff; FNUZ and signed P3109 0x80, E8M0 0xff); in FP6/FP4 the stand-in +0.
    Converted into a format with IEEE 754's NaNs, a NaN's payload is its fraction field (E4M3FN's
    0b111; none in the NaN at the code of -0)."""
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
        if fmt.quiet_nans:  # no payload: the NaN of the sign (the one NaN, where there is one)
            nan = np.where(sign != 0, fmt.nan_of(True), fmt.nan_of(False))
        elif src is not None:
            # the payload: the fraction field, aligned at the top of the destination's fraction
            # (a NaN at the code of -0 has none, and its sign bit set; E8M0 has no fraction)
            payload = (b & in_fmt.fraction_mask) >> in_fmt.storage_shift
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
    # the formats the hardware path knows (by ml_dtypes' dtypes; not the P3109 formats)
    known = fmt.name in CONVERT_FORMATS and src_fmt.name in CONVERT_FORMATS
    widening = op == "convert" and fmt.width > src_fmt.width and fmt.ieee_like \
        and src_fmt.ieee_like  # exact; other formats' NaNs and overflow are mapped by exact_round
    hardware_ok = known and (widening or (mode == "rne" and op != "fma"
                                          and not (saturate and fmt.name not in SMALL_FORMATS)))
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


def _float64_result(op: str, v: list[np.ndarray]) -> np.ndarray:
    """``op`` in float64 on the operand values: its NaNs and the signs of the others are those of
    the exact result (products of the operands of 8 bits or fewer are exact, and a nonzero exact
    sum never rounds to 0)."""
    with np.errstate(all="ignore"):
        x0, x1, x2 = (list(v) + [v[0], v[0]])[:3]
        return {"add": lambda: x0 + x1, "sub": lambda: x0 - x1, "mul": lambda: x0 * x1, "div": lambda: x0 / x1,
                "fma": lambda: x0 * x1 + x2, "sqrt": lambda: np.sqrt(x0), "convert": lambda: x0}[op]()


def nan_results(op: str, v: list[np.ndarray]) -> np.ndarray:
    """Where the exact result is a NaN (a NaN operand, or an invalid operation: inf - inf, 0 * inf,
    0/0, inf/inf, sqrt(x < 0)): float64 arithmetic decides these exactly. An overflow to E4M3FN's
    or the FNUZ formats' NaN, and a negative result in an unsigned format, are not among them."""
    return np.isnan(_float64_result(op, v))


def _ieee_nans(fmt: Format, op: str, bits: list[np.ndarray], src_fmt: Format, out: np.ndarray) -> np.ndarray:
    """``out`` with the "ieee" profile's NaN (``ieee_nan_bits``) wherever the exact result is a NaN."""
    nan = np.flatnonzero(nan_results(op, [values(b, src_fmt) for b in bits]))
    out = np.asarray(out).copy()
    out[nan] = ieee_nan_bits(fmt, [np.asarray(b)[nan] for b in bits], src_fmt if op == "convert" else None)
    return out




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
    if mode not in ROUNDING_NAMES:
        raise ValueError(f"rounding: unknown mode {mode!r}; accepted: {', '.join(ROUNDING_NAMES)}")
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
