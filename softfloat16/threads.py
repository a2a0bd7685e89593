"""Threads: how many the elementwise operations and ``linalg.matmul`` use, and from what size.

An elementwise operation on at least :data:`PARALLEL_MIN_ELEMENTS` elements is cut into one
contiguous run of elements per thread (a multiple of 256 long, except the last), and each run goes
through the same compiled loop, which releases the GIL. Every element is computed by exactly one
thread, from its own operands (and, under stochastic rounding, its own random word), so results and
flags are identical for every thread count. ``linalg.matmul`` runs rows on Numba's threads, each
element again computed whole by one thread in the same order.

The count is :func:`set_num_threads`'s, or else Numba's (``NUMBA_NUM_THREADS`` and
``numba.set_num_threads``; by default every core).

>>> import softfloat16 as sf
>>> sf.set_num_threads(1); sf.get_num_threads()
1
>>> sf.set_num_threads(0)
Traceback (most recent call last):
ValueError: threads: expected an integer >= 1, got 0
>>> sf.set_num_threads(None)  # back to Numba's count
"""
from __future__ import annotations

import concurrent.futures
import numbers
import threading
from collections.abc import Callable

import numba

__all__ = ["PARALLEL_MIN_ELEMENTS", "PARALLEL_MIN_MACS", "get_num_threads", "numba_threads", "parallel_gemm",
           "run_split", "set_num_threads"]

# Below this many elements one thread is faster: handing a run to a thread costs tens of
# microseconds, the time of some 10^4 elements (bench/threads.py measures where splitting pays).
PARALLEL_MIN_ELEMENTS = 1 << 17
# GEMMs with fewer multiply-adds than this run on one thread: starting threads costs more.
PARALLEL_MIN_MACS = 1 << 20
_ALIGN = 256  # the fast loops' block length: runs start on a block boundary

_count: int | None = None
# Numba's own count before numba_threads first changed it: given back at the next numba_threads
# after set_num_threads(None) (Numba's count would otherwise stay at the last one set here).
_numba_own: int | None = None
_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def set_num_threads(threads: int | None) -> None:
    """Use ``threads`` threads from now on (None: follow Numba's count again, the one it had before
    this module set it). ``linalg.matmul`` applies it to Numba's threads when it next runs in
    parallel (:func:`numba_threads`), so this call itself starts nothing (safe in a forked worker
    process)."""
    global _count
    if threads is not None and (isinstance(threads, bool) or not isinstance(threads, numbers.Integral)
                                or threads < 1):
        raise ValueError(f"threads: expected an integer >= 1, got {threads!r}")
    _count = None if threads is None else int(threads)


def numba_threads() -> int:
    """Set Numba's thread count to this module's (capped at ``NUMBA_NUM_THREADS``, the most Numba
    can start) and return it: what a parallel Numba kernel is about to use."""
    global _numba_own
    if _count is not None:
        if _numba_own is None:
            _numba_own = numba.get_num_threads()
        numba.set_num_threads(min(_count, numba.config.NUMBA_NUM_THREADS))
    elif _numba_own is not None:
        numba.set_num_threads(_numba_own)
        _numba_own = None
    return numba.get_num_threads()


def parallel_gemm(m: int, k: int, n: int) -> bool:
    """Whether an (m, k) @ (k, n) GEMM runs its rows on Numba's threads: more than one row, at least
    PARALLEL_MIN_MACS multiply-adds, and more than one thread (numba_threads sets the count)."""
    return m > 1 and m * k * n >= PARALLEL_MIN_MACS and numba_threads() > 1


def get_num_threads() -> int:
    """The number of threads an elementwise operation on a large array uses."""
    if _count is not None:
        return _count
    return _numba_own if _numba_own is not None else numba.get_num_threads()


def _executor(threads: int) -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None or _pool._max_workers < threads:
            if _pool is not None:
                _pool.shutdown(wait=False)
            _pool = concurrent.futures.ThreadPoolExecutor(max_workers=threads, thread_name_prefix="softfloat16")
        return _pool


def run_split(size: int, work: Callable[[int, int], None]) -> None:
    """Call ``work(start, stop)`` over ``range(size)``: once when small or single-threaded, else
    once per thread on consecutive runs, concurrently (exceptions re-raised here)."""
    threads = get_num_threads()
    if threads <= 1 or size < PARALLEL_MIN_ELEMENTS:
        work(0, size)
        return
    step = -(-size // threads)
    step = -(-step // _ALIGN) * _ALIGN
    bounds = [(start, min(start + step, size)) for start in range(0, size, step)]
    futures = [_executor(threads).submit(work, start, stop) for start, stop in bounds[1:]]
    work(*bounds[0])  # the calling thread takes the first run
    for future in futures:
        future.result()
