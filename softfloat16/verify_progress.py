"""Progress of a ``softfloat16.verify`` run on stderr: a tqdm bar on a terminal, or the same line
every 30 s into a log file."""
from __future__ import annotations

import sys
import time
from typing import TYPE_CHECKING

from tqdm import tqdm

if TYPE_CHECKING:
    from .verify import Job

__all__ = ["Progress"]

# A percentage with one decimal, so that a finished run reads "100.0%" in a terminal and a log alike.
_BAR_FORMAT = "{desc} {percentage:5.1f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]"


class Progress:
    """Progress on stderr: a tqdm bar on a terminal, or tqdm's same line every 30 s (a log file)."""

    log_interval = 30.0   # seconds between lines in a log

    def __init__(self, job: Job | list[Job], enabled: bool, done: int = 0, stream=None):
        jobs = list(job) if isinstance(job, (list, tuple)) else [job]
        total = sum(j.cases for j in jobs)
        desc = f"{jobs[0].op} {jobs[0].format} {jobs[0].rounding}" if len(jobs) == 1 else f"{len(jobs)} jobs"
        self.enabled, self.total, self.initial = enabled, total, done
        self.stream = stream or sys.stderr
        self.desc = desc
        self.options = dict(total=total, unit=" cases", unit_scale=True, bar_format=_BAR_FORMAT)
        tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.bar = (tqdm(initial=done, file=self.stream, mininterval=0.2, desc=desc, **self.options)
                    if enabled and tty else None)
        self.began = self.last = time.perf_counter()

    def update(self, cases_done: int, mismatches: int, final: bool = False) -> None:
        if not self.enabled:
            return
        postfix = f"{mismatches} mismatches"
        if self.bar is not None:
            self.bar.set_postfix_str(postfix, refresh=False)
            self.bar.update(cases_done - self.bar.n)
            if final:
                self.bar.close()
            return
        now = time.perf_counter()
        if final or now - self.last >= self.log_interval:
            self.last = now
            line = tqdm.format_meter(cases_done, elapsed=now - self.began, initial=self.initial, ncols=100,
                                     ascii=True, postfix=postfix, prefix=self.desc, **self.options)
            self.stream.write(line + "\n")
            self.stream.flush()
