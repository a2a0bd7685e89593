"""The checkpoint file of ``softfloat16.verify``: one JSON document per job, read to resume a run
and rewritten atomically as its chunks finish.

The document: ``{"job": <the job's key>, "chunks": {"<chunk>": {"cases", "mismatches", "settled",
"seconds"}}, "examples": [<first mismatches>], "seconds": <time spent on the job so far>}``. A
file that is not such a document, or that records another job, is refused with one line naming
the file, never read as an empty start (that would throw away the finished chunks it may hold).
"""
from __future__ import annotations

import json
import os
from dataclasses import asdict
from typing import TYPE_CHECKING

from .atomic import open_atomic

if TYPE_CHECKING:
    from .verify import Job

__all__ = ["job_key", "load_checkpoint", "save_checkpoint"]


def job_key(job: Job) -> dict:
    """The job as a checkpoint records it: a file resumes only the job with the same key."""
    d = asdict(job)
    d["fma_c"] = list(d["fma_c"])
    if not d["saturate"]:
        del d["saturate"]  # the key of checkpoints written before these options existed
    if d["rounding"] != "sr":
        del d["sr_bits"]
    return d


def read_json(path: str, refuse, what: str):
    """The JSON document of a checkpoint file; ``refuse(path, problem)`` makes the one-line error of
    a file that is not JSON text, and ``what`` names the file when it cannot be read at all."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as error:
        raise refuse(path, f"not valid JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    except UnicodeDecodeError:
        raise refuse(path, "not UTF-8 text") from None
    except OSError as error:
        raise ValueError(f"checkpoint: cannot read {what} {path}: {error.strerror or type(error).__name__}") from None


def _refuse(path: str, problem: str) -> ValueError:
    return ValueError(f"checkpoint: {path} is not a usable verify checkpoint ({problem}); "
                      "delete it to start the job afresh, or give another file")


def load_checkpoint(path: str | None, job: Job) -> dict:
    """The state recorded in ``path`` for ``job``, or a fresh state when there is no file (or no
    ``path``). A ValueError with one line naming the file if it cannot be read, is not a verify
    checkpoint, or records a different job."""
    if not path or not os.path.exists(path):
        return {"job": job_key(job), "chunks": {}, "examples": [], "seconds": 0.0}
    state = read_json(path, _refuse, "the verify checkpoint")
    if not isinstance(state, dict) or not {"job", "chunks", "examples"} <= state.keys():
        raise _refuse(path, "not a JSON object with job, chunks and examples")
    if state["job"] != job_key(job):
        raise ValueError(f"checkpoint: {path} records a different job ({state['job']}); "
                         "use another file or delete it")
    if not _chunks_are_valid(state["chunks"]) or not isinstance(state["examples"], list):
        raise _refuse(path, "its chunks or examples are malformed")
    return state


def _chunks_are_valid(chunks) -> bool:
    fields = ("cases", "mismatches", "settled", "seconds")
    return isinstance(chunks, dict) and all(
        key.isdigit() and isinstance(value, dict)
        and all(isinstance(value.get(name), (int, float)) and not isinstance(value.get(name), bool) for name in fields)
        for key, value in chunks.items())


def save_checkpoint(path: str, state: dict) -> None:
    """Write ``state`` to ``path`` atomically (``softfloat16.atomic``)."""
    with open_atomic(path, "w", encoding="utf-8", prefix=".verify-", suffix=".json") as f:
        json.dump(state, f)
