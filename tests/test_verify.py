"""softfloat16.verify and its reference: the reference against a rounding oracle written here
(bisection in a sorted table of every value, with Fraction arithmetic), the verifier on slices of
the exhaustive runs, and its ability to find an error injected into the core."""
import bisect
import functools
import io
import json
import math
from fractions import Fraction

import numpy as np
import pytest

import softfloat16 as sf
from softfloat16 import _verify_reference as reference
from softfloat16 import exact
from softfloat16 import verify as verify_module
from softfloat16.verify import Job, check_chunk, format_summary, verify

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


def test_ml_dtypes_float64_to_bfloat16_double_rounds():
    # why the reference never converts float64 -> bfloat16 with ml_dtypes: it goes via float32
    import ml_dtypes
    x = 1 + 2.0**-8 + 2.0**-40  # just above the midpoint between 1 and 1 + 2^-7
    assert int(np.array([x]).astype(ml_dtypes.bfloat16).view(np.uint16)[0]) == 0x3F80  # wrong
    assert exact.round_fraction(Fraction(x), sf.bf16, "rne")[0] == 0x3F81


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
    bar = verify_module.Progress(job, True, stream=terminal)
    bar.update(1 << 19, 3)
    bar.update(1 << 20, 5, final=True)
    text = terminal.getvalue()
    assert "\r" in text and text.endswith("\n") and "100.0%" in text and "5 mismatches" in text

    log = io.StringIO()
    bar = verify_module.Progress(job, True, done=1 << 18, stream=log)
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
    bar = verify_module.Progress(job, False, stream=silent)
    bar.update(1 << 20, 0, final=True)
    assert silent.getvalue() == ""
