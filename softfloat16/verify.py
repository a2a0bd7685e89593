"""Check the core against an independent reference, exhaustively or on a sample.

Each job (format x op x rounding mode) is cut into chunks of 2^22 cases with a fixed content (an
index range of the operand space, or a seeded random draw), so results never depend on how many
worker processes ran them, or which Dask workers (``scheduler=``), or in which order; finished
chunks are recorded in an optional JSON checkpoint (``softfloat16.verify_checkpoint``) so that an
interrupted run resumes where it stopped, here or on a cluster. ``verify_jobs`` runs several jobs
as one stream of chunks (``softfloat16.verify_table``: the rows of docs/verification.md). The reference is
``softfloat16._verify_reference`` (host float hardware where provably exact, else exact signs
with error-free transformations, else ``fractions.Fraction`` through ``softfloat16.exact``).

>>> summary = verify("fp16", "add", "rtz", sample=5000, workers=1)
>>> summary.cases, summary.mismatches
(5000, 0)
"""
from __future__ import annotations

import ctypes
import functools
import gc
import multiprocessing
import os
import socket
import sys
import time
from dataclasses import dataclass, field

import numpy as np

from . import _verify_reference as reference
from ._verify_tables import ARITHMETIC_FORMATS, ARITY, BINARY, CONVERT_FORMATS, OPS, converts, covers
from .compare import to_hex
from .formats import Format, format as parse_format
from .ops import convert as core_convert
from .rounding import ALL_ROUNDING_NAMES
from .threads import get_num_threads, set_num_threads
from .verify_checkpoint import load_checkpoint, save_checkpoint
from .verify_progress import Progress

__all__ = ["CHUNK", "DEFAULT_FMA_C", "Job", "SchedulerError", "Summary", "check_chunk", "format_summary", "verify",
           "verify_jobs"]

CHUNK = 1 << 22            # cases per chunk: the unit of sharding and of checkpointing
BLOCK = 1 << 18            # cases per core/reference call inside a chunk (cache-sized)
MAX_EXAMPLES = 10          # mismatches kept per chunk and in the summary
FORMATS = ARITHMETIC_FORMATS


def _default_fma_c(fmt: Format) -> tuple[int, ...]:
    """c values for exhaustive fma over (a, b): zeros, the tiniest subnormal, one, max finite, min
    normal (the order is part of a checkpoint's job: keep it). The FNUZ and P3109 formats have no -0
    (their 0x80 is the NaN), the unsigned ones no negative values."""
    minus = fmt.sign_mask
    c = (0, minus, fmt.min_subnormal, fmt.one, minus | fmt.one, fmt.max_finite, fmt.min_normal, minus | fmt.min_normal)
    if not fmt.signed:
        return tuple(x for x in c if not x & minus)
    return c if fmt.has_negative_zero else tuple(x for x in c if x != minus)


DEFAULT_FMA_C = {name: _default_fma_c(parse_format(name)) for name in FORMATS}


@dataclass(frozen=True)
class Job:
    """One verification row: what to check, and over which cases."""

    format: str
    op: str
    rounding: str
    exhaustive: bool = False
    sample: int = 1 << 20
    seed: int = 0
    source: str | None = None          # convert only: the source format
    fma_c: tuple[int, ...] = ()        # exhaustive fma only: the c values
    strict_nan: bool = False
    method: str = "auto"               # reference method: auto | hardware | exact
    saturate: bool = False             # the core's saturate=: overflow gives max finite
    sr_bits: int = 32                  # rounding="sr": R, the random integer's bits

    def __post_init__(self) -> None:
        fmt = parse_format(self.format)
        object.__setattr__(self, "format", fmt.name)
        if self.op not in OPS:
            raise ValueError(f"op: unknown op {self.op!r}; accepted: {', '.join(OPS)}")
        if self.rounding not in ALL_ROUNDING_NAMES:
            raise ValueError(f"rounding: unknown mode {self.rounding!r}; accepted: {', '.join(ALL_ROUNDING_NAMES)}")
        if isinstance(self.sr_bits, bool) or not isinstance(self.sr_bits, int) or not 1 <= self.sr_bits <= 32:
            raise ValueError(f"sr_bits: expected an integer from 1 to 32, got {self.sr_bits!r}")
        if self.rounding == "sr" and self.method == "hardware":
            raise ValueError("method: stochastic rounding has no hardware reference (exact rationals round it)")
        if self.method not in ("auto", "hardware", "exact"):
            raise ValueError(f"method: unknown reference method {self.method!r}; accepted: auto, hardware, exact")
        if not isinstance(self.saturate, bool):
            raise TypeError(f"saturate: expected True or False, got {self.saturate!r}")
        if self.op == "convert":
            source = parse_format(self.source or ("fp32" if fmt.name != "fp32" else "fp16")).name
            object.__setattr__(self, "source", source)
            if source == fmt.name or not (converts(parse_format(source)) and converts(fmt)):
                raise ValueError(f"convert: supported between {', '.join(CONVERT_FORMATS)} and the other formats of "
                                 f"8 bits or fewer with a zero (P3109 ...), not {source} -> {fmt.name}")
        else:
            if not covers(fmt):
                raise ValueError(f"format: {self.op} is verified for {', '.join(FORMATS)} and the other formats of 8 "
                                 f"bits or fewer with a zero (P3109 ...), not {fmt.name}")
            object.__setattr__(self, "source", None)
        if self.saturate and self.op == "convert" and fmt.name == "fp32":
            raise ValueError("saturate: a conversion into fp32 never overflows")
        if self.rounding != "sr":  # "hardware" where there is no hardware path: refused here, not in a worker
            reference.method_for(fmt, self.op, self.rounding, self.source, self.method, self.saturate)
        if self.op == "fma" and self.exhaustive:
            c = tuple(int(x) for x in (self.fma_c or DEFAULT_FMA_C.get(fmt.name) or _default_fma_c(fmt)))
            object.__setattr__(self, "fma_c", c)
        else:
            object.__setattr__(self, "fma_c", ())
        if not self.exhaustive and self.sample <= 0:
            raise ValueError(f"sample: expected a positive number of cases, got {self.sample}")

    @property
    def input_format(self):
        return parse_format(self.source or self.format)

    @property
    def space_bits(self) -> int:
        """log2 of the exhaustive operand space (per c value for fma)."""
        arity = 2 if self.op in BINARY + ("fma",) else 1
        return arity * self.input_format.width

    @property
    def cases(self) -> int:
        if not self.exhaustive:
            return self.sample
        return (1 << self.space_bits) * max(1, len(self.fma_c))

    @property
    def chunks(self) -> int:
        return -(-self.cases // CHUNK)

    def title(self) -> str:
        what = f"{self.source}->{self.format}" if self.op == "convert" else self.format
        scope = "exhaustive" if self.exhaustive else f"sample of {self.sample}, seed {self.seed}"
        extra = f", c in {{{', '.join(to_hex(c, self.format) for c in self.fma_c)}}}" if self.fma_c else ""
        mode = f"sr ({self.sr_bits}-bit random integers)" if self.rounding == "sr" else self.rounding
        return f"{self.op} {what} {mode}{' saturate' if self.saturate else ''} ({scope}{extra})"

    @property
    def reference_method(self) -> str:
        """The reference's method for this job: "hardware", "exact" or, for stochastic rounding,
        "fractions" (``softfloat16.exact`` on every case with a nonzero finite result)."""
        if self.rounding == "sr":
            return "fractions"
        return reference.method_for(parse_format(self.format), self.op, self.rounding, self.source,
                                    self.method, self.saturate)


@dataclass
class ChunkResult:
    chunk: int
    cases: int
    mismatches: int
    settled: int                       # elements the reference settled with Fraction arithmetic
    seconds: float
    examples: list = field(default_factory=list)


@dataclass
class Summary:
    """The outcome of ``verify``."""

    job: Job
    cases: int
    mismatches: int
    settled: int
    chunks_done: int
    chunks_resumed: int
    wall_seconds: float                # this run
    total_seconds: float               # including earlier runs recorded in the checkpoint
    workers: int                       # processes, or the Dask cluster's worker threads
    examples: list
    scheduler: str | None = None       # the Dask scheduler's address, when the chunks ran there
    worker_seconds: float = 0.0        # the chunks' own time, summed over workers (and earlier runs)

    @property
    def complete(self) -> bool:
        return self.chunks_done == self.job.chunks


# --- one chunk -----------------------------------------------------------------------------------

def _operands(job: Job, chunk: int, start: int, count: int) -> list[np.ndarray]:
    """Bit-pattern operands of cases [start, start + count) of a chunk (``start`` is global)."""
    fmt = job.input_format
    if not job.exhaustive:
        rng = np.random.default_rng([job.seed, chunk, start])
        arity = ARITY[job.op]
        return [rng.integers(0, 1 << fmt.width, count, dtype=np.uint64).astype(fmt.dtype) for _ in range(arity)]
    index = np.arange(start, start + count, dtype=np.uint64)
    per_c = np.uint64(1 << job.space_bits)
    if job.op == "fma":
        c = np.full(count, job.fma_c[int(start // (1 << job.space_bits))], dtype=fmt.dtype)
        index = index % per_c
    if job.space_bits == 2 * fmt.width:  # a in the high half, b in the low half
        width = np.uint64(fmt.width)
        mask = np.uint64((1 << fmt.width) - 1)
        ops = [(index >> width).astype(fmt.dtype), (index & mask).astype(fmt.dtype)]
    else:
        ops = [index.astype(fmt.dtype)]
    return ops + [c] if job.op == "fma" else ops


def _random_words(job: Job, chunk: int, start: int, count: int) -> np.ndarray | None:
    """Stochastic rounding's random word of cases [start, start + count): seeded by the job's seed
    and the case range, so a chunk's words do not depend on the workers (None for other modes)."""
    if job.rounding != "sr":
        return None
    rng = np.random.default_rng([job.seed, chunk, start, 0x5352])  # "SR": apart from the operands' stream
    return rng.integers(0, 1 << 32, count, dtype=np.uint64).astype(np.uint32)


def _core(job: Job, operands: list[np.ndarray], words: np.ndarray | None = None) -> np.ndarray:
    """The core's results, through its public API only."""
    fmt = parse_format(job.format)
    options = dict(rounding=job.rounding, saturate=job.saturate)
    if words is not None:
        options.update(random_bits=words, sr_bits=job.sr_bits)
    if job.op == "convert":
        return core_convert(operands[0], src=job.source, dst=fmt, **options)
    return getattr(fmt, job.op)(*operands, **options)


def check_chunk(job: Job, chunk: int) -> ChunkResult:
    """Run one chunk: the core and the reference on the same cases, compared bit for bit (NaNs by
    class: both NaN and the core's quiet, unless ``job.strict_nan``)."""
    began = time.perf_counter()
    fmt, in_fmt = parse_format(job.format), job.input_format
    first, end = chunk * CHUNK, min((chunk + 1) * CHUNK, job.cases)
    result = ChunkResult(chunk, end - first, 0, 0, 0.0)
    for start in range(first, end, BLOCK):
        count = min(BLOCK, end - start)
        operands = _operands(job, chunk, start, count)
        words = _random_words(job, chunk, start, count)
        actual = np.asarray(_core(job, operands, words)).astype(fmt.dtype)
        if words is not None:
            expected, settled = reference.stochastic_round(fmt, job.op, operands, words, job.sr_bits, src=job.source,
                                                           saturate=job.saturate, strict_nan=job.strict_nan)
        else:
            expected, settled = reference.reference(fmt, job.op, job.rounding, operands, src=job.source,
                                                    method=job.method, saturate=job.saturate,
                                                    strict_nan=job.strict_nan)
        result.settled += settled
        suspects = np.flatnonzero(actual != expected)
        if suspects.size == 0:
            continue
        a, e = actual[suspects], expected[suspects]
        if job.strict_nan:
            ok = np.zeros(suspects.size, dtype=bool)
        else:
            ok = fmt.is_nan(e) & fmt.is_nan(a) & ~fmt.is_signaling(a)
        bad = suspects[~ok]
        result.mismatches += int(bad.size)
        for i in bad[: MAX_EXAMPLES - len(result.examples)]:
            j = int(np.searchsorted(suspects, i))
            result.examples.append({
                "case": start + int(i),
                "operands": [to_hex(int(x[i]), in_fmt) for x in operands],
                "core": to_hex(int(actual[i]), fmt),
                "reference": to_hex(int(e[j]), fmt),
            })
    result.seconds = time.perf_counter() - began
    return result


# --- where chunks run: here, in a process pool, or on a Dask cluster ----------------------------

class SchedulerError(RuntimeError):
    """``scheduler=`` cannot be used: Dask's distributed is not installed, or no scheduler answers."""


CONNECT_TIMEOUT = 5        # seconds to reach a Dask scheduler: an address that does not answer fails fast
DASK_EXTRA = 'pip install -e ".[dask]" (in the softfloat16 checkout)'


def _run_task(task: tuple[int, Job, int, int | None]) -> tuple[int, ChunkResult]:
    """Chunk ``chunk`` of job number ``index``: here, in a pool process or on a Dask worker.
    ``driver``: the pid of the process that sent a Dask task."""
    index, job, chunk, driver = task
    if driver is not None and os.getpid() != driver:
        _tune_dask_worker()
    return index, check_chunk(job, chunk)


_worker_tuned = False


def _tune_dask_worker() -> None:
    """Once per Dask worker process (never in the caller's own process):

    - one thread per chunk: a worker runs as many chunks at once as it has threads, so a 32-thread
      worker would otherwise run 32 x 32 (the local pool sets the same count in its initializer:
      softfloat16.threads starts no Numba threads to do so, which in a forked child made the
      first chunk take 36 s instead of 2 s);
    - glibc's malloc as outside Dask: the nanny starts workers with MALLOC_TRIM_THRESHOLD_=65536,
      which also fixes the mmap threshold at 128 KiB, so each 2 MiB temporary array of a chunk is a
      fresh mmap zeroed page by page: 4x the page faults and twice the CPU time of a chunk
      (measured). Arrays up to 16 MiB come from the heap again, which keeps up to 32 MiB free.
    """
    global _worker_tuned
    if _worker_tuned:
        return
    _worker_tuned = True
    if get_num_threads() != 1:
        set_num_threads(1)
    if sys.platform.startswith("linux"):
        try:
            mallopt = ctypes.CDLL(None).mallopt
        except (OSError, AttributeError):  # no mallopt (not glibc): nothing to undo
            return
        mallopt(_M_MMAP_THRESHOLD, 16 << 20)
        mallopt(_M_TRIM_THRESHOLD, 32 << 20)


_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3   # glibc's <malloc.h>


def connect_scheduler(scheduler):
    """(client, ours): a Dask client of ``scheduler``, an address (a client we open and close) or a
    ``distributed.Client`` the caller holds. An address that does not answer, or a missing
    ``distributed`` package, is a :class:`SchedulerError` with a one-line message (also used by
    ``python -m sim report --scheduler``)."""
    if not isinstance(scheduler, str):
        return scheduler, False
    try:
        import distributed
    except ImportError:
        raise SchedulerError("--scheduler (scheduler=) needs Dask's distributed package, the optional extra "
                             f"dask: {DASK_EXTRA}") from None

    def unreachable(error: BaseException, what: str = "") -> SchedulerError:
        reason = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        return SchedulerError(f"cannot reach the Dask scheduler at {scheduler} ({what}{reason})")

    # A plain socket first: a refused or unknown address fails at once and quietly, where a Client
    # would retry until its timeout and then complain again when it is garbage collected.
    try:
        host, port = distributed.comm.get_address_host_port(scheduler)
    except ValueError as error:
        if not scheduler.startswith("inproc://"):  # in-process addresses have no host and port
            raise unreachable(error) from None
    else:
        try:
            socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
        except OSError as error:
            raise unreachable(error) from None
    try:
        return distributed.Client(scheduler, timeout=CONNECT_TIMEOUT, set_as_default=False), True
    except Exception as error:  # no handshake: a timeout, or something other than a Dask scheduler there
        failure = unreachable(error, "no Dask handshake: ")
    gc.collect()  # the half-made client closes now, while its event loop runs, not with a traceback at exit
    raise failure


class _Runner:
    """Runs (job, chunk) tasks and yields their results as they finish, in no particular order:
    one after another here (one worker), in a pool of processes, or as tasks on a Dask cluster.
    A subclass names its own task function, pool-process initializer and what a Dask worker needs."""

    task = staticmethod(_run_task)
    # One core thread per process: the processes already share the cores (setting the count
    # starts nothing, so it is safe in a forked child).
    initializer = staticmethod(functools.partial(set_num_threads, 1))
    worker_needs = "softfloat16, the same version"

    def __init__(self, workers: int | None, scheduler, tasks: int):
        self.client, self.ours, self.scheduler = None, False, None
        if scheduler is not None:
            self.client, self.ours = connect_scheduler(scheduler)
            self.scheduler = getattr(self.client.scheduler, "address", None) or str(scheduler)
            self.workers = sum(self.client.nthreads().values())
        else:
            self.workers = max(1, min(workers or os.cpu_count() or 1, tasks or 1))

    def __enter__(self) -> _Runner:
        return self

    def __exit__(self, *exc) -> None:
        if self.ours:
            self.client.close()

    def results(self, jobs: list[Job], tasks: list[tuple[int, int]]):
        driver = os.getpid() if self.client is not None else None
        payloads = [(index, jobs[index], chunk, driver) for index, chunk in tasks]
        if self.client is not None:
            from distributed import as_completed
            futures = self.client.map(self.task, payloads, pure=False)
            finished = False
            try:
                for future in as_completed(futures, loop=self.client.loop):
                    try:
                        result = future.result()
                    except ImportError as error:  # raised on the worker, which lacks the package
                        raise SchedulerError(f"a Dask worker of {self.scheduler} cannot run the chunks ({error}): "
                                             f"install {self.worker_needs}, on every worker") from None
                    yield result
                finished = True
            finally:
                if not finished:  # interrupted, or a chunk failed: leave nothing running on the cluster
                    self.client.cancel(futures)
        elif self.workers == 1:
            yield from map(self.task, payloads)
        else:
            methods = multiprocessing.get_all_start_methods()
            context = multiprocessing.get_context("fork" if "fork" in methods else "spawn")
            with context.Pool(self.workers, initializer=self.initializer) as pool:
                yield from pool.imap_unordered(self.task, payloads)


class _JobRun:
    """One job's side of a run: its checkpoint state, the chunks done, when it was last saved."""

    def __init__(self, job: Job, checkpoint: str | None):
        self.job, self.checkpoint = job, checkpoint
        self.state = load_checkpoint(checkpoint, job)
        self.done = {int(k): v for k, v in self.state["chunks"].items()}
        self.resumed = len(self.done)
        self.last_save: float | None = None     # None until this run finishes one of its chunks
        self.finished: float | None = None
        self.unsaved = False

    def todo(self) -> list[int]:
        return [c for c in range(self.job.chunks) if c not in self.done]

    def add(self, r: ChunkResult, began: float) -> None:
        now = time.perf_counter()
        if self.last_save is None:  # this run's time on the job: from the start of the run
            self.last_save = began
        self.done[r.chunk] = {"cases": r.cases, "mismatches": r.mismatches, "settled": r.settled,
                              "seconds": round(r.seconds, 3)}
        self.state["examples"] = sorted(self.state["examples"] + r.examples, key=lambda x: x["case"])[:MAX_EXAMPLES]
        self.unsaved = True
        if len(self.done) == self.job.chunks:
            self.finished = now
        if now - self.last_save > 1.0 or self.finished is not None:
            self.save()

    def save(self) -> None:
        if not (self.checkpoint and self.unsaved):
            return
        now = time.perf_counter()
        self.state["chunks"] = {str(k): v for k, v in sorted(self.done.items())}
        self.state["seconds"] = self.state.get("seconds", 0.0) + (now - self.last_save)
        self.last_save, self.unsaved = now, False
        save_checkpoint(self.checkpoint, self.state)

    def summary(self, began: float, ended: float, runner: _Runner) -> Summary:
        done = self.done.values()
        wall = (self.finished or ended) - began
        return Summary(
            job=self.job, cases=sum(v["cases"] for v in done), mismatches=sum(v["mismatches"] for v in done),
            settled=sum(v["settled"] for v in done), chunks_done=len(self.done), chunks_resumed=self.resumed,
            wall_seconds=wall, total_seconds=self.state.get("seconds", wall) if self.checkpoint else wall,
            workers=runner.workers, examples=self.state["examples"], scheduler=runner.scheduler,
            worker_seconds=sum(v["seconds"] for v in done))


# --- the driver --------------------------------------------------------------------------------

def verify_jobs(jobs: list[Job], *, workers: int | None = None, scheduler=None,
                checkpoints: list[str | None] | None = None, progress: bool = False) -> list[Summary]:
    """Run several jobs as one: their chunks go to the same workers (or Dask cluster) as one stream
    of tasks, so that no worker waits for a job's last chunk. ``checkpoints``: a file (or None) per
    job. Returns a ``Summary`` per job, in the order of ``jobs``; see ``verify``.

    >>> jobs = [Job("fp4_e2m1", "add", "rtz", exhaustive=True), Job("fp16", "mul", "rup", sample=2000)]
    >>> [(s.job.format, s.cases, s.mismatches) for s in verify_jobs(jobs, workers=1)]
    [('fp4_e2m1', 256, 0), ('fp16', 2000, 0)]
    """
    if scheduler is not None and workers is not None:
        raise ValueError("workers: a Dask cluster runs on its own workers; give workers or scheduler, not both")
    checkpoints = list(checkpoints) if checkpoints is not None else [None] * len(jobs)
    if len(checkpoints) != len(jobs):
        raise ValueError(f"checkpoints: expected one per job ({len(jobs)}), got {len(checkpoints)}")
    runs = [_JobRun(job, path) for job, path in zip(jobs, checkpoints)]
    tasks = [(index, chunk) for index, run in enumerate(runs) for chunk in run.todo()]
    cases = sum(v["cases"] for run in runs for v in run.done.values())
    mismatches = sum(v["mismatches"] for run in runs for v in run.done.values())
    bar = Progress(jobs, progress, done=cases)
    with _Runner(workers, scheduler, len(tasks)) as runner:
        began = time.perf_counter()
        try:
            for index, r in runner.results(jobs, tasks):
                runs[index].add(r, began)
                cases, mismatches = cases + r.cases, mismatches + r.mismatches
                bar.update(cases, mismatches)
        finally:
            for run in runs:
                run.save()
        ended = time.perf_counter()
    bar.update(cases, mismatches, final=True)
    return [run.summary(began, ended, runner) for run in runs]


def verify(format: str, op: str, rounding: str = "rne", *, exhaustive: bool = False,  # noqa: A002
           sample: int = 1 << 20, workers: int | None = None, checkpoint: str | None = None,
           progress: bool = False, strict_nan: bool = False, seed: int = 0,
           source: str | None = None, fma_c: tuple[int, ...] = (), method: str = "auto",
           saturate: bool = False, sr_bits: int = 32, scheduler=None) -> Summary:
    """Check the core's ``op`` in ``format`` and ``rounding`` (and ``saturate``) against the reference.

    ``exhaustive``: every operand (pair) of the format; else ``sample`` seeded random cases.
    ``format``: one of ``FORMATS``, or another format of 8 bits or fewer with a zero, as the IEEE
    P3109 formats (``"p3109_k8p3se"``: the reference rounds them by exact signs and Fractions, in
    every mode). ``rounding="sr"``: each case gets a seeded random 32-bit word (its top ``sr_bits`` bits are
    r), passed to the core as ``random_bits=`` and to the reference, which rounds with exact
    rationals (about 10 us a case: exhaustive for formats of 8 bits, samples for the others).
    ``workers``: processes (default: the CPU count); ``checkpoint``: JSON file of finished chunks,
    read to resume and rewritten as chunks finish. ``scheduler``: the address of a Dask
    distributed scheduler (``"tcp://host:8786"``) or a ``distributed.Client``: the chunks run as
    tasks on its workers instead (``pip install -e ".[dask]"`` in the checkout; every worker needs
    softfloat16 installed). The result is the same wherever the chunks ran. Returns a ``Summary``.

    >>> s = verify("bf16", "mul", "rup", sample=3000, workers=1)
    >>> (s.cases, s.mismatches, s.complete)
    (3000, 0, True)
    >>> s = verify("fp8_e4m3fn", "add", "rtz", exhaustive=True, workers=1, saturate=True)
    >>> (s.cases, s.mismatches)
    (65536, 0)
    """
    job = Job(format, op, rounding, exhaustive=exhaustive, sample=sample, seed=seed, source=source,
              fma_c=tuple(fma_c), strict_nan=strict_nan, method=method, saturate=saturate, sr_bits=sr_bits)
    return verify_jobs([job], workers=workers, scheduler=scheduler, checkpoints=[checkpoint], progress=progress)[0]


def format_summary(s: Summary) -> str:
    """The human-readable report of a ``Summary``.

    >>> print(format_summary(verify("fp16", "sqrt", "rne", exhaustive=True, workers=1)).splitlines()[0])
    verify sqrt fp16 rne (exhaustive): 65536 cases, 0 mismatches
    """
    job = s.job
    lines = [f"verify {job.title()}: {s.cases} cases, {s.mismatches} mismatches"]
    if not s.complete:
        lines.append(f"  INCOMPLETE: {s.chunks_done}/{job.chunks} chunks of {job.cases} cases")
    lines.append(f"  reference: {job.reference_method}; settled by Fraction: {s.settled}; NaNs compared "
                 f"{'bit for bit (ieee profile)' if job.strict_nan else 'by class'}")
    lines.append(f"  wall time: {s.wall_seconds:.1f} s this run ({_workers_text(s)}), "
                 f"{s.total_seconds:.1f} s in total; chunks resumed from a checkpoint: {s.chunks_resumed}")
    if s.examples:
        lines.append("  first mismatches (case: operands -> core, reference):")
        for x in s.examples:
            lines.append(f"    {x['case']}: {job.op}({', '.join(x['operands'])}) -> core {x['core']}, "
                         f"reference {x['reference']}")
    return "\n".join(lines)


def _workers_text(s: Summary) -> str:
    """"2 workers", or "4 Dask worker threads at tcp://...": where the chunks ran."""
    if s.scheduler:
        return f"{s.workers} Dask worker thread{'s' * (s.workers != 1)} at {s.scheduler}"
    return f"{s.workers} worker{'s' * (s.workers != 1)}"
