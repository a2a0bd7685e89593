"""Prove a refactored core gives the same bits as an old one: SHA-256 digests over every input.

    git worktree add /tmp/core-old 462a13a            # a checkout of the verified core
    python bench/compare_cores.py /tmp/core-old [--new ROOT] [--jobs 2] [--only SUBSTRING]
                                  [--blocks N] [--log FILE]

For each row (an operation, a format, a rounding mode and options; flags on) the old core runs in
one subprocess and the new core in another (``PYTHONPATH`` = each checkout's root, checked by the
worker), each computing the SHA-256 of (result bits, flags) over ALL inputs of the row in the
same order: for a 16-bit binary operation every ``a`` in blocks of 256, each against every ``b``
(2^32 pairs); for sqrt and conversions from a 16-bit format, all 2^16 inputs; for conversions
from fp32, all 2^32 inputs in blocks of 2^24. A row passes when the two digests are equal. Only
the public API is called, so any two versions of the package can be compared. ``--blocks N``
runs only the first N blocks of each 2^32 row (to estimate the cost); ``--log`` appends one JSON
line per finished row, and a rerun skips the rows already there.
Exit status: 0 when every row run was identical, 1 otherwise.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import glob
import hashlib
import json
import os
import subprocess
import sys
import time

MODES = ("rne", "rtz", "rup", "rdn", "rna", "rod")
BLOCK_ROWS = 256  # operand a values per block: 256 x 65,536 pairs, 48 MiB of results and flags
# Non-default options, for fp16 add, mul and div: between them every option and NaN profile.
OPTION_SETS = ({"ftz": True, "tininess": "before", "nan": "x86"}, {"daz": True, "nan": "riscv", "rounding": "rtz"},
               {"ftz": True, "daz": True, "nan": "cuda", "rounding": "rup"})


def rows() -> list[dict]:
    """Every row, in the order they run: sqrt and 16-bit conversions (seconds), the 48 binary
    rows, the option rows, then conversions from all 2^32 fp32 inputs."""
    table = [{"op": "sqrt", "fmt": fmt, "rounding": mode} for fmt in ("fp16", "bf16") for mode in MODES]
    table += [{"op": "convert", "src": src, "fmt": dst, "rounding": mode}
              for src, dst in (("fp16", "bf16"), ("bf16", "fp16"), ("fp16", "fp32"), ("bf16", "fp32"))
              for mode in MODES]
    table += [{"op": op, "fmt": fmt, "rounding": mode}
              for op in ("add", "sub", "mul", "div") for fmt in ("fp16", "bf16") for mode in MODES]
    for options in OPTION_SETS:
        table += [{"op": op, "fmt": "fp16", "rounding": "rne", **options} for op in ("add", "mul", "div")]
    table += [{"op": "convert", "src": "fp32", "fmt": dst, "rounding": mode}
              for dst in ("fp16", "bf16") for mode in MODES]
    return table


def row_name(row: dict) -> str:
    """A row as text, e.g. ``add fp16 rne`` or ``convert fp16->bf16 rtz``; options as key=value."""
    fmt = f"{row['src']}->{row['fmt']}" if "src" in row else row["fmt"]
    extra = " ".join(f"{k}={v}" for k, v in row.items() if k not in ("op", "fmt", "src", "rounding"))
    return " ".join(filter(None, (row["op"], fmt, row["rounding"], extra)))


def core_hash(root: str) -> str:
    """The first 12 hex digits of the SHA-256 of softfloat16/_kernels/*.py then softfloat16/ops.py,
    the `core` column of docs/verification.md."""
    digest = hashlib.sha256()
    paths = sorted(glob.glob(os.path.join(root, "softfloat16", "_kernels", "*.py")))
    for path in paths + [os.path.join(root, "softfloat16", "ops.py")]:
        with open(path, "rb") as f:
            digest.update(f.read())
    return digest.hexdigest()[:12]


def digest_row(row: dict, blocks: int | None = None) -> dict:
    """The worker's job, in the process whose softfloat16 is the core to digest."""
    import numpy as np

    import softfloat16 as sf

    options = {k: v for k, v in row.items() if k not in ("op", "fmt", "src")}
    fmt = sf.format(row["fmt"])
    digest = hashlib.sha256()
    start = time.perf_counter()
    every = np.arange(1 << 16, dtype=np.uint16)
    if row["op"] in ("add", "sub", "mul", "div"):
        op = getattr(fmt, row["op"])
        b = np.tile(every, BLOCK_ROWS)
        a = np.empty(b.size, np.uint16)
        count = 0
        for first in range(0, 1 << 16, BLOCK_ROWS)[:blocks]:
            a.reshape(BLOCK_ROWS, -1)[:] = every[first:first + BLOCK_ROWS, None]  # each a against every b
            bits, flags = op(a, b, flags=True, **options)
            digest.update(bits)
            digest.update(flags)
            count += a.size
    elif row.get("src") == "fp32":
        count = 0
        for first in range(0, 1 << 32, 1 << 24)[:blocks]:
            bits, flags = sf.convert(np.arange(first, first + (1 << 24), dtype=np.uint32), src=row["src"], dst=fmt,
                                     flags=True, **options)
            digest.update(bits)
            digest.update(flags)
            count += bits.size
    else:
        if row["op"] == "sqrt":
            bits, flags = fmt.sqrt(every, flags=True, **options)
        else:
            bits, flags = sf.convert(every, src=row["src"], dst=fmt, flags=True, **options)
        digest.update(bits)
        digest.update(flags)
        count = every.size
    return {"digest": digest.hexdigest(), "pairs": count, "seconds": round(time.perf_counter() - start, 1),
            "file": sf.__file__}


def run_worker(root: str, row: dict, blocks: int | None) -> dict:
    """digest_row in a fresh process importing softfloat16 from ``root``."""
    env = dict(os.environ, PYTHONPATH=root, NUMBA_NUM_THREADS="1")
    command = [sys.executable, os.path.abspath(__file__), "--worker", json.dumps(row)]
    if blocks is not None:
        command += ["--blocks", str(blocks)]
    done = subprocess.run(command, env=env, cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{row_name(row)} under {root} failed:\n{done.stderr[-3000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    expected = os.path.realpath(os.path.join(root, "softfloat16"))
    if not os.path.realpath(result["file"]).startswith(expected + os.sep):
        raise RuntimeError(f"the worker for {root} imported {result['file']}, not the package under {root}")
    return result


def compare(old: str, new: str, table: list[dict], jobs: int, blocks: int | None, log: str | None) -> bool:
    done = set()
    if log and os.path.exists(log):
        with open(log) as f:
            done = {json.loads(line)["row"] for line in f if line.strip()}
    todo = [row for row in table if row_name(row) not in done]
    print(f"old {old} (core {core_hash(old)}), new {new} (core {core_hash(new)}); "
          f"{len(todo)} rows to run, {len(table) - len(todo)} already in the log", flush=True)
    all_equal = True
    began = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        # Both sides of a row are submitted together, so a row finishes soon after it starts.
        futures = [(row, pool.submit(run_worker, old, row, blocks), pool.submit(run_worker, new, row, blocks))
                   for row in todo]
        for row, old_future, new_future in futures:
            a, b = old_future.result(), new_future.result()
            same = a["digest"] == b["digest"] and a["pairs"] == b["pairs"]
            all_equal &= same
            print(f"{'identical' if same else 'DIFFERENT'}  {row_name(row):45s} {a['pairs']:>13,} inputs  "
                  f"old {a['seconds']:6.1f} s  new {b['seconds']:6.1f} s  {a['digest'][:16]}"
                  f"{'' if same else ' vs ' + b['digest'][:16]}  [{time.perf_counter() - began:,.0f} s]", flush=True)
            if log:
                with open(log, "a") as f:
                    f.write(json.dumps({"row": row_name(row), "identical": same, "pairs": a["pairs"], "old": a,
                                        "new": b, "old_core": core_hash(old), "new_core": core_hash(new)}) + "\n")
    print(f"{'all identical' if all_equal else 'DIGESTS DIFFER'}: {len(todo)} rows, "
          f"{time.perf_counter() - began:,.0f} s of wall time", flush=True)
    return all_equal


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("old", nargs="?", help="root of the old checkout (holding softfloat16/)")
    parser.add_argument("--new", default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        help="root of the new checkout (default: this repository)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes at a time")
    parser.add_argument("--only", action="append", help="run the rows whose name contains this (repeatable)")
    parser.add_argument("--blocks", type=int, help="only the first N blocks of each 2^32 row")
    parser.add_argument("--log", help="append finished rows here (JSON lines); a rerun skips them")
    parser.add_argument("--list", action="store_true", help="print the rows and exit")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(digest_row(json.loads(args.worker), args.blocks)))
        return 0
    table = [row for row in rows() if not args.only or any(s in row_name(row) for s in args.only)]
    if args.list:
        print("\n".join(row_name(row) for row in table))
        return 0
    if not args.old:
        parser.error("the old checkout's root is required")
    return 0 if compare(os.path.abspath(args.old), os.path.abspath(args.new), table, args.jobs, args.blocks,
                        args.log) else 1


if __name__ == "__main__":
    sys.exit(main())
