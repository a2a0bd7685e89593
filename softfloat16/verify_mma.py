"""Check ``softfloat16.mma`` against MMA-Sim (the optional ``mmasim`` package) preset by preset:
``python -m softfloat16 verify-mma``.

A preset's cases are cut into chunks, one per (kind of random case, chained K): every kind of
``mma_reference.KINDS`` and every K of ``chain_lengths`` (the instruction's k, 4k, 256 and 4096, as
many instructions chained as a kernel's K loop runs). A chunk is one random GEMM
(``mma_reference.compare``) of ``rows x cols`` dot products, the shape chosen so that the chunks of
a preset reach the requested number of dot products; its operands come from a seed of the run's
seed, the preset's name and the chunk number, so results never depend on the workers, the order,
or which other presets ran. The chunks run on the machinery of ``softfloat16.verify`` (here, in a
pool of processes or on a Dask cluster), and finished chunks are recorded in an optional JSON
checkpoint, one file for the whole run, written as ``verify`` writes its own
(``verify_checkpoint.save_checkpoint``).

By default one preset per distinct arithmetic: the ~5000 presets differ mostly in their shape
(m64n8 ... m64n256), which the model does not see, so ``select_presets`` keeps the first name of
each (arch, instruction, k, formats, scale, block, model).

>>> names = select_presets()
>>> len(names) < len(select_presets(every=True)) // 10
True
>>> select_presets(["volta.mma.m8n8k4", "f32.f16"])
['volta.mma.m8n8k4.f32.f16.f16.f32', 'volta.mma.m8n8k4.f32.f16.f16.f16']
>>> job = MmaJob("volta.mma.m8n8k4.f32.f16.f16.f32", requested=1000)
>>> chain_lengths(job.spec), len(job.chunks), job.shape, job.cases
((4, 16, 256, 4096), 28, (6, 6), 1008)
"""
from __future__ import annotations

import difflib
import os
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from . import verify
from .mma_presets import PRESETS, Preset
from .mma_reference import KINDS
from .threads import numba_threads, set_num_threads
from .verify_checkpoint import read_json, save_checkpoint
from .verify_progress import Progress

__all__ = ["DEFAULT_CASES", "MmaJob", "MmaSummary", "MmasimMissing", "PresetResult", "chain_lengths",
           "format_mma_table", "select_presets", "verify_mma"]

DEFAULT_CASES = 100_000     # dot products per preset
CHAINS = (1, 4, 256, 4096)  # chained K: the instruction's k times 1 and 4, then 256 and 4096 products
MAX_EXAMPLES = 10           # mismatches kept per preset
SHORT_ROW = 32              # an example's a row and b column are kept up to this K
INSTALL_HINT = 'install the crosscheck extra: pip install -e ".[crosscheck]" (in the softfloat16 checkout)'


class MmasimMissing(RuntimeError):
    """MMA-Sim, the reference, does not import (not installed, or its C++ extension does not build)."""


def arithmetic_key(p: Preset) -> tuple:
    """What decides a preset's arithmetic: presets with the same key compute the same bits."""
    return (p.arch, p.instruction, p.k, p.a, p.b, p.c, p.d, p.scale, p.block, p.model)


def select_presets(words: Iterable[str] = (), every: bool = False) -> list[str]:
    """The preset names that contain every word (a word may be a comma-separated list of words), in
    the catalogue's order; unless ``every``, only the first of each ``arithmetic_key``. No match is
    a ValueError of one line with the closest names."""
    wanted = [w.strip() for word in words for w in word.split(",") if w.strip()]
    names = [name for name in PRESETS if all(w in name for w in wanted)]
    if not names:
        close = difflib.get_close_matches(" ".join(wanted), PRESETS, n=3, cutoff=0.0)
        raise ValueError(f"only: no preset name contains {' and '.join(map(repr, wanted))}; "
                         f"closest: {', '.join(close)} (softfloat16.mma.presets() lists all {len(PRESETS)})")
    if every:
        return names
    seen: dict[tuple, str] = {}
    for name in names:
        seen.setdefault(arithmetic_key(PRESETS[name]), name)
    return list(seen.values())


def chain_lengths(p: Preset) -> tuple[int, ...]:
    """The chained K of a preset's chunks: k, 4k, 256 and 4096, those that are multiples of k."""
    return tuple(sorted({k for k in (n * p.k if n < 256 else n for n in CHAINS) if k % p.k == 0}))


@dataclass(frozen=True)
class MmaJob:
    """One preset's share of a run: ``requested`` dot products or a few more, from ``seed``."""

    preset: str
    requested: int = DEFAULT_CASES
    seed: int = 0

    def __post_init__(self) -> None:
        if self.preset not in PRESETS:
            raise ValueError(f"preset: unknown {self.preset!r}")
        if isinstance(self.requested, bool) or not isinstance(self.requested, int) or self.requested <= 0:
            raise ValueError(f"cases: expected a positive number of dot products, got {self.requested!r}")

    @property
    def spec(self) -> Preset:
        return PRESETS[self.preset]

    @property
    def chunks(self) -> list[tuple[str, int]]:
        """(kind, K) of each chunk, by chunk number."""
        return [(kind, k) for kind in KINDS for k in chain_lengths(self.spec)]

    @property
    def shape(self) -> tuple[int, int]:
        """(rows, cols) of every chunk's GEMM: rows * cols * chunks >= requested."""
        per_chunk = -(-self.requested // len(self.chunks))
        rows = max(1, int(np.sqrt(per_chunk)))
        return rows, -(-per_chunk // rows)

    @property
    def cases(self) -> int:
        rows, cols = self.shape
        return rows * cols * len(self.chunks)

    def chunk_seed(self, chunk: int) -> int:
        state = np.random.SeedSequence([self.seed, zlib.crc32(self.preset.encode()), chunk]).generate_state(2)
        return int(state[0]) << 32 | int(state[1])

    # For verify_progress.Progress, which labels a single job "<op> <format> <rounding>".
    op, rounding = "verify-mma", "against mmasim"

    @property
    def format(self) -> str:
        return self.preset


def check_chunk(job: MmaJob, chunk: int) -> dict:
    """Run one chunk through softfloat16.mma and MMA-Sim: its cases, mismatches and first examples."""
    from .mma_reference import compare
    began = time.perf_counter()
    kind, k = job.chunks[chunk]
    rows, cols = job.shape
    seed = job.chunk_seed(chunk)
    cases, mismatches, examples = compare(job.preset, rows, cols, k, kind, seed)
    for x in examples:
        if k > SHORT_ROW:  # reproduce it with mma_reference.compare(preset, rows, cols, K, kind, seed)
            del x["a"], x["b"]
        x.update(chunk=chunk, kind=kind, K=k, rows=rows, cols=cols, seed=seed)
    return {"cases": cases, "mismatches": mismatches, "seconds": round(time.perf_counter() - began, 3),
            "examples": examples}


# --- where chunks run: verify's runner, with a task of this module ----------------------------------

def _one_thread() -> None:
    """One thread per chunk in a worker process: Numba's (softfloat16.mma) and torch's (MMA-Sim)."""
    set_num_threads(1)
    numba_threads()
    try:
        import torch
        torch.set_num_threads(1)
    except ImportError:
        pass


def _run_task(task: tuple[int, MmaJob, int, int | None]) -> tuple[int, int, dict]:
    index, job, chunk, driver = task
    if driver is not None and os.getpid() != driver:  # a Dask worker
        verify._tune_dask_worker()
        _one_thread()
    return index, chunk, check_chunk(job, chunk)


class _Runner(verify._Runner):
    """``verify``'s runner (one process, a pool, or a Dask cluster) running this module's chunks."""

    task = staticmethod(_run_task)
    initializer = staticmethod(_one_thread)
    worker_needs = "softfloat16 and its crosscheck extra (mmasim), the same versions"


# --- the checkpoint: one file, a record of chunks per preset ---------------------------------------

def _run_key(cases: int, seed: int) -> dict:
    return {"command": "verify-mma", "cases": cases, "seed": seed, "kinds": list(KINDS), "chains": list(CHAINS)}


def _refuse(path: str, problem: str) -> ValueError:
    return ValueError(f"checkpoint: {path} is not a usable verify-mma checkpoint ({problem}); "
                      "delete it to start afresh, or give another file")


def load_state(path: str | None, cases: int, seed: int) -> dict:
    """The state recorded in ``path`` for a run of ``cases`` and ``seed`` (fresh without a file);
    a ValueError of one line naming the file if it is not such a record."""
    fresh = {"job": _run_key(cases, seed), "presets": {}, "seconds": 0.0}
    if not path or not os.path.exists(path):
        return fresh
    state = read_json(path, _refuse, "the verify-mma checkpoint")
    if not isinstance(state, dict) or not {"job", "presets"} <= state.keys() or not isinstance(state["presets"], dict):
        raise _refuse(path, "not a JSON object with job and presets")
    if state["job"] != fresh["job"]:
        raise ValueError(f"checkpoint: {path} records another run ({state['job']}); use the same --cases and "
                         "--seed, another file, or delete it")
    for record in state["presets"].values():
        chunks = record.get("chunks") if isinstance(record, dict) else None
        if not isinstance(chunks, dict) or not isinstance(record.get("examples"), list) or not all(
                key.isdigit() and isinstance(v, dict) and all(isinstance(v.get(n), (int, float))
                                                              for n in ("cases", "mismatches", "seconds"))
                for key, v in chunks.items()):
            raise _refuse(path, "its chunks or examples are malformed")
    state.setdefault("seconds", 0.0)
    return state


# --- the driver -------------------------------------------------------------------------------------

@dataclass
class PresetResult:
    """One preset's outcome."""

    job: MmaJob
    cases: int
    mismatches: int
    chunks_done: int
    chunks_resumed: int
    seconds: float                      # its chunks' own time, summed (earlier runs included)
    examples: list = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return self.chunks_done == len(self.job.chunks)


@dataclass
class MmaSummary:
    """The outcome of ``verify_mma``."""

    results: list[PresetResult]
    wall_seconds: float                 # this run
    total_seconds: float                # including earlier runs recorded in the checkpoint
    workers: int
    scheduler: str | None = None
    mmasim: str = ""                    # MMA-Sim's version

    @property
    def cases(self) -> int:
        return sum(r.cases for r in self.results)

    @property
    def mismatches(self) -> int:
        return sum(r.mismatches for r in self.results)


def _mmasim_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("mmasim")
    except PackageNotFoundError:
        return "unknown version"


def verify_mma(presets: Iterable[str], *, cases: int = DEFAULT_CASES, seed: int = 0, workers: int | None = None,
               scheduler=None, checkpoint: str | None = None, progress: bool = False) -> MmaSummary:
    """Check each of ``presets`` (names) on ``cases`` dot products against MMA-Sim, a chunk at a time
    on ``workers`` processes (default: the CPU count) or the Dask ``scheduler`` (see
    ``verify.verify``). ``checkpoint``: a JSON file of finished chunks, read to resume and rewritten
    as chunks finish; a run with other presets (same cases and seed) resumes those it shares.
    ``MmasimMissing`` (one line) when MMA-Sim is unavailable."""
    from .mma_reference import mmasim_missing
    reason = mmasim_missing()
    if reason:
        raise MmasimMissing(f"{reason}; {INSTALL_HINT}")
    if scheduler is not None and workers is not None:
        raise ValueError("workers: a Dask cluster runs on its own workers; give workers or scheduler, not both")
    jobs = [MmaJob(name, cases, seed) for name in dict.fromkeys(presets)]
    state = load_state(checkpoint, cases, seed)
    records = [state["presets"].setdefault(job.preset, {"chunks": {}, "examples": []}) for job in jobs]
    resumed = [len(r["chunks"]) for r in records]
    tasks = [(i, c) for i, (job, r) in enumerate(zip(jobs, records)) for c in range(len(job.chunks))
             if str(c) not in r["chunks"]]
    done = sum(v["cases"] for r in records for v in r["chunks"].values())
    bad = sum(v["mismatches"] for r in records for v in r["chunks"].values())
    bar = Progress(jobs, progress, done=done)
    began = last_save = time.perf_counter()
    unsaved = False

    def save() -> None:
        nonlocal last_save, unsaved
        if checkpoint and unsaved:
            now = time.perf_counter()
            state["seconds"] += now - last_save
            last_save, unsaved = now, False
            save_checkpoint(checkpoint, state)

    with _Runner(workers, scheduler, len(tasks)) as runner:
        try:
            for index, chunk, result in runner.results(jobs, tasks):
                record = records[index]
                examples = record["examples"] + result.pop("examples")  # the first in chunk order, however run
                record["examples"] = sorted(examples, key=lambda x: (x.get("chunk", 0), x["i"], x["j"]))[:MAX_EXAMPLES]
                record["chunks"][str(chunk)] = result
                done, bad, unsaved = done + result["cases"], bad + result["mismatches"], True
                bar.update(done, bad)
                if time.perf_counter() - last_save > 1.0:
                    save()
        finally:
            save()
        wall = time.perf_counter() - began
    bar.update(done, bad, final=True)
    results = []
    for job, record, before in zip(jobs, records, resumed):
        chunks = record["chunks"].values()
        results.append(PresetResult(job, sum(v["cases"] for v in chunks), sum(v["mismatches"] for v in chunks),
                                    len(chunks), before, sum(v["seconds"] for v in chunks), record["examples"]))
    return MmaSummary(results, wall, state["seconds"] if checkpoint else wall, runner.workers, runner.scheduler,
                      _mmasim_version())


def format_mma_table(s: MmaSummary) -> str:
    """A line per preset (cases, mismatches), the first mismatches of a failing one, and a total."""
    width = max([len(r.job.preset) for r in s.results] + [6])
    first = s.results[0].job if s.results else MmaJob(next(iter(PRESETS)))
    lines = [f"verify-mma: {len(s.results)} preset{'s' * (len(s.results) != 1)} against MMA-Sim (mmasim "
             f"{s.mmasim}); {first.requested} dot products a preset or a few more, seed {first.seed}, "
             f"chained K = k, 4k, 256, 4096",
             f"  {'preset':{width}s} {'cases':>9s} {'mismatches':>10s}"]
    for r in s.results:
        note = "" if r.complete else f"  INCOMPLETE: {r.chunks_done}/{len(r.job.chunks)} chunks"
        lines.append(f"  {r.job.preset:{width}s} {r.cases:9d} {r.mismatches:10d}{note}")
        for x in r.examples if r.mismatches else ():
            operands = f" a={x['a']} b={x['b']}" if "a" in x else ""
            lines.append(f"      {x['kind']} K={x['K']} [{x['i']},{x['j']}] of {x['rows']}x{x['cols']} seed "
                         f"{x['seed']}: ours {x['ours']}, mmasim {x['mmasim']}, c={x['c']}{operands}")
    failing = sum(r.mismatches > 0 for r in s.results)
    presets = f"{len(s.results)} preset{'s' * (len(s.results) != 1)}"
    lines.append(f"total: {presets}, {s.cases} dot products, {s.mismatches} mismatches"
                 + (f" in {failing} preset{'s' * (failing != 1)}" if failing else ""))
    where = (f"{s.workers} Dask worker thread{'s' * (s.workers != 1)} at {s.scheduler}" if s.scheduler
             else f"{s.workers} worker{'s' * (s.workers != 1)}")
    lines.append(f"  wall time: {s.wall_seconds:.1f} s this run ({where}), {s.total_seconds:.1f} s in total; "
                 f"chunk time summed over workers: {sum(r.seconds for r in s.results):.1f} s; "
                 f"chunks resumed from a checkpoint: {sum(r.chunks_resumed for r in s.results)}")
    return "\n".join(lines)
