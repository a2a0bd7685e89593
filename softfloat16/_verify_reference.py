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
   formed exactly in float64 and, below 2^-126, rounded as an integer count of 2^-133 by ``rint``.
   (ml_dtypes' float64 -> bfloat16 goes through float32 and double-rounds, so it is never used.)
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
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

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

@functools.cache
def value_table(fmt: Format) -> np.ndarray:
    """float64 value of every bit pattern of a 16-bit (or narrower) format, by hardware widening."""
    bits = np.arange(1 << fmt.width, dtype=np.uint32)
    with np.errstate(all="ignore"):
        if fmt.name == "fp16":
            return bits.astype(np.uint16).view(np.float16).astype(np.float64)
        if fmt.name == "bf16":  # a bf16 is the top half of an fp32
            return (bits << 16).view(np.float32).astype(np.float64)
    return np.array([float(fmt.value(int(b))) for b in bits])


def values(bits: np.ndarray, fmt: Format) -> np.ndarray:
    """Exact float64 values of bit patterns."""
    if fmt.width == 32:
        with np.errstate(all="ignore"):  # signaling NaNs may warn as they widen
            return np.asarray(bits, dtype=np.uint32).view(np.float32).astype(np.float64)
    return value_table(fmt)[bits]


@functools.cache
def line(fmt: Format) -> np.ndarray:
    """Values on the ordered line: ``line(fmt)[k + fmt.inf]`` is the value of key k (the signed
    magnitude of the bit pattern). The ends, keys +-inf, hold +-2^(emax+1): the value max finite
    would be followed by with one more exponent; rounding needs it as max finite's far neighbour."""
    magnitudes = value_table(fmt)[: fmt.inf + 1].copy()
    magnitudes[fmt.inf] = 2.0 ** (fmt.emax + 1)
    return np.concatenate([-magnitudes[:0:-1], magnitudes])


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
            negative = hi == 0  # a tiny x rounded to zero keeps its sign
        undecided[i] = not ok
        if key < 0 or (key == 0 and negative):
            out[i] = sign_mask | abs(key)
        else:
            out[i] = key


def exact_round(fmt: Format, op: str, mode: str, v: list[np.ndarray]) -> tuple[np.ndarray, int]:
    """Correctly rounded bits of ``op`` on float64 operand values (exact, see the module
    docstring), NaN results as the default NaN. Returns (bits, elements settled by Fraction)."""
    if fmt.name not in ("fp16", "bf16"):
        raise ValueError(f"format: the exact reference supports fp16 and bf16, not {fmt.name}")
    v = [np.ascontiguousarray(x, dtype=np.float64) for x in v]
    v0, v1, v2 = (v + [v[0], v[0]])[:3]
    out = np.empty(v0.size, dtype=np.int64)
    undecided = np.zeros(v0.size, dtype=np.bool_)
    _exact_loop(_OP_CODE[op])(
        MODES.index(mode), v0, v1, v2, line(fmt), fmt.inf, fmt.fraction_bits, fmt.bias, fmt.emin,
        fmt.emax, fmt.sign_mask, fmt.default_nan, out, undecided)
    settle = np.flatnonzero(undecided)
    for i in settle:  # rare: settle with exact rationals
        args = [float(x[i]) for x in (v0, v1, v2)]
        if op == "sqrt":
            out[i] = round_sqrt(Fraction(args[0]), fmt, mode)[0]
        else:
            out[i] = round_fraction(exact_fraction(op, args), fmt, mode)[0]
    return out.astype(fmt.dtype), int(settle.size)


# --- (1) hardware RNE --------------------------------------------------------------------------

def _bf16_from_float32(x: np.ndarray) -> np.ndarray:
    import ml_dtypes
    return x.astype(ml_dtypes.bfloat16).view(np.uint16)


@functools.cache
def _float32_table(fmt: Format) -> np.ndarray:
    return value_table(fmt).astype(np.float32)  # exact


def hardware_rne(fmt: Format, op: str, bits: list[np.ndarray]) -> np.ndarray:
    """RNE results of + - * / sqrt on FP16/BF16 bit patterns via host floats (NaNs: some qNaN)."""
    if fmt.name not in ("fp16", "bf16") or op not in BINARY + ("sqrt",):
        raise ValueError(f"no hardware RNE path for {fmt.name} {op}")
    with np.errstate(all="ignore"):
        if fmt.name == "bf16" and op == "mul":
            product = value_table(fmt)[bits[0]] * value_table(fmt)[bits[1]]  # exact in float64
            result = _bf16_from_float32(product.astype(np.float32))  # exact when >= 2^-126
            tiny = np.flatnonzero(np.abs(product) < 2.0**fmt.emin)
            # below 2^-126 every bf16 is a multiple of 2^-133: round that integer count once
            count = np.rint(np.abs(product[tiny]) * 2.0**-fmt.min_subnormal_exponent).astype(np.uint16)
            result[tiny] = count | np.where(np.signbit(product[tiny]), fmt.sign_mask, 0).astype(np.uint16)
            return result
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
        return _bf16_from_float32(y)


def hardware_convert(src: Format, dst: Format, bits: np.ndarray) -> np.ndarray:
    """RNE conversion by numpy (float32 -> float16, direct) or ml_dtypes (float32 -> bfloat16,
    direct); FP16 and BF16 sources are first widened to float32, exactly. NaNs are quieted."""
    with np.errstate(all="ignore"):
        x = values(bits, src).astype(np.float32)
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
    """The "ieee" profile's NaN result for NaN-producing elements: the first NaN operand quieted
    (payload kept; conversions keep the top payload bits), else the default NaN."""
    src = parse_format(src) if src is not None else None
    in_fmt = src or fmt
    result = np.full(np.shape(operands[0]), fmt.default_nan, dtype=np.int64)
    for b in reversed(operands):
        b = np.asarray(b).astype(np.int64)
        is_nan = in_fmt.is_nan(b)
        if src is not None:
            shift = src.fraction_bits - fmt.fraction_bits
            payload = b & src.fraction_mask
            payload = payload >> shift if shift >= 0 else payload << -shift
            nan = np.where(b & src.sign_mask, fmt.sign_mask, 0) | fmt.default_nan | payload
        else:
            nan = b | fmt.quiet_bit
        result = np.where(is_nan, nan, result)
    return result.astype(fmt.dtype)


def reference(fmt: Format | str, op: str, mode: str, bits: list[np.ndarray],
              src: Format | str | None = None, method: str = "auto") -> tuple[np.ndarray, int]:
    """Correctly rounded results of ``op`` on bit-pattern arrays (default options). NaN results
    are some quiet NaN (compare them by class, or use ``ieee_nan_bits``). ``method``: "auto"
    (hardware for RNE where proven, else exact), "hardware" or "exact". Returns (bits, number
    of elements settled by the Fraction fallback).

    >>> import numpy as np, softfloat16 as sf
    >>> r, _ = reference(sf.fp16, "add", "rtz", [np.array([0x3C00]), np.array([0x0001])])
    >>> hex(int(r[0]))
    '0x3c00'
    """
    fmt = parse_format(fmt)
    if mode not in MODES:
        raise ValueError(f"rounding: unknown mode {mode!r}; accepted: {', '.join(MODES)}")
    if op not in OPS:
        raise ValueError(f"op: unknown op {op!r}; accepted: {', '.join(OPS)}")
    src_fmt = parse_format(src) if src is not None else fmt
    bits = [np.asarray(b) for b in bits]
    widening = op == "convert" and fmt.width > src_fmt.width
    hardware_ok = widening or (mode == "rne" and op != "fma")
    if method == "hardware" and not hardware_ok:
        raise ValueError(f"no hardware reference for {fmt.name} {op} {mode}")
    if hardware_ok and method != "exact":
        if op == "convert":
            return hardware_convert(src_fmt, fmt, bits[0]), 0
        return hardware_rne(fmt, op, bits), 0
    out, settled = exact_round(fmt, op, mode, [values(b, src_fmt) for b in bits])
    if op == "convert":  # the default NaN is not the converted NaN; quiet the source's instead
        nan = np.flatnonzero(np.isnan(values(bits[0], src_fmt)))
        out[nan] = ieee_nan_bits(fmt, [bits[0][nan]], src_fmt)
    return out, settled
