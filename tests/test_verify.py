"""softfloat16.verify and its reference: the reference against a rounding oracle written here
(bisection in a sorted table of every value, with Fraction arithmetic), the verifier on slices of
the exhaustive runs, and its ability to find an error injected into the core."""
import bisect
import functools
import io
import json
import math
import re
import shlex
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

import softfloat16 as sf
from softfloat16 import _verify_hardware as hardware
from softfloat16 import _verify_reference as reference
from softfloat16 import _verify_tables as tables
from softfloat16 import exact
from softfloat16 import verify as verify_module
from softfloat16.verify import Job, check_chunk, format_summary, verify
from softfloat16.verify_checkpoint import job_key
from softfloat16.verify_progress import Progress
from softfloat16.verify_table import checkpoint_name, sampled, select, table_rows

MODES = ("rne", "rna", "rtz", "rup", "rdn", "rod")


# --- an independent oracle -----------------------------------------------------------------------

def decode(b: int, fmt):
    """Fraction value, or 'inf' / '-inf' / 'nan' (IEEE 754 field definitions)."""
    e = (b >> fmt.fraction_bits) & ((1 << fmt.exponent_bits) - 1)
    f = b & ((1 << fmt.fraction_bits) - 1)
    negative = bool(b >> (fmt.width - 1))
    if e == (1 << fmt.exponent_bits) - 1:
        return "nan" if f else ("-inf" if negative else "inf")
    v = (Fraction(f, 1 << fmt.fraction_bits) + (1 if e else 0)) * Fraction(2) ** (max(e, 1) - fmt.bias)
    return -v if negative else v


@functools.cache
def table(fmt):
    """Every finite value in increasing order, with its bit pattern (+0 stands for both zeros)."""
    pairs = {}
    for b in range(1 << fmt.width):
        v = decode(b, fmt)
        if isinstance(v, Fraction) and not (v == 0 and b):
            pairs[v] = b
    values = sorted(pairs)
    return values, [pairs[v] for v in values]


def round_oracle(x: Fraction, fmt, mode: str, zero_negative: bool) -> int:
    values, patterns = table(fmt)
    sign = fmt.sign_mask if x < 0 else 0
    if x == 0:
        return fmt.sign_mask if zero_negative else 0
    i = bisect.bisect_left(values, x)
    if i < len(values) and values[i] == x:
        return patterns[i]
    inf = fmt.inf | sign
    if i == 0 or i == len(values):  # beyond +-max finite: max finite or inf
        biggest = patterns[0] if i == 0 else patterns[-1]
        ulp = values[-1] - values[-2]
        beyond_half = abs(x) >= values[-1] + ulp / 2
        up = x > 0
        choice = {"rne": beyond_half, "rna": beyond_half, "rtz": False, "rod": False,
                  "rup": up, "rdn": not up}[mode]
        return inf if choice else biggest
    lo, hi = values[i - 1], values[i]
    lo_bits, hi_bits = patterns[i - 1], patterns[i]
    toward_zero, away = (lo_bits, hi_bits) if x > 0 else (hi_bits, lo_bits)
    below, above = x - lo, hi - x
    if mode in ("rne", "rna"):
        if below != above:
            result = lo_bits if below < above else hi_bits
        elif mode == "rna":
            result = away
        else:
            result = lo_bits if lo_bits % 2 == 0 else hi_bits
    else:
        result = {"rtz": toward_zero, "rup": hi_bits, "rdn": lo_bits,
                  "rod": lo_bits if lo_bits % 2 else hi_bits}[mode]
    if result == 0 or result == fmt.sign_mask:  # a tiny x rounded to zero keeps its sign
        return sign
    return result


def oracle(fmt, op: str, mode: str, operands: list[int]):
    """Expected bits, or 'nan' for any NaN result."""
    v = [decode(b, fmt) for b in operands]
    if "nan" in v:
        return "nan"
    inf = {"inf": math.inf, "-inf": -math.inf}
    if any(isinstance(x, str) for x in v):
        x = [inf.get(t, t) if isinstance(t, str) else float(t) for t in v]
        x = [math.copysign(0.0, -1) if t == 0 and b >> (fmt.width - 1) else t for t, b in zip(x, operands)]
        with np.errstate(all="ignore"):  # IEEE special cases are exact in any float format
            y = {"add": lambda: x[0] + x[1], "sub": lambda: x[0] - x[1], "mul": lambda: np.float64(x[0]) * x[1],
                 "div": lambda: np.float64(x[0]) / x[1], "sqrt": lambda: np.sqrt(np.float64(x[0])),
                 "fma": lambda: np.float64(x[0]) * x[1] + x[2]}[op]()
        if np.isnan(y):
            return "nan"
        return (fmt.sign_mask if np.signbit(y) else 0) | (fmt.inf if np.isinf(y) else 0)
    negative = [bool(b >> (fmt.width - 1)) for b in operands]
    if op == "sqrt":
        if v[0] < 0:
            return "nan"
        if v[0] == 0:
            return operands[0]
        return exact.round_sqrt(v[0], fmt, mode)[0]  # irrational: see test_round_sqrt below
    if op == "div" and v[1] == 0:
        return "nan" if v[0] == 0 else (fmt.sign_mask if negative[0] != negative[1] else 0) | fmt.inf
    if op in ("add", "sub", "fma"):
        terms = [v[0], v[1] if op == "add" else -v[1]] if op != "fma" else [v[0] * v[1], v[2]]
        term_negative = ([negative[0], negative[1] != (op == "sub")] if op != "fma"
                         else [negative[0] != negative[1], negative[2]])
        x = terms[0] + terms[1]
        if terms[0] == 0 and terms[1] == 0 and term_negative[0] == term_negative[1]:
            zero_negative = term_negative[0]
        else:
            zero_negative = mode == "rdn"
    else:
        x = v[0] * v[1] if op == "mul" else v[0] / v[1]
        zero_negative = negative[0] != negative[1]
    return round_oracle(x, fmt, mode, zero_negative)


def edge_operands(fmt, n: int, arity: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    edges = np.array([0, 1, 2, fmt.min_normal - 1, fmt.min_normal, fmt.min_normal + 1, fmt.max_finite,
                      fmt.max_finite - 1, fmt.inf, fmt.inf | 1, fmt.inf | (1 << (fmt.fraction_bits - 1)),
                      (fmt.bias << fmt.fraction_bits), (fmt.bias << fmt.fraction_bits) | 1])
    out = []
    for _ in range(arity):
        x = rng.integers(0, 1 << fmt.width, n)
        pick = rng.random(n) < 0.3
        x[pick] = edges[rng.integers(0, edges.size, pick.sum())] | (rng.integers(0, 2, pick.sum()) << (fmt.width - 1))
        out.append(x)
    if arity >= 2:  # close exponents: cancellation, ties and carries
        close = rng.random(n) < 0.4
        out[1][close] = out[0][close] ^ rng.integers(0, 1 << 9, close.sum())
    return [x.astype(fmt.dtype) for x in out]


ARITY = {"add": 2, "sub": 2, "mul": 2, "div": 2, "sqrt": 1, "fma": 3}


@pytest.mark.parametrize("fmt", [sf.fp16, sf.bf16], ids=lambda f: f.name)
@pytest.mark.parametrize("op", list(ARITY))
def test_reference_matches_the_oracle(fmt, op):
    operands = edge_operands(fmt, 80, ARITY[op], seed=sum(map(ord, op)))
    for mode in MODES:
        methods = ("auto", "exact") if mode == "rne" and op != "fma" else ("auto",)
        for method in methods:
            got, settled = reference.reference(fmt, op, mode, operands, method=method)
            for i in range(got.size):
                case = [int(x[i]) for x in operands]
                want = oracle(fmt, op, mode, case)
                g = int(got[i])
                if want == "nan":
                    assert (g & (fmt.sign_mask - 1)) > fmt.inf, (op, mode, method, [hex(c) for c in case], hex(g))
                else:
                    assert g == want, (op, mode, method, [hex(c) for c in case], hex(g), hex(want))


def test_round_sqrt_brackets_the_root():
    # sqrt's rounding is checked by squaring: the result r and its neighbour bracket sqrt(v)
    rng = np.random.default_rng(3)
    for b in rng.integers(1, 0x7C00, 300):
        v = decode(int(b), sf.fp16)
        for mode in MODES:
            r = decode(exact.round_sqrt(v, sf.fp16, mode)[0], sf.fp16)
            up, down = decode(exact.round_sqrt(v, sf.fp16, "rup")[0], sf.fp16), decode(
                exact.round_sqrt(v, sf.fp16, "rdn")[0], sf.fp16)
            assert down * down <= v <= up * up and r in (up, down)
            assert (up == down) == (r * r == v)


def test_round_fraction_agrees_with_the_oracle():
    rng = np.random.default_rng(4)
    for fmt in (sf.fp16, sf.bf16):
        for _ in range(300):
            x = Fraction(int(rng.integers(-2**40, 2**40)), 2 ** int(rng.integers(0, 160)))
            for mode in MODES:
                assert exact.round_fraction(x, fmt, mode)[0] == round_oracle(x, fmt, mode, False)


def test_ml_dtypes_float64_to_bfloat16_by_version():
    """ml_dtypes before 0.7 converts float64 -> bfloat16 through float32 (two roundings); 0.7 and later
    round once. Each version's behaviour is asserted, and the reference's flag must name it."""
    import ml_dtypes
    x = 1 + 2.0**-8 + 2.0**-40  # just above the midpoint between 1 and 1 + 2^-7
    assert exact.round_fraction(Fraction(x), sf.bf16, "rne")[0] == 0x3F81
    got = int(np.array([x]).astype(ml_dtypes.bfloat16).view(np.uint16)[0])
    assert got == (0x3F81 if hardware.ml_dtypes_rounds_correctly() else 0x3F80)  # before 0.7: two roundings


def test_bf16_products_are_rounded_once_both_ways():
    """The reference's two ways of rounding an exact float64 product to BF16 (ml_dtypes' float64
    conversion; float32 then rint of the count of 2^-133) agree on every product of two significands
    scaled across the subnormal range, under every ml_dtypes version: a product has at most 16
    significant bits, so float32 rounds only products below 2^-134, which round to zero either way.
    Both are held to the Fraction oracle on a sample and on each tie."""
    significands = sf.bf16.to_float(np.arange(0x3F80, 0x4000, dtype=np.uint16))
    grid = np.multiply.outer(significands, significands).ravel()
    products = np.concatenate([grid * 2.0**shift for shift in range(-137, -124)])
    products = np.concatenate([products, -products])
    by_ml_dtypes = hardware.bf16_products(products, by_ml_dtypes=True)
    by_rint = hardware.bf16_products(products, by_ml_dtypes=False)
    assert np.array_equal(by_ml_dtypes, by_rint)
    assert np.array_equal(hardware.bf16_products(products), by_rint)
    rng = np.random.default_rng(11)
    ties = np.flatnonzero(np.abs(products) * 2.0**134 % 2 == 1)  # odd multiples of half the smallest step
    assert ties.size > 10
    for i in np.concatenate([rng.choice(products.size, 2000, replace=False), ties]):
        x = Fraction(float(products[i]))
        assert int(by_rint[i]) == round_oracle(x, sf.bf16, "rne", x < 0), (float(products[i]), hex(by_rint[i]))


# --- the verifier on slices of the exhaustive rows ---------------------------------------------

@pytest.mark.parametrize("fmt, op, mode", [("fp16", "add", "rne"), ("fp16", "add", "rtz"), ("bf16", "mul", "rup")])
def test_verify_sample_has_no_mismatch(fmt, op, mode):
    s = verify(fmt, op, mode, sample=200_000, workers=1)
    assert (s.cases, s.mismatches, s.complete) == (200_000, 0, True)


@pytest.mark.parametrize("fmt, op, mode, source", [
    ("fp16", "sqrt", "rod", None), ("bf16", "sqrt", "rdn", None), ("fp32", "convert", "rne", "bf16"),
    ("fp16", "convert", "rtz", "bf16"), ("bf16", "convert", "rna", "fp16"),
])
def test_verify_exhaustive_unary(fmt, op, mode, source):
    s = verify(fmt, op, mode, exhaustive=True, workers=1, source=source, strict_nan=True)
    assert (s.cases, s.mismatches) == (65536, 0)


def test_verify_fp32_conversion_and_fma_samples():
    assert verify("fp16", "convert", "rup", sample=100_000, workers=1).mismatches == 0
    assert verify("bf16", "convert", "rod", sample=100_000, workers=1, source="fp32").mismatches == 0
    assert verify("fp16", "fma", "rne", sample=100_000, workers=1).mismatches == 0
    assert verify("bf16", "fma", "rtz", sample=100_000, workers=1).mismatches == 0


def test_exhaustive_chunk_layout():
    job = Job("fp16", "add", "rne", exhaustive=True)
    assert (job.cases, job.chunks) == (1 << 32, 1 << 10)
    a, b = verify_module._operands(job, 240, 240 << 22, 4)
    assert a.tolist() == [0x3C00] * 4 and b.tolist() == [0, 1, 2, 3]
    fma = Job("bf16", "fma", "rtz", exhaustive=True, fma_c=(0x3F80, 0x0001))
    assert (fma.cases, fma.chunks) == (2 << 32, 2 << 10)
    a, b, c = verify_module._operands(fma, 1024 + 3, (1 << 32) + (3 << 22), 2)
    assert c.tolist() == [0x0001, 0x0001] and a.tolist() == [3 << 6, 3 << 6] and b.tolist() == [0, 1]
    assert Job("fp16", "convert", "rne", exhaustive=True).cases == 1 << 32  # from fp32


def test_job_validation():
    with pytest.raises(ValueError, match="op"):
        Job("fp16", "pow", "rne")
    with pytest.raises(ValueError, match="rounding"):
        Job("fp16", "add", "nearest-ish")
    with pytest.raises(ValueError, match="format"):
        Job("fp32", "add", "rne")
    with pytest.raises(ValueError, match="format"):
        Job("fp64", "add", "rne")


# --- the verifier finds errors -------------------------------------------------------------------

def _inject(monkeypatch, op: str, corrupt):
    """Replace Format.<op> by the real one followed by ``corrupt(operands, result)``."""
    original = getattr(sf.Format, op)

    def wrapped(self, *operands, **options):
        result = np.array(original(self, *operands, **options))
        corrupt([np.asarray(x) for x in operands], result)
        return result
    monkeypatch.setattr(sf.Format, op, wrapped)


def test_verify_reports_an_injected_bit_flip(monkeypatch):
    def flip_one(operands, result):
        a, b = operands
        result[(a == 0x3C00) & (b == 0x0001)] ^= 1  # 1 + 2^-24 -> 0x3c01 instead of 0x3c00
    _inject(monkeypatch, "add", flip_one)
    job = Job("fp16", "add", "rne", exhaustive=True)
    result = check_chunk(job, 0x3C00 >> 6)  # the chunk holding a = 0x3c00
    assert result.mismatches == 1
    assert result.examples == [{"case": (0x3C00 << 16) + 1, "operands": ["0x3c00", "0x0001"],
                                "core": "0x3c01", "reference": "0x3c00"}]


def test_verify_counts_every_injected_error(monkeypatch, capsys):
    flipped = []

    def flip_some(operands, result):
        a, b = operands
        hit = ((a ^ b) & 0xFF == 0) & ((result & 0x7FFF) <= 0x7C00)  # not NaN results
        flipped.append(int(hit.sum()))
        result[hit] ^= 1
    _inject(monkeypatch, "mul", flip_some)
    s = verify("bf16", "mul", "rtz", sample=50_000, workers=1)
    assert s.mismatches == sum(flipped) > 50
    assert len(s.examples) == 10
    for x in s.examples:
        assert int(x["core"], 16) ^ int(x["reference"], 16) == 1
        assert int(x["operands"][0], 16) & 0xFF == int(x["operands"][1], 16) & 0xFF
    from softfloat16.__main__ import main
    assert main(["verify", "--format", "bf16", "--op", "mul", "--rounding", "rtz", "--sample", "5000",
                 "--workers", "1"]) == 1
    out = capsys.readouterr().out
    assert "first mismatches" in out and "-> core 0x" in out


def test_strict_nan_sees_payloads(monkeypatch):
    def payload(operands, result):
        nan = (result & 0x7FFF) > 0x7C00
        result[nan] = 0x7E01  # a quiet NaN, but not the ieee profile's
    _inject(monkeypatch, "div", payload)
    assert verify("fp16", "div", "rne", sample=20_000, workers=1).mismatches == 0
    strict = verify("fp16", "div", "rne", sample=20_000, workers=1, strict_nan=True)
    assert strict.mismatches > 0 and all(x["core"] == "0x7e01" for x in strict.examples)


def test_checkpoint_resume_and_worker_independence(monkeypatch, tmp_path):
    monkeypatch.setattr(verify_module, "CHUNK", 1 << 14)
    monkeypatch.setattr(verify_module, "BLOCK", 1 << 12)

    def flip(operands, result):
        result[(operands[0] & 0x3FF) == 7] ^= 1
    _inject(monkeypatch, "sub", flip)
    full = verify("fp16", "sub", "rup", sample=1 << 16, workers=1)
    assert full.mismatches > 0 and full.job.chunks == 4

    checkpoint = tmp_path / "run.json"
    real_check = verify_module.check_chunk

    def interrupted(job, chunk):
        if chunk == 2:
            raise KeyboardInterrupt
        return real_check(job, chunk)
    monkeypatch.setattr(verify_module, "check_chunk", interrupted)
    with pytest.raises(KeyboardInterrupt):
        verify("fp16", "sub", "rup", sample=1 << 16, workers=1, checkpoint=str(checkpoint))
    state = json.loads(checkpoint.read_text())
    assert sorted(state["chunks"]) == ["0", "1"]
    monkeypatch.setattr(verify_module, "check_chunk", real_check)

    resumed = verify("fp16", "sub", "rup", sample=1 << 16, workers=1, checkpoint=str(checkpoint))
    assert resumed.chunks_resumed == 2 and resumed.complete
    assert (resumed.cases, resumed.mismatches, resumed.examples) == (full.cases, full.mismatches, full.examples)
    assert "chunks resumed from a checkpoint: 2" in format_summary(resumed)

    parallel = verify("fp16", "sub", "rup", sample=1 << 16, workers=2)
    assert (parallel.mismatches, parallel.examples) == (full.mismatches, full.examples)

    with pytest.raises(ValueError, match="different job"):
        verify("fp16", "sub", "rdn", sample=1 << 16, workers=1, checkpoint=str(checkpoint))


# --- progress --------------------------------------------------------------------------------------

class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_is_a_tqdm_bar_on_a_terminal_and_a_line_every_30_s_in_a_log():
    job = Job("fp16", "add", "rne", sample=1 << 20)
    terminal = _Terminal()
    bar = Progress(job, True, stream=terminal)
    bar.update(1 << 19, 3)
    bar.update(1 << 20, 5, final=True)
    text = terminal.getvalue()
    assert "\r" in text and text.endswith("\n") and "100.0%" in text and "5 mismatches" in text

    log = io.StringIO()
    bar = Progress(job, True, done=1 << 18, stream=log)
    bar.update(1 << 19, 0)                   # just started: too soon for a log line
    bar.last -= bar.log_interval             # as if 30 s had passed
    bar.update(3 << 18, 1)                   # a line
    bar.update(7 << 17, 1)                   # too soon again
    bar.update(1 << 20, 2, final=True)       # the last line always
    lines = log.getvalue().splitlines()
    assert len(lines) == 2 and "\r" not in log.getvalue()
    assert " 75.0%" in lines[0] and "1 mismatches" in lines[0]
    assert "100.0%" in lines[1] and "2 mismatches" in lines[1]

    silent = _Terminal()
    bar = Progress(job, False, stream=silent)
    bar.update(1 << 20, 0, final=True)
    assert silent.getvalue() == ""


# --- the formats of 8 bits or fewer, against an oracle written from the spec ---------------------
# Values come from ml_dtypes' decoding; the special results from docs/formats-spec.md, spelled out
# here: the overflow value by encoding and `saturate`, x/0 and inf where there is no inf, NaN results
# (+0 in FP6/FP4), no -0 in the FNUZ formats, round to odd toward zero on overflow.

SMALL = {"fp8_e5m2": ("float8_e5m2", "ieee"), "fp8_e4m3fn": ("float8_e4m3fn", "fn"),
         "fp8_e4m3fnuz": ("float8_e4m3fnuz", "fnuz"), "fp8_e5m2fnuz": ("float8_e5m2fnuz", "fnuz"),
         "fp6_e2m3": ("float6_e2m3fn", "finite"), "fp6_e3m2": ("float6_e3m2fn", "finite"),
         "fp4_e2m1": ("float4_e2m1fn", "finite")}


class SmallFormat:
    """What the oracle knows of a format: ml_dtypes' value of every pattern, and the spec's encoding."""

    def __init__(self, name: str):
        import ml_dtypes
        dtype_name, self.encoding = SMALL[name]
        self.dtype = np.dtype(getattr(ml_dtypes, dtype_name))
        self.width = {"float6": 6, "float4": 4}.get(dtype_name[:6], 8)
        self.sign = 1 << (self.width - 1)
        self.floats = np.arange(1 << self.width, dtype=np.uint8).view(self.dtype).astype(np.float64)
        pairs = {}
        for b, v in enumerate(self.floats):
            if np.isfinite(v) and not (v == 0 and b):  # +0 stands for both zeros
                pairs[Fraction(float(v))] = b
        self.values = sorted(pairs)
        self.patterns = [pairs[v] for v in self.values]
        self.max_bits = self.patterns[-1]
        top = self.values[-1] - self.values[-2]
        self.beyond = self.values[-1] + top  # rounding with an unbounded exponent: the next value up
        nans = [b for b, v in enumerate(self.floats) if np.isnan(v)]
        self.nan_of_sign = {s: next((b for b in nans if (b >= self.sign) == s), None) for s in (False, True)}
        infs = [b for b, v in enumerate(self.floats) if np.isinf(v)]
        self.inf = min(infs) if infs else None

    def decode(self, b: int):
        v = float(self.floats[b])
        if np.isnan(v):
            return "nan"
        if np.isinf(v):
            return "-inf" if v < 0 else "inf"
        return Fraction(v)

    def overflow_value(self, negative: bool, saturate: bool) -> int:
        sign = self.sign if negative else 0
        if saturate or self.encoding == "finite":
            return sign | self.max_bits
        if self.encoding == "ieee":
            return sign | self.inf
        if self.encoding == "fn":
            return self.nan_of_sign[negative]
        return self.nan_of_sign[True]  # fnuz: 0x80, its only NaN

    def zero(self, negative: bool) -> int:
        return self.sign if negative and self.encoding != "fnuz" else 0

    def round(self, x: Fraction, mode: str, zero_negative: bool, saturate: bool) -> int:
        negative = x < 0
        if x == 0:
            return self.zero(zero_negative)
        m = abs(x)
        lo_index = bisect.bisect_right(self.values, m) - 1   # values includes 0 and max finite
        lo = self.values[lo_index]
        if lo == m:
            return self.patterns[lo_index] | (self.sign if negative else 0) if m else self.zero(negative)
        if lo_index == len(self.values) - 1:   # beyond max finite
            hi, hi_bits, hi_odd = self.beyond, None, not (self.max_bits & 1)
        else:
            hi, hi_bits = self.values[lo_index + 1], self.patterns[lo_index + 1]
            hi_odd = bool(hi_bits & 1)
        lo_bits = self.patterns[lo_index]
        lo_odd = bool(lo_bits & 1)
        if m > hi:  # only beyond: at or past the next value up, every mode but toward zero overflows
            up = True
        elif mode in ("rne", "rna"):
            twice = 2 * m
            up = twice > lo + hi or (twice == lo + hi and (mode == "rna" or lo_odd))
        else:
            up = {"rtz": False, "rup": not negative, "rdn": negative, "rod": not lo_odd and hi_odd}[mode]
        toward_zero = mode in ("rtz", "rod") or (mode == "rup" and negative) or (mode == "rdn" and not negative)
        if up and hi_bits is None:
            if toward_zero:
                return self.max_bits | (self.sign if negative else 0)
            return self.overflow_value(negative, saturate)
        bits = hi_bits if up else lo_bits
        if bits == 0:
            return self.zero(negative)  # a tiny x rounded to zero keeps its sign (FNUZ: +0)
        return bits | (self.sign if negative else 0)

    def round_sqrt(self, v: Fraction, mode: str) -> int:
        """sqrt(v) for v > 0, by comparing squares with the values and their midpoints."""
        i = bisect.bisect_right([t * t for t in self.values], v) - 1
        lo, lo_bits = self.values[i], self.patterns[i]
        if lo * lo == v:
            return lo_bits
        hi, hi_bits = self.values[i + 1], self.patterns[i + 1]  # a root never exceeds max finite here
        if mode in ("rne", "rna"):
            mid = (lo + hi) / 2
            up = v > mid * mid or (v == mid * mid and (mode == "rna" or lo_bits & 1))
        else:
            up = {"rtz": False, "rup": True, "rdn": False, "rod": not lo_bits & 1}[mode]
        return hi_bits if up else lo_bits


@functools.cache
def small(name: str) -> SmallFormat:
    return SmallFormat(name)


def small_oracle(name: str, op: str, mode: str, operands: list[int], saturate: bool):
    """Expected bits, or 'nan' for a NaN result (in FP6/FP4, the stand-in +0)."""
    f = small(name)
    v = [f.decode(b) for b in operands]
    negative = [b >= f.sign for b in operands]
    nan = 0 if f.encoding == "finite" else "nan"
    if "nan" in v:
        return nan
    if any(isinstance(t, str) for t in v) or (op == "div" and v[1] == 0):
        # inf operands (E5M2) and x/0: IEEE's exact special results in float64
        x = [{"inf": math.inf, "-inf": -math.inf}.get(t) if isinstance(t, str) else float(t) for t in v]
        x = [math.copysign(0.0, -1) if t == 0 and neg else t for t, neg in zip(x, negative)]
        with np.errstate(all="ignore"):
            y = {"add": lambda: np.float64(x[0]) + x[1], "sub": lambda: np.float64(x[0]) - x[1],
                 "mul": lambda: np.float64(x[0]) * x[1], "div": lambda: np.float64(x[0]) / x[1],
                 "sqrt": lambda: np.sqrt(np.float64(x[0])), "fma": lambda: np.float64(x[0]) * x[1] + x[2]}[op]()
        if np.isnan(y):
            return nan
        if np.isinf(y):  # an infinite result: the overflow value, whatever the mode
            return f.overflow_value(bool(np.signbit(y)), saturate)
        return f.zero(bool(np.signbit(y)))
    if op == "sqrt":
        if v[0] < 0:
            return nan
        return f.zero(negative[0]) if v[0] == 0 else f.round_sqrt(v[0], mode)
    if op in ("add", "sub", "fma"):
        terms = [v[0], v[1] if op == "add" else -v[1]] if op != "fma" else [v[0] * v[1], v[2]]
        signs = ([negative[0], negative[1] != (op == "sub")] if op != "fma"
                 else [negative[0] != negative[1], negative[2]])
        x = terms[0] + terms[1]
        zero_negative = signs[0] if terms[0] == 0 and terms[1] == 0 and signs[0] == signs[1] else mode == "rdn"
    else:
        x = v[0] * v[1] if op == "mul" else v[0] / v[1]
        zero_negative = negative[0] != negative[1]
    return f.round(x, mode, zero_negative, saturate)


def small_operands(name: str, n: int, arity: int, seed: int) -> list[np.ndarray]:
    """Random patterns, a third of them edges: zeros, min subnormal/normal, max finite, specials."""
    f = small(name)
    rng = np.random.default_rng(seed)
    edges = sorted({0, 1, f.patterns[1], f.max_bits, f.max_bits - 1, f.sign - 1}
                   | {b for b in range(1 << f.width) if not np.isfinite(f.floats[b])})
    edges += [f.patterns[f.values.index(1)]]  # 1.0
    out = []
    for _ in range(arity):
        x = rng.integers(0, 1 << f.width, n)
        pick = rng.random(n) < 0.35
        x[pick] = np.array(edges)[rng.integers(0, len(edges), pick.sum())] ^ (rng.integers(0, 2, pick.sum()) * f.sign)
        out.append(x.astype(np.uint8))
    return out


def check_against_small_oracle(name, op, mode, saturate, operands, got, context):
    f = small(name)
    for i in range(got.size):
        case = [int(x[i]) for x in operands]
        want = small_oracle(name, op, mode, case, saturate)
        g = int(got[i])
        if want == "nan":
            assert np.isnan(f.floats[g]), (context, [hex(c) for c in case], hex(g))
        else:
            assert g == want, (context, [hex(c) for c in case], hex(g), hex(want))


@pytest.mark.parametrize("name", list(SMALL))
@pytest.mark.parametrize("op", list(ARITY))
def test_reference_matches_the_spec_oracle_in_the_small_formats(name, op):
    fmt = sf.format(name)
    if name == "fp4_e2m1" and op != "fma":  # every operand pair
        grid = np.indices((16,) * ARITY[op]).reshape(ARITY[op], -1)
        operands = [x.astype(np.uint8) for x in grid]
    else:
        operands = small_operands(name, 150, ARITY[op], seed=sum(map(ord, name + op)))
    for mode in MODES:
        for saturate in (False, True):
            methods = ("auto", "exact") if mode == "rne" and op != "fma" else ("auto",)
            for method in methods:
                got, _ = reference.reference(fmt, op, mode, operands, method=method, saturate=saturate)
                check_against_small_oracle(name, op, mode, saturate, operands, got, (op, mode, saturate, method))


@pytest.mark.parametrize("name", list(SMALL))
def test_conversions_into_the_small_formats_match_the_spec_oracle(name):
    fmt = sf.format(name)
    rng = np.random.default_rng(7)
    f16 = np.concatenate([rng.integers(0, 1 << 16, 300), [0x7C00, 0xFC00, 0x7E00, 0xFE00, 0x8000, 0x0001]])
    source = f16.astype(np.uint16)
    for mode in MODES:
        for saturate in (False, True):
            got, _ = reference.reference(fmt, "convert", mode, [source], src=sf.fp16, saturate=saturate)
            f = small(name)
            for b, g in zip(source.tolist(), got.tolist()):
                x = decode(b, sf.fp16)
                if x == "nan":
                    want = 0 if f.encoding == "finite" else "nan"
                elif isinstance(x, str):
                    want = f.overflow_value(x == "-inf", saturate)
                else:
                    want = f.round(x, mode, b >= 0x8000, saturate)
                if want == "nan":
                    assert np.isnan(f.floats[g]) and (f.encoding == "fnuz" or (g >= f.sign) == (b >= 0x8000))
                else:
                    assert g == want, (name, mode, saturate, hex(b), hex(g), hex(want))


@pytest.mark.parametrize("name", list(SMALL))
def test_hardware_and_exact_references_agree_on_every_pair(name):
    # two methods that share nothing: float32 + ml_dtypes' conversion, and exact signs
    fmt = sf.format(name)
    n = 1 << fmt.width
    a, b = (x.astype(np.uint8) for x in np.divmod(np.arange(n * n), n))
    for op in ("add", "sub", "mul", "div", "sqrt"):
        operands = [np.arange(n, dtype=np.uint8)] if op == "sqrt" else [a, b]
        for saturate in (False, True):
            hardware, _ = reference.reference(fmt, op, "rne", operands, method="hardware", saturate=saturate)
            exact_, settled = reference.reference(fmt, op, "rne", operands, method="exact", saturate=saturate)
            assert np.array_equal(hardware, exact_) and settled == 0, (op, saturate)


def test_the_small_grids_read_off_ml_dtypes():
    g = tables.grid(sf.fp8_e4m3fn)
    assert (g.top, g.bias, g.emin, g.emax) == (0x7F, 7, -6, 8) and g.line[-1] == 480 and g.line[-2] == 448
    g = tables.grid(sf.fp8_e4m3fnuz)
    assert (g.top, g.bias, g.emin, g.emax) == (0x80, 8, -7, 7) and g.line[-1] == 256
    g = tables.grid(sf.fp4_e2m1)
    assert (g.top, g.bias, g.line[-1]) == (8, 1, 8.0) and list(g.line[8:]) == [0, .5, 1, 1.5, 2, 3, 4, 6, 8]


@pytest.mark.parametrize("fmt, op, mode, saturate", [
    ("fp8_e4m3fn", "mul", "rod", False), ("fp8_e4m3fn", "add", "rne", True), ("fp8_e4m3fnuz", "div", "rup", False),
    ("fp8_e5m2fnuz", "sub", "rdn", True), ("fp6_e2m3", "div", "rtz", False), ("fp6_e3m2", "sqrt", "rna", True),
    ("fp4_e2m1", "fma", "rne", False), ("fp8_e5m2", "div", "rne", True),
])
def test_verify_exhaustive_small_formats(fmt, op, mode, saturate):
    s = verify(fmt, op, mode, exhaustive=True, workers=1, saturate=saturate, strict_nan=True)
    width = sf.format(fmt).width
    per_c = 1 << (width * (1 if op == "sqrt" else 2))
    assert s.mismatches == 0 and s.cases == per_c * max(1, len(s.job.fma_c))


def test_verify_finds_errors_injected_into_the_small_formats(monkeypatch):
    original = sf.Format.mul

    def ignores_saturate(self, *operands, **options):
        options.pop("saturate", None)
        return original(self, *operands, **options)
    monkeypatch.setattr(sf.Format, "mul", ignores_saturate)
    s = verify("fp8_e4m3fn", "mul", "rne", exhaustive=True, workers=1, saturate=True)
    assert s.mismatches > 0 and all(x["reference"] in ("0x7e", "0xfe") for x in s.examples)
    assert verify("fp8_e4m3fn", "mul", "rne", exhaustive=True, workers=1).mismatches == 0
    monkeypatch.setattr(sf.Format, "mul", original)

    def negative_zero(operands, result):  # an FNUZ "-0": the NaN
        a, b = operands
        result[(result == 0) & ((a ^ b) & 0x80 != 0) & (a != 0x80) & (b != 0x80)] = 0x80
    _inject(monkeypatch, "mul", negative_zero)
    s = verify("fp8_e5m2fnuz", "mul", "rtz", exhaustive=True, workers=1)
    assert s.mismatches > 0 and {x["core"] for x in s.examples} == {"0x80"}
    assert {x["reference"] for x in s.examples} == {"0x00"}


def test_verify_stochastic_rounding_with_explicit_random_words(monkeypatch):
    s = verify("fp8_e4m3fn", "add", "sr", exhaustive=True, workers=1, sr_bits=3, saturate=True)
    assert (s.cases, s.mismatches) == (65536, 0) and s.settled > 60000
    assert "sr (3-bit random integers) saturate" in format_summary(s) and "reference: fractions" in format_summary(s)
    assert verify("fp4_e2m1", "sqrt", "sr", exhaustive=True, workers=1, sr_bits=1).mismatches == 0
    assert verify("bf16", "div", "sr", sample=3000, workers=1).mismatches == 0

    original = sf.Format.add

    def other_words(self, *operands, **options):  # the core reads other random bits: caught
        options["random_bits"] = np.asarray(options["random_bits"]) ^ np.uint32(1 << 31)
        return original(self, *operands, **options)
    monkeypatch.setattr(sf.Format, "add", other_words)
    assert verify("fp8_e5m2", "add", "sr", exhaustive=True, workers=1, sr_bits=1).mismatches > 1000


def test_job_validation_of_the_new_options():
    with pytest.raises(ValueError, match="convert: supported between"):
        Job("e8m0", "convert", "rne", source="fp32")
    with pytest.raises(ValueError, match="format"):
        Job("e8m0", "add", "rne")
    with pytest.raises(ValueError, match="sr_bits"):
        Job("fp8_e4m3fn", "add", "sr", sr_bits=33)
    with pytest.raises(ValueError, match="no hardware reference"):
        Job("fp8_e4m3fn", "add", "sr", method="hardware")
    with pytest.raises(ValueError, match="never overflows"):
        Job("fp32", "convert", "rne", source="fp16", saturate=True)
    assert Job("fp8_e4m3fnuz", "fma", "rne", exhaustive=True).fma_c == (0, 0x01, 0x40, 0xC0, 0x7F, 0x08, 0x88)
    assert "0x80" not in Job("fp8_e5m2fnuz", "fma", "rne", exhaustive=True).title()
    # checkpoints written before saturate/sr_bits existed keep their key
    assert "saturate" not in job_key(Job("fp16", "add", "rne"))
    assert job_key(Job("fp16", "add", "sr", sr_bits=4))["sr_bits"] == 4


def test_stochastic_rounding_rows_do_not_depend_on_workers_or_chunking(monkeypatch):
    # each chunk draws its random words from the seed and its own case range
    monkeypatch.setattr(verify_module, "CHUNK", 1 << 12)
    monkeypatch.setattr(verify_module, "BLOCK", 1 << 10)

    def flip(operands, result):
        result[(operands[0] & 0x3FF) == 5] ^= 1
    _inject(monkeypatch, "mul", flip)
    one = verify("fp16", "mul", "sr", sample=1 << 14, workers=1, sr_bits=5)
    two = verify("fp16", "mul", "sr", sample=1 << 14, workers=2, sr_bits=5)
    assert one.job.chunks == 4 and one.mismatches > 0
    assert (one.mismatches, one.examples) == (two.mismatches, two.examples)
    words = [verify_module._random_words(one.job, c, c << 12, 4) for c in range(2)]
    assert not np.array_equal(words[0], words[1])
    assert np.array_equal(words[0], verify_module._random_words(one.job, 0, 0, 4))


# --- the table of docs/verification.md, as code (softfloat16/verify_table.py) --------------------

PAGE = (Path(__file__).resolve().parent.parent / "docs" / "verification.md").read_text(encoding="utf-8")


def _page_table(header: str) -> list[list[str]]:
    """The cells of each row of the page's table whose header line starts with ``header``."""
    lines = PAGE.splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith(header))
    rows = []
    for line in lines[first + 2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    assert rows, header
    return rows


def _number(text: str) -> int:
    return int(text.replace(",", ""))


def _section(name: str):
    return [row for row in table_rows() if row.section == name]


def test_the_16_bit_table_of_the_page_is_the_code_s():
    """Each row's command, parsed by the CLI, is the code's job; names, cases, order agree."""
    from softfloat16.__main__ import _job_options, _parser
    page = _page_table("| op | format | mode | cases |")
    code = _section("16-bit")
    assert [f"{op} {fmt} {mode}" for op, fmt, mode, *_ in page] == [row.name for row in code]
    parser = _parser()
    for cells, row in zip(page, code):
        cases, mismatches, command = cells[3], cells[4], cells[7]
        argv = shlex.split(command.strip("`"))
        assert argv[:4] == ["python", "-m", "softfloat16", "verify"], command
        assert Job(**_job_options(parser, parser.parse_args(argv[3:]))) == row.jobs[0], command
        assert (_number(cases), mismatches) == (row.jobs[0].cases, "0")
    assert f"<!-- {len(code)} rows run, 0 not yet run -->" in PAGE
    total = re.search(r"In total: (\d+) rows, ([\d,]+) cases", PAGE)
    assert (int(total[1]), _number(total[2])) == (len(code), sum(row.cases for row in code))


def test_the_small_format_tables_of_the_page_are_the_code_s():
    both = {(mode, s) for mode in MODES for s in (False, True)}
    page = _page_table("| op | format | cases (six modes, saturate off and on) |")
    code = _section("small")
    assert [f"{op} {fmt}" for op, fmt, *_ in page] == [row.name for row in code]
    for (_, _, cases, mismatches, again, *_), row in zip(page, code):
        auto = [job for job in row.jobs if job.method == "auto"]
        exact = [job for job in row.jobs if job.method == "exact"]
        assert {(job.rounding, job.saturate) for job in auto} == both and len(auto) == 12
        assert (_number(cases), mismatches) == (sum(job.cases for job in auto), "0")
        if again == "(no hardware path)":
            assert not exact and row.jobs[0].op == "fma"
        else:
            assert {(job.rounding, job.saturate) for job in exact} == {("rne", False), ("rne", True)}
            assert again == f"{sum(job.cases for job in exact):,} cases, 0 mismatches"
    total = re.search(r"In total: (\d+) arithmetic jobs \(.*?\), ([\d,]+) cases", PAGE, re.S)
    assert (int(total[1]), _number(total[2])) == (sum(len(r.jobs) for r in code), sum(r.cases for r in code))

    page = _page_table("| op | format | cases (R = 32 and 2, saturate off and on) |")
    code = _section("small sr")
    assert [f"{op} {fmt}" for op, fmt, *_ in page] == [row.name for row in code]
    for (_, _, cases, mismatches, *_), row in zip(page, code):
        assert {(job.rounding, job.sr_bits, job.saturate) for job in row.jobs} == {
            ("sr", r, s) for r in (32, 2) for s in (False, True)} and len(row.jobs) == 4
        assert (_number(cases), mismatches) == (row.cases, "0")
    total = re.search(r"(\d+) stochastic-rounding\s+jobs, ([\d,]+) cases", PAGE)
    assert (int(total[1]), _number(total[2])) == (sum(len(r.jobs) for r in code), sum(r.cases for r in code))

    page = _page_table("| conversion | jobs | cases |")
    code = _section("small convert")
    assert [text.split(", six modes")[0] for text, *_ in page] == [row.name for row in code]
    for (text, jobs, cases, mismatches, *_), row in zip(page, code):
        assert (int(jobs), _number(cases), mismatches) == (len(row.jobs), row.cases, "0")
        assert ("saturate off and on" in text) == any(job.saturate for job in row.jobs)
        pairs = {(job.source, job.format) for job in row.jobs}
        assert {(job.source, job.format, job.rounding) for job in row.jobs} == {p + (m,) for p in pairs for m in MODES}
        sources, destinations = {p[0] for p in pairs}, {p[1] for p in pairs}
        if "other six formats" in text:  # out of one format into every other one
            assert len(sources) == 1 and destinations == set(tables.CONVERT_FORMATS) - sources
        else:
            assert pairs == {tuple(row.name.split(" -> "))}
    total = re.search(r"(\d+) conversion jobs, ([\d,]+) cases", PAGE)
    assert (int(total[1]), _number(total[2])) == (sum(len(r.jobs) for r in code), sum(r.cases for r in code))


def test_table_jobs_are_distinct_and_select_matches_words():
    jobs = [job for row in table_rows() for job in row.jobs]
    assert len(set(jobs)) == len(jobs) == len({checkpoint_name(job) for job in jobs}) == 1350
    assert all(job.exhaustive for job in jobs)
    fp8 = select(table_rows(), ["fp8"])
    assert fp8 and all("fp8_" in job.title() for row in fp8 for job in row.jobs)
    only = select(table_rows(), ["fp8_e4m3fn", "add,rtz"])
    assert {job.format for row in only for job in row.jobs} == {"fp8_e4m3fn"}
    assert {(job.op, job.rounding) for row in only for job in row.jobs} == {("add", "rtz")}
    assert [len(row.jobs) for row in select(table_rows(), ["fp16,div,reference"])] == []
    assert [row.name for row in select(table_rows(), ["fp6_e2m3", "div", "exact"])] == ["div fp6_e2m3"]
    quick = sampled(select(table_rows(), ["fma", "fp16"]), 100, seed=3)
    assert {(job.exhaustive, job.sample, job.seed, job.fma_c) for row in quick for job in row.jobs} == {
        (False, 100, 3, ())}


def test_table_command_runs_a_filtered_sample_and_resumes_from_its_directory(tmp_path, capsys):
    from softfloat16.__main__ import main
    folder = tmp_path / "table"
    argv = ["verify", "--table", "--only", "fp4_e2m1,sqrt", "--sample", "300", "--workers", "1",
            "--checkpoint", str(folder)]
    assert main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "verify --table: 2 rows, 18 jobs"
    assert "  sqrt fp4_e2m1 (14 jobs): 4200 cases, 0 mismatches" in out
    assert "  sqrt fp4_e2m1 (4 jobs): 1200 cases, 0 mismatches" in out
    assert out[-2].startswith("total: 2 rows, 18 jobs, 5400 cases, 0 mismatches")
    assert len(list(folder.glob("*.json"))) == 18
    assert main(argv) == 0
    assert "chunks resumed from a checkpoint: 18" in capsys.readouterr().out
    one = json.loads((folder / "sqrt-fp4_e2m1-rne-reference-exact-sample300-seed0.json").read_text())
    assert one["job"]["method"] == "exact" and list(one["chunks"]) == ["0"]


@pytest.mark.parametrize("argv, message", [
    (["--table", "--format", "fp16"], "not allowed with --format"),
    (["--table", "--rounding", "rtz", "--saturate"], "not allowed with --rounding, --saturate"),
    (["--table", "--only", "fp12"], "no job of the table matches fp12"),
    (["--format", "fp16", "--op", "add", "--only", "fp16"], "--only: selects jobs of --table"),
    (["--op", "add"], "required: --format (or --table)"),
    (["--table", "--workers", "2", "--scheduler", "tcp://localhost:8786"], "not allowed with --scheduler"),
])
def test_table_usage_errors(argv, message, capsys):
    from softfloat16.__main__ import main
    with pytest.raises(SystemExit) as exit_:
        main(["verify", *argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_table_checkpoint_must_be_a_directory(tmp_path, capsys):
    from softfloat16.__main__ import main
    (tmp_path / "file.json").write_text("{}")
    with pytest.raises(SystemExit):
        main(["verify", "--table", "--only", "fp4_e2m1,sqrt,rtz", "--sample", "10", "--checkpoint",
              str(tmp_path / "file.json")])
    assert "is a file; --table keeps one file per job in a directory" in capsys.readouterr().err


@pytest.mark.parametrize("content, problem", [
    ('{"job": 1, chunks}', "not valid JSON: Expecting property name enclosed in double quotes at line 1 column 12"),
    ("[]", "not a JSON object with job, chunks and examples"),
    (b"\xff\xfe{}", "not UTF-8 text"),
])
def test_a_corrupt_checkpoint_is_one_line_naming_the_file(tmp_path, capsys, content, problem):
    from softfloat16.__main__ import main
    path = tmp_path / "run.json"
    path.write_bytes(content.encode() if isinstance(content, str) else content)
    with pytest.raises(SystemExit) as exit_:
        main(["verify", "--format", "fp16", "--op", "add", "--sample", "10", "--checkpoint", str(path)])
    error = capsys.readouterr().err.splitlines()[-1]
    assert exit_.value.code == 2
    assert error.startswith("python -m softfloat16") and error.split(": error: ", 1)[1] == (
        f"checkpoint: {path} is not a usable verify checkpoint ({problem}); "
        "delete it to start the job afresh, or give another file")
    assert path.read_bytes() == (content.encode() if isinstance(content, str) else content)   # left as it was


def test_a_checkpoint_of_the_wrong_shape_or_place_is_refused_by_name(tmp_path, capsys):
    from softfloat16.__main__ import main
    job = Job("fp16", "add", "rne", sample=10)
    malformed = tmp_path / "malformed.json"
    malformed.write_text(json.dumps({"job": job_key(job), "chunks": {"0": {"cases": "ten"}}, "examples": []}))
    with pytest.raises(ValueError, match=f"checkpoint: {malformed} is not a usable verify checkpoint "
                                         r"\(its chunks or examples are malformed\)"):
        verify("fp16", "add", "rne", sample=10, workers=1, checkpoint=str(malformed))
    folder = tmp_path / "folder.json"
    folder.mkdir()
    with pytest.raises(SystemExit):
        main(["verify", "--format", "fp16", "--op", "add", "--sample", "10", "--checkpoint", str(folder)])
    assert capsys.readouterr().err.splitlines()[-1].endswith(
        f"error: checkpoint: cannot read the verify checkpoint {folder}: Is a directory")


def test_a_corrupt_checkpoint_in_a_table_directory_is_named(tmp_path, capsys):
    from softfloat16.__main__ import main
    argv = ["verify", "--table", "--only", "fp4_e2m1,sqrt,rtz", "--sample", "10", "--checkpoint", str(tmp_path)]
    assert main(argv) == 0
    capsys.readouterr()
    victim = sorted(tmp_path.glob("*.json"))[0]
    victim.write_text("{")
    with pytest.raises(SystemExit):
        main(argv)
    error = capsys.readouterr().err.splitlines()[-1]
    assert f"checkpoint: {victim} is not a usable verify checkpoint (not valid JSON:" in error


def test_verify_jobs_runs_jobs_as_one_stream_with_results_per_job(monkeypatch):
    monkeypatch.setattr(verify_module, "CHUNK", 1 << 12)
    monkeypatch.setattr(verify_module, "BLOCK", 1 << 10)

    def flip(operands, result):
        result[(operands[0] & 0x3FF) == 9] ^= 1
    _inject(monkeypatch, "add", flip)
    jobs = [Job("fp16", "add", "rtz", sample=3 << 12), Job("fp16", "mul", "rne", sample=1 << 12),
            Job("fp16", "add", "rup", sample=5 << 11, seed=4)]
    one = verify_module.verify_jobs(jobs, workers=1)
    two = verify_module.verify_jobs(jobs, workers=2)
    alone = [verify(j.format, j.op, j.rounding, sample=j.sample, seed=j.seed, workers=1) for j in jobs]
    for a, b, c in zip(one, two, alone):
        assert (a.job, a.cases, a.mismatches, a.examples, a.chunks_done) == \
               (b.job, b.cases, b.mismatches, b.examples, b.chunks_done) == \
               (c.job, c.cases, c.mismatches, c.examples, c.chunks_done)
    assert one[0].mismatches > 0 and one[1].mismatches == 0 and one[2].mismatches > 0
    with pytest.raises(ValueError, match="not both"):
        verify("fp16", "add", sample=10, workers=2, scheduler="tcp://localhost:8786")
