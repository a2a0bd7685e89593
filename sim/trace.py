"""A hook to watch the training step op by op: what the cross-check records of the emulator's side.

The training code reports each op it runs (the :mod:`sim.tensor` ops and their backward rules,
the trainer's conversions and unscale, each parameter's optimizer step, the loss-scale update)
with :func:`op`: a kind, a name, its inputs and outputs as ``{role: (bits, format name)}`` and its
attributes. Nothing is reported unless a tracer is installed with :func:`tracing`, and a tracer
only reads: the arithmetic is the same with or without one.

>>> import numpy as np, softfloat16 as sf
>>> from sim.tensor import Tensor, relu
>>> seen = []
>>> with tracing(lambda kind, name, inputs, outputs, attrs: seen.append((kind, name, list(outputs)))):
...     _ = relu(Tensor.from_float(np.array([-1.0, 2.0]), sf.fp16), name="demo.relu")
>>> seen
[('relu', 'demo.relu', ['out'])]
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Protocol

import numpy as np

__all__ = ["Tracer", "Values", "active", "op", "tracing"]

#: An op's inputs or outputs: role -> (bit array, format name: "fp16", ..., "int64", "bool").
Values = dict[str, tuple[np.ndarray, str]]


class Tracer(Protocol):
    def __call__(self, kind: str, name: str, inputs: Values, outputs: Values, attrs: dict[str, Any]) -> None: ...


_tracer: Tracer | None = None


@contextlib.contextmanager
def tracing(tracer: Tracer) -> Iterator[None]:
    """Report every op to ``tracer`` while the block runs (one tracer at a time)."""
    global _tracer
    if _tracer is not None:
        raise RuntimeError("a tracer is already installed")
    _tracer = tracer
    try:
        yield
    finally:
        _tracer = None


def active() -> bool:
    """Whether a tracer is installed (callers skip building the report otherwise)."""
    return _tracer is not None


def op(kind: str, name: str | None, inputs: Values, outputs: Values, **attrs: Any) -> None:
    """Report one op to the installed tracer, if any (an op without a name is not reported)."""
    if _tracer is not None and name is not None:
        _tracer(kind, name, inputs, outputs, attrs)
