"""The rows of docs/verification.md as jobs: ``python -m softfloat16 verify --table`` runs them.

Four sections, in the page's order (``tests/test_verify.py`` reads the page's tables and
compares them with this list, so the two cannot drift apart):

- ``16-bit``: the exhaustive table of FP16 and BF16, one job a row: + - * / in six modes (2^32
  pairs each), sqrt, the conversions (fp32 -> fp16/bf16 over all 2^32 inputs), fma for one c;
- ``small``: + - * / sqrt fma of each format of 8 bits or fewer, six modes, saturate off and on,
  and the RNE jobs of + - * / sqrt once more with ``method="exact"`` (a row: an op and a format);
- ``small sr``: stochastic rounding, R = 32 and 2, saturate off and on;
- ``small convert``: conversions into the small formats from fp16 and bf16, and out of each.

All of it is one stream of chunks (``verify.verify_jobs``), on local processes or a Dask cluster.

>>> rows = table_rows()
>>> len(rows), sum(len(row.jobs) for row in rows)
(188, 1350)
>>> [row.name for row in select(rows, ["fp4", "sqrt"])]
['sqrt fp4_e2m1', 'sqrt fp4_e2m1']
>>> result = run_table(sampled(select(rows, ["fp16", "sqrt", "rtz"]), 1000), workers=1)
>>> print(format_table(result).splitlines()[2])
  sqrt fp16 rtz: 1000 cases, 0 mismatches
"""
from __future__ import annotations

import dataclasses
import functools
import os
import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

from ._verify_tables import BINARY, CONVERT_FORMATS, SMALL_FORMATS
from .compare import to_hex
from .rounding import ROUNDING_NAMES
from .verify import Job, Summary, _workers_text, format_summary, verify_jobs

__all__ = ["Row", "SECTIONS", "TableSummary", "checkpoint_name", "format_table", "run_table", "sampled", "select",
           "table_rows"]

#: Section key -> the heading printed above its rows.
SECTIONS = {
    "16-bit": "fp16 and bf16, exhaustive (one job a row)",
    "small": "8 bits or fewer: six modes, saturate off and on, RNE again with the exact reference",
    "small sr": "8 bits or fewer: stochastic rounding, R = 32 and 2, saturate off and on",
    "small convert": "8 bits or fewer: conversions",
}
#: The 16-bit table's order of modes: the four of IEEE 754-1985 first (rne rtz rup rdn), then rna and rod.
_PAGE_MODES = tuple(sorted(ROUNDING_NAMES, key=lambda mode: mode in ("rna", "rod")))
_FMA_ROWS = (("fp16", 0x0001, "rne"), ("fp16", 0xBC00, "rtz"), ("bf16", 0x0080, "rne"), ("bf16", 0x3F80, "rup"))


@dataclass(frozen=True)
class Row:
    """One line of a table of docs/verification.md and the jobs behind it."""

    section: str
    name: str
    jobs: tuple[Job, ...]

    @property
    def cases(self) -> int:
        return sum(job.cases for job in self.jobs)


def _exhaustive(fmt: str, op: str, mode: str, **options) -> Job:
    return Job(fmt, op, mode, exhaustive=True, **options)


@functools.lru_cache(maxsize=1)
def table_rows() -> tuple[Row, ...]:
    """Every row of docs/verification.md's tables of exhaustive runs, in the page's order."""
    rows = []
    for fmt in ("fp16", "bf16"):
        rows += [Row("16-bit", f"{op} {fmt} {mode}", (_exhaustive(fmt, op, mode),))
                 for op in BINARY for mode in _PAGE_MODES]
    rows += [Row("16-bit", f"sqrt {fmt} {mode}", (_exhaustive(fmt, "sqrt", mode),))
             for fmt in ("fp16", "bf16") for mode in _PAGE_MODES]
    conversions = [(src, dst, mode) for src, dst in (("fp32", "fp16"), ("fp32", "bf16"), ("fp16", "bf16"),
                                                     ("bf16", "fp16")) for mode in _PAGE_MODES]
    conversions += [("fp16", "fp32", "rne"), ("bf16", "fp32", "rne")]
    rows += [Row("16-bit", f"convert {src}->{dst} {mode}", (_exhaustive(dst, "convert", mode, source=src),))
             for src, dst, mode in conversions]
    rows += [Row("16-bit", f"fma {fmt} (c = {to_hex(c, fmt)}, all a, b) {mode}",
                 (_exhaustive(fmt, "fma", mode, fma_c=(c,)),)) for fmt, c, mode in _FMA_ROWS]

    for op in BINARY + ("sqrt", "fma"):
        for fmt in SMALL_FORMATS:
            jobs = [_exhaustive(fmt, op, mode, saturate=s) for mode in ROUNDING_NAMES for s in (False, True)]
            if op != "fma":  # fma has no hardware path: "auto" is already the exact method
                jobs += [_exhaustive(fmt, op, "rne", saturate=s, method="exact") for s in (False, True)]
            rows.append(Row("small", f"{op} {fmt}", tuple(jobs)))

    for op in BINARY + ("sqrt",):
        for fmt in SMALL_FORMATS:
            rows.append(Row("small sr", f"{op} {fmt}", tuple(
                _exhaustive(fmt, op, "sr", sr_bits=r, saturate=s) for r in (32, 2) for s in (False, True))))

    for fmt in SMALL_FORMATS:
        for src in ("fp16", "bf16"):
            rows.append(Row("small convert", f"{src} -> {fmt}", tuple(
                _exhaustive(fmt, "convert", mode, source=src, saturate=s)
                for mode in ROUNDING_NAMES for s in (False, True))))
        rows.append(Row("small convert", f"{fmt} -> fp16, bf16, fp32 and the other six formats", tuple(
            _exhaustive(dst, "convert", mode, source=fmt)
            for dst in CONVERT_FORMATS if dst != fmt for mode in ROUNDING_NAMES)))
    return tuple(rows)


def describe(job: Job) -> str:
    """The text ``select`` searches: the job's title, plus the reference when it is not "auto"."""
    return job.title() + (f" reference {job.method}" if job.method != "auto" else "")


def select(rows: Iterable[Row], words: Iterable[str]) -> list[Row]:
    """The jobs that every word matches (a word may also be a comma-separated list of words), by
    row; rows left without a job are dropped. A word matches a word of the job's ``describe`` text
    (``add fp8_e4m3fn rtz saturate (exhaustive)``) or its start up to an underscore: ``fp8`` matches
    every FP8 format, ``fp8_e4m3fn`` only that one (not ``fp8_e4m3fnuz``).

    >>> [len(row.jobs) for row in select(table_rows(), ["fp8_e4m3fn,mul", "saturate"])]
    [7, 2]
    """
    wanted = [w.strip() for word in words for w in word.split(",") if w.strip()]

    def matches(job: Job) -> bool:
        found = re.findall(r"\w+", describe(job))
        return all(any(f == w or f.startswith(w + "_") for f in found) for w in wanted)

    kept = []
    for row in rows:
        jobs = tuple(job for job in row.jobs if matches(job))
        if jobs:
            kept.append(dataclasses.replace(row, jobs=jobs))
    return kept


def sampled(rows: Iterable[Row], sample: int, seed: int = 0) -> list[Row]:
    """The same rows with ``sample`` seeded random cases a job instead of every input: a quick run
    of the whole table (fma draws its c at random too)."""
    return [dataclasses.replace(row, jobs=tuple(dataclasses.replace(job, exhaustive=False, sample=sample, seed=seed)
                                                for job in row.jobs)) for row in rows]


def checkpoint_name(job: Job) -> str:
    """The file of ``job`` in a table's checkpoint directory: the same JSON as ``verify
    --checkpoint`` writes for that job alone, so either command resumes the other's.

    >>> checkpoint_name(Job("fp8_e5m2", "add", "sr", exhaustive=True, sr_bits=2, saturate=True))
    'add-fp8_e5m2-sr2-saturate-exhaustive.json'
    """
    parts = [job.op, f"{job.source}-{job.format}" if job.op == "convert" else job.format,
             job.rounding + (str(job.sr_bits) if job.rounding == "sr" else "")]
    parts += ["saturate"] * job.saturate + ["strict-nan"] * job.strict_nan
    parts += [f"reference-{job.method}"] * (job.method != "auto")
    parts += ["c" + "_".join(f"{c:x}" for c in job.fma_c)] * bool(job.fma_c)
    parts.append("exhaustive" if job.exhaustive else f"sample{job.sample}-seed{job.seed}")
    return "-".join(parts) + ".json"


@dataclass
class TableSummary:
    """The outcome of ``run_table``: each row with its jobs' summaries."""

    rows: list[tuple[Row, list[Summary]]]
    wall_seconds: float

    def summaries(self) -> list[Summary]:
        return [s for _, summaries in self.rows for s in summaries]

    @property
    def cases(self) -> int:
        return sum(s.cases for s in self.summaries())

    @property
    def mismatches(self) -> int:
        return sum(s.mismatches for s in self.summaries())


def run_table(rows: Iterable[Row], *, workers: int | None = None, scheduler=None, checkpoint: str | None = None,
              progress: bool = False) -> TableSummary:
    """Run ``rows`` (``table_rows()``, or a ``select``-ion of them) as one stream of chunks, on
    ``workers`` local processes or the Dask ``scheduler`` (see ``verify.verify``). ``checkpoint``:
    a directory (made if missing) holding one checkpoint file per job (``checkpoint_name``)."""
    rows = list(rows)
    jobs = [job for row in rows for job in row.jobs]
    paths = None
    if checkpoint:
        if os.path.exists(checkpoint) and not os.path.isdir(checkpoint):
            raise ValueError(f"checkpoint: {checkpoint} is a file; --table keeps one file per job in a directory")
        os.makedirs(checkpoint, exist_ok=True)
        paths = [os.path.join(checkpoint, checkpoint_name(job)) for job in jobs]
    began = time.perf_counter()
    summaries = iter(verify_jobs(jobs, workers=workers, scheduler=scheduler, checkpoints=paths, progress=progress))
    wall = time.perf_counter() - began
    return TableSummary([(row, [next(summaries) for _ in row.jobs]) for row in rows], wall)


def format_table(t: TableSummary) -> str:
    """A line per row (under its section's heading), the mismatches of any failing job, and a total."""
    summaries = t.summaries()
    jobs = len(summaries)
    lines = [f"verify --table: {len(t.rows)} rows, {jobs} job{'s' * (jobs != 1)}"]
    section = None
    for row, row_summaries in t.rows:
        if row.section != section:
            section = row.section
            lines.append(SECTIONS[section])
        count = f" ({len(row.jobs)} jobs)" if len(row.jobs) > 1 else ""
        done = sum(s.complete for s in row_summaries)
        incomplete = f", INCOMPLETE: {done} of {len(row.jobs)} jobs done" if done < len(row.jobs) else ""
        lines.append(f"  {row.name}{count}: {sum(s.cases for s in row_summaries)} cases, "
                     f"{sum(s.mismatches for s in row_summaries)} mismatches{incomplete}")
        for s in row_summaries:
            if s.mismatches:
                lines += ["    " + line for line in format_summary(s).splitlines()]
    where = _workers_text(summaries[0]) if summaries else "nothing to run"
    lines.append(f"total: {len(t.rows)} rows, {jobs} jobs, {t.cases} cases, {t.mismatches} mismatches; "
                 f"settled by Fraction: {sum(s.settled for s in summaries)}")
    lines.append(f"  wall time: {t.wall_seconds:.1f} s ({where}); chunk time summed over workers: "
                 f"{sum(s.worker_seconds for s in summaries):.1f} s; "
                 f"chunks resumed from a checkpoint: {sum(s.chunks_resumed for s in summaries)}")
    return "\n".join(lines)
