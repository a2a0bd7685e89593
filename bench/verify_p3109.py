"""Every input of the IEEE P3109 formats against the verifier's reference, in one run.

    python bench/verify_p3109.py [--k 8] [--workers 2] [--only add,sub] [--no-sr] [--no-convert]

For each P3109 format of K bits (default 8: 30 formats, signed and unsigned, both domains) the
core's add, sub, mul, div (every operand pair), sqrt (every operand) and fma (every (a, b) pair for
each c of ``verify``'s default set) in the six modes, saturating and not; conversions from fp16
and bf16 (every input) into the format and from the format into fp16, bf16 and fp32, six modes and
saturating; and stochastic rounding (add, mul, div; 8 and 32 random bits) — each job exhaustive.
The reference rounds these formats by exact signs and Fractions (``softfloat16._verify_reference``),
decoding the patterns from the format's properties. Prints one line per (op, family of jobs) with
cases, mismatches and wall time, then the total; exit status 1 on any mismatch.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import defaultdict

from softfloat16.formats import p3109_formats
from softfloat16.verify import Job, verify_jobs

MODES = ("rne", "rtz", "rup", "rdn", "rna", "rod")


def jobs(k: int, ops: set[str] | None, sr: bool, convert: bool) -> list[tuple[str, Job]]:
    """(family, job) for every job of the run."""
    out = []
    for fmt in p3109_formats(k):
        for op in ("add", "sub", "mul", "div", "sqrt", "fma"):
            if ops and op not in ops:
                continue
            out += [(op, Job(fmt.name, op, mode, exhaustive=True, saturate=sat))
                    for mode in MODES for sat in (False, True)]
        if sr and (not ops or "sr" in ops):
            out += [("sr", Job(fmt.name, op, "sr", exhaustive=True, sr_bits=bits))
                    for op in ("add", "mul", "div") for bits in (8, 32)]
        if convert and (not ops or "convert" in ops):
            out += [("convert into", Job(fmt.name, "convert", mode, exhaustive=True, source=src, saturate=sat))
                    for src in ("fp16", "bf16") for mode in MODES for sat in (False, True)]
            out += [("convert out of", Job(dst, "convert", mode, exhaustive=True, source=fmt.name))
                    for dst in ("fp16", "bf16", "fp32") for mode in MODES]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--k", type=int, default=8, help="the formats' width, 3 to 8 (default 8)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", help="comma-separated: add, sub, mul, div, sqrt, fma, sr, convert")
    parser.add_argument("--no-sr", action="store_true")
    parser.add_argument("--no-convert", action="store_true")
    args = parser.parse_args(argv)
    ops = set(args.only.split(",")) if args.only else None
    todo = jobs(args.k, ops, not args.no_sr, not args.no_convert)
    began = time.perf_counter()
    summaries = verify_jobs([job for _, job in todo], workers=args.workers)
    took = time.perf_counter() - began
    totals = defaultdict(lambda: [0, 0, 0, 0])
    for (family, _), s in zip(todo, summaries):
        t = totals[family]
        t[0] += 1
        t[1] += s.cases
        t[2] += s.mismatches
        t[3] += s.settled
        for example in s.examples[:2]:
            print(f"  mismatch: {s.job.format} {s.job.op} {s.job.rounding} saturate={s.job.saturate}: {example}")
    print(f"P3109 formats of {args.k} bits: {len(p3109_formats(args.k))}; workers: {args.workers}")
    print(f"{'jobs':>16} {'count':>6} {'cases':>13} {'mismatches':>10} {'by Fraction':>11}")
    for family, (count, cases, bad, settled) in totals.items():
        print(f"{family:>16} {count:>6} {cases:>13,} {bad:>10,} {settled:>11,}")
    cases, bad = sum(t[1] for t in totals.values()), sum(t[2] for t in totals.values())
    print(f"{'total':>16} {len(todo):>6} {cases:>13,} {bad:>10,}   wall {took:.0f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
