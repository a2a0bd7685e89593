"""Notices on a stream while Numba compiles kernels, so that a first run is never silent.

The first use of an operation (for a format and a set of options) on a machine compiles its
kernel, about a second each; the machine code is cached on disk, and later processes load it in
milliseconds. A command that may start cold (``python -m sim``, ``verify``) wraps its work in
:class:`CompileNotices`: the first compilation prints a line at once, and while compilation goes
on, a line at most every ``every`` seconds says how many functions are compiled and for how long.
Nothing is printed when everything comes from the cache.

>>> import io, numba
>>> stream = io.StringIO()
>>> with CompileNotices(stream, label="demo: ", every=0) as notices:
...     _ = numba.njit(lambda x: x + 1)(1)
>>> notices.compiled >= 1, stream.getvalue().startswith("demo: compiling kernels")
(True, True)
"""
from __future__ import annotations

import threading
import time
from typing import TextIO

from numba.core import event

__all__ = ["CompileNotices"]


class CompileNotices(event.Listener):
    """A context manager that listens to Numba's compile events and writes progress lines to
    ``stream``; ``label`` starts each line (e.g. which worker). ``compiled`` counts the functions
    compiled while it was installed (nested ones included: an inlined helper is compiled too)."""

    def __init__(self, stream: TextIO, label: str = "", every: float = 15.0) -> None:
        self.stream, self.label, self.every = stream, label, every
        self.compiled = 0
        self.began: float | None = None
        self.last_line = 0.0
        self.lock = threading.Lock()

    def on_start(self, event_record) -> None:
        pass

    def on_end(self, event_record) -> None:
        with self.lock:
            self.compiled += 1
            now = time.perf_counter()
            if self.began is None:
                self.began = now - 1e-9
                self._write("compiling kernels for their first use on this machine (cached on disk "
                            "afterwards; later runs skip this)")
            elif now - self.last_line >= self.every:
                self._write(f"compiling kernels: {self.compiled} functions compiled in {now - self.began:.0f} s")
            else:
                return
            self.last_line = now

    def _write(self, text: str) -> None:
        self.stream.write(f"{self.label}{text}\n")
        self.stream.flush()

    def __enter__(self) -> CompileNotices:
        event.register("numba:compile", self)
        return self

    def __exit__(self, *exc) -> None:
        event.unregister("numba:compile", self)
