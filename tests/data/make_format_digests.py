"""Digests of the core's results on today's formats: what `tests/test_format_digests.py` holds the
core to after a change to how formats are described.

Each entry is the SHA-256 of the result patterns and the flags of one operation in one set of
options over a fixed input set: every operand pair (or triple, sampled) of the formats of 8 bits or
fewer, every FP16 pattern for unary operations and conversions, and 2**18 random pairs of FP16 and
BF16 patterns. Run ``python tests/data/make_format_digests.py`` to rewrite
``tests/data/format_digests.json`` (only when a change of results is intended), and
``python tests/data/make_format_digests.py --check`` to compare every digest with it (the tests
compare a slice: every operation, the conversions into fp16 and fp32).
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np

import softfloat16 as sf

SMALL = ("fp8_e5m2", "fp8_e4m3fn", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "fp6_e2m3", "fp6_e3m2", "fp4_e2m1")
WIDE = ("fp16", "bf16")
MODES = ("rne", "rna", "rtz", "rup", "rdn", "rod", "sr")
# Options beyond the rounding mode, each applied with rne.
VARIANTS = {"saturate": {"saturate": True}, "ftz_daz": {"ftz": True, "daz": True},
            "before": {"tininess": "before"}, "x86": {"nan": "x86"}, "riscv": {"nan": "riscv"}}
OUT = Path(__file__).with_name("format_digests.json")


def _digest(result) -> str:
    bits, flags = result
    h = hashlib.sha256(np.ascontiguousarray(bits).tobytes())
    h.update(np.ascontiguousarray(flags).tobytes())
    return h.hexdigest()[:32]


def _options(mode: str) -> dict:
    return {"rounding": "sr", "seed": 12345} if mode == "sr" else {"rounding": mode}


def _settings():
    for mode in MODES:
        yield mode, _options(mode)
    for name, extra in VARIANTS.items():
        yield name, dict(extra)


def _pairs(fmt: sf.Format, wide: bool, rng: np.random.Generator):
    if not wide:
        n = 1 << fmt.width
        a, b = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
        return a.ravel().astype(fmt.dtype), b.ravel().astype(fmt.dtype)
    return (rng.integers(0, 1 << 16, 1 << 18, dtype=np.uint32).astype(np.uint16),
            rng.integers(0, 1 << 16, 1 << 18, dtype=np.uint32).astype(np.uint16))


ALL = SMALL + WIDE + ("e8m0",)


def digests(names: tuple[str, ...] = ALL, destinations: tuple[str, ...] | None = None) -> dict[str, str]:
    """The digests of the formats ``names`` (each format's operations, its conversions into the
    others and from fp16; e8m0's conversions both ways). ``destinations``: only the conversions
    into these formats (and from fp16), a slice of the whole for a quick check."""
    out: dict[str, str] = {}
    rng = np.random.default_rng(20261205)  # one stream: every format draws its operands, in order
    every16 = np.arange(1 << 16, dtype=np.uint16)
    for name in SMALL + WIDE:
        fmt = sf.format(name)
        a, b = _pairs(fmt, name in WIDE, rng)
        n3 = 1 << 16
        t = [rng.integers(0, 1 << fmt.width, n3, dtype=np.uint32).astype(fmt.dtype) for _ in range(3)]
        if name not in names:
            continue
        unary = np.arange(1 << fmt.width).astype(fmt.dtype)
        for setting, opts in _settings():
            for op in ("add", "sub", "mul", "div"):
                out[f"{name}.{op}.{setting}"] = _digest(getattr(fmt, op)(a, b, flags=True, **opts))
            out[f"{name}.fma.{setting}"] = _digest(fmt.fma(*t, flags=True, **opts))
            out[f"{name}.sqrt.{setting}"] = _digest(fmt.sqrt(unary, flags=True, **opts))
            for dst in SMALL + WIDE + ("fp32", "e8m0"):
                if dst != name and (destinations is None or dst in destinations):
                    out[f"{name}->{dst}.{setting}"] = _digest(sf.convert(unary, fmt, dst, flags=True, **opts))
            if name != "fp16":
                out[f"fp16->{name}.{setting}"] = _digest(sf.convert(every16, "fp16", fmt, flags=True, **opts))
        for op in ("eq", "lt", "le"):
            out[f"{name}.{op}"] = _digest(getattr(fmt, op)(a, b, flags=True))
    if "e8m0" in names:
        for setting, opts in _settings():
            e8 = np.arange(256, dtype=np.uint8)
            for dst in SMALL + WIDE + ("fp32",):
                if destinations is None or dst in destinations:
                    out[f"e8m0->{dst}.{setting}"] = _digest(sf.convert(e8, "e8m0", dst, flags=True, **opts))
            out[f"fp16->e8m0.{setting}"] = _digest(sf.convert(every16, "fp16", "e8m0", flags=True, **opts))
    return out


def check() -> int:
    """Compare every digest with the recorded ones: 0 when all are identical."""
    expected = json.loads(OUT.read_text())
    computed = digests()
    differ = sorted(k for k in expected if computed.get(k) != expected[k])
    print(f"{len(expected)} digests, {len(expected) - len(differ)} identical, {len(differ)} differ"
          + (f": {differ[:20]}" if differ else ""))
    return 1 if differ or set(computed) != set(expected) else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--check"]:
        sys.exit(check())
    table = digests()
    OUT.write_text(json.dumps(table, indent=0, sort_keys=True) + "\n")
    print(f"{len(table)} digests -> {OUT}", file=sys.stderr)
