"""What every command-line entry point of the project shares: a closed pipe ends it quietly.

``python -m softfloat16 explain 0x3c00 | head -1`` closes the pipe while the command still
writes; Python would print a BrokenPipeError traceback on the way out.
"""
from __future__ import annotations

import os
import sys
from collections.abc import Callable

__all__ = ["CLOSED_PIPE_STATUS", "run_entry_point"]

#: Exit status after the reader of standard output went away: 128 + SIGPIPE, as a shell reports
#: a program that SIGPIPE ended.
CLOSED_PIPE_STATUS = 141


def run_entry_point(main: Callable[[], int | None]) -> int:
    """Call ``main()`` and return its exit status; on a closed standard output, return
    ``CLOSED_PIPE_STATUS`` without a traceback."""
    try:
        status = main()
        sys.stdout.flush()  # a closed pipe shows up here when the output was buffered
        return int(status or 0)
    except BrokenPipeError:
        # Python flushes stdout again at exit; point it at /dev/null so that flush cannot fail.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return CLOSED_PIPE_STATUS
