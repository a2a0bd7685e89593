"""What every ``python -m sim`` command shares on its command line: value types whose errors say
what is wrong in the user's terms, the usage error, output paths checked before any work, and the
training flags (:func:`add_train_arguments`: one flag per :class:`~sim.config.TrainConfig` field,
declared once for ``sim train``, ``sim crosscheck`` and whoever else runs a training config).

A value type raises ``argparse.ArgumentTypeError``, so argparse reports
``argument --lr: must be a positive finite number, got 'abc'`` (a plain ValueError would make it
print the converter's function name instead).
"""
from __future__ import annotations

import argparse
import contextlib
import dataclasses
import math
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from softfloat16.atomic import open_atomic

from sim.config import (
    ACCUMULATIONS, DATASETS, FP8_SCALINGS, GRAD_ROUNDINGS, LOSS_SCALES, OPTIMIZERS, PRECISIONS, TrainConfig,
)

__all__ = [
    "TRAIN_FIELDS", "UsageError", "add_train_arguments", "check_output_dir", "check_writable", "given_train_fields",
    "layer_widths", "momentum", "non_negative_float", "non_negative_int", "output_dir", "positive_float",
    "positive_int", "train_config", "write_text_atomically",
]


class UsageError(Exception):
    """A bad command line, or an output that cannot be written: reported as
    ``<command>: error: ...`` with exit status 2, before anything is computed."""


def _number(text: str, kind: Callable[[str], float], what: str) -> float:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None


def _integer(text: str, low: int, what: str) -> int:
    value = int(_number(text, int, what))
    if value < low:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
    return value


def _real(text: str, low: float, what: str, *, open_low: bool) -> float:
    value = _number(text, float, what)
    if not (low < value < math.inf if open_low else low <= value < math.inf):
        raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
    return value


def positive_int(text: str) -> int:
    """An integer >= 1.

    >>> positive_int("3")
    3
    """
    return _integer(text, 1, "a positive integer")


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    return _integer(text, 0, "a non-negative integer")


def positive_float(text: str) -> float:
    """A finite number > 0.

    >>> positive_float("abc")
    Traceback (most recent call last):
    argparse.ArgumentTypeError: must be a positive finite number, got 'abc'
    """
    return _real(text, 0.0, "a positive finite number", open_low=True)


def non_negative_float(text: str) -> float:
    """A finite number >= 0."""
    return _real(text, 0.0, "a non-negative finite number", open_low=False)


def momentum(text: str) -> float:
    """SGD momentum: 0 <= M < 1."""
    value = _real(text, 0.0, "a number with 0 <= M < 1", open_low=False)
    if value >= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number with 0 <= M < 1, got {text}")
    return value


def layer_widths(text: str) -> tuple[int, ...]:
    """Comma-separated positive layer widths.

    >>> layer_widths("128,64")
    (128, 64)
    """
    try:
        widths = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be comma-separated layer widths, got {text!r}") from None
    if not widths or min(widths) < 1:
        raise argparse.ArgumentTypeError(f"layer widths must be positive, got {text!r}")
    return widths


#: Every TrainConfig field, which is also the argparse destination of its flag.
TRAIN_FIELDS = tuple(field.name for field in dataclasses.fields(TrainConfig))


def add_train_arguments(parser: argparse.ArgumentParser | Any, steps_default: int = 500) -> None:
    """Declare the training flags on ``parser`` (a parser or an argument group), one per
    :class:`~sim.config.TrainConfig` field. Defaults are None, so that :func:`given_train_fields`
    can tell the flags given from those left out (``--resume``, ``--against`` need that);
    ``steps_default`` only shows in the help.

    >>> parser = argparse.ArgumentParser()
    >>> add_train_arguments(parser)
    >>> given_train_fields(parser.parse_args(["--optimizer", "adam", "--hidden", "16,8"]))
    {'optimizer': 'adam', 'hidden': (16, 8)}
    """
    add = parser.add_argument
    add("--precision", choices=tuple(PRECISIONS),
        help="compute format (default fp16); fp8, mxfp8 and nvfp4 quantise the matrix products' operands "
             "and keep FP32 elsewhere")
    add("--loss-scale", choices=LOSS_SCALES, help="loss scaling (default: dynamic for fp16, none otherwise)")
    add("--scale", type=positive_float, metavar="S", help="the static scale, or the initial dynamic scale "
        "(default 65536)")
    add("--growth-interval", type=positive_int, metavar="N",
        help="dynamic scaling: clean steps before the scale doubles (default 2000)")
    add("--no-master-weights", dest="master_weights", action="store_const", const=False,
        help="keep weights and optimizer in the compute format (no FP32 master copy)")
    add("--clip", type=positive_float, metavar="C", help="clip the global gradient norm to C")
    add("--clip-before-unscale", action="store_const", const=True,
        help="clip the still-scaled gradients (the classic bug, on purpose)")
    add("--optimizer", choices=OPTIMIZERS, help="default sgd (momentum 0.9)")
    add("--lr", type=positive_float, help="learning rate (default 0.05 for sgd, 1e-3 for adam)")
    add("--momentum", type=momentum, metavar="M", help="sgd momentum, 0 <= M < 1 (default 0.9)")
    add("--weight-decay", type=non_negative_float, metavar="W",
        help="L2 weight decay added to the gradient, as torch's SGD and Adam (default 0)")
    add("--steps", type=non_negative_int, metavar="N", help=f"total steps (default {steps_default})")
    add("--batch-size", type=positive_int, metavar="B", help="default 32")
    add("--seed", type=non_negative_int, metavar="S", help="weights and data order (default 0)")
    add("--data", choices=DATASETS, help="digits (default) or a small synthetic set")
    add("--hidden", type=layer_widths, metavar="W1,W2,...", help="hidden layer widths (default 128,128,128)")
    add("--init-gain", type=positive_float, metavar="G",
        help="multiply the He-uniform bound of the initial weights by G (default 1)")
    add("--fp8-scaling", choices=FP8_SCALINGS,
        help="fp8: per-tensor scale from an amax history (delayed, default), from this step's amax "
             "(current), or no scaling (none)")
    add("--amax-history", type=positive_int, metavar="N", help="fp8 delayed scaling: amax history length (default 16)")
    add("--fp8-margin", type=non_negative_int, metavar="M",
        help="fp8: binades of headroom left above the amax (default 0)")
    add("--grad-rounding", choices=GRAD_ROUNDINGS,
        help="fp8/mxfp8/nvfp4: rounding of gradients into the low format, rne (default) or sr (stochastic, "
             "seeded from --seed and the step)")
    add("--block-size", type=positive_int, metavar="B", help="mxfp8/nvfp4: elements per scale block (32, 16)")
    add("--accumulate", choices=ACCUMULATIONS,
        help="matrix products: sequential FP32 accumulation (fp32, default) or the tensor-core model (tensorcore)")
    add("--tc-block", type=positive_int, metavar="B", help="tensorcore: products per block (default 16)")
    add("--tc-fraction-bits", type=positive_int, metavar="F",
        help="tensorcore: fraction bits the block adder keeps (default 25, the H100 model)")
    add("--promote-every", type=positive_int, metavar="K",
        help="tensorcore: add the partial sum into an FP32 accumulator every K products (DeepSeek-V3: 128)")


def given_train_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The TrainConfig fields set on the command line (see :func:`add_train_arguments`)."""
    return {field: getattr(args, field) for field in TRAIN_FIELDS if getattr(args, field, None) is not None}


# ValueError wording of TrainConfig -> the flag a user typed.
_FLAG_WORDS = (("static loss scaling", "--loss-scale static"), ("clip_before_unscale", "--clip-before-unscale"))


def train_config(given: Mapping[str, Any], base: TrainConfig | None = None) -> TrainConfig:
    """``base`` (default: TrainConfig()) with the ``given`` fields replaced, resolved; UsageError
    naming the flags at fault for an impossible combination, or for a flag that does not apply
    (``--growth-interval`` without dynamic scaling, ``--momentum`` with Adam).

    >>> train_config({"optimizer": "adam", "momentum": 0.5})
    Traceback (most recent call last):
    sim.arguments.UsageError: --momentum only applies to --optimizer sgd, not adam
    """
    config = dataclasses.replace(base if base is not None else TrainConfig(), **given)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # notes and warnings are the caller's to print
            config = config.resolved()
    except ValueError as error:
        message = str(error)
        for words, flag in _FLAG_WORDS:
            message = message.replace(words, flag)
        raise UsageError(message) from None
    if "growth_interval" in given and config.loss_scale != "dynamic":
        raise UsageError(f"--growth-interval only applies to --loss-scale dynamic, not {config.loss_scale}")
    if "momentum" in given and config.optimizer != "sgd":
        raise UsageError(f"--momentum only applies to --optimizer sgd, not {config.optimizer}")
    return config


def _probe(directory: str) -> None:
    """Create and delete a file in ``directory``: the only test of writability that holds for
    root, read-only mounts and network file systems alike (``os.access`` does not)."""
    descriptor, path = tempfile.mkstemp(prefix=".sim-probe-", dir=directory)
    os.close(descriptor)
    os.unlink(path)


def _reason(error: OSError) -> str:
    return error.strerror or str(error)


def check_writable(flag: str, path: str | None) -> None:
    """UsageError unless a file can be written at ``path`` (None: nothing to check)."""
    if path is None:
        return
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UsageError(f"{flag}: {path} is a directory, not a file")
    if not os.path.isdir(directory):
        raise UsageError(f"{flag}: cannot write {path}: directory does not exist: {directory}")
    try:
        _probe(directory)
    except OSError as error:
        raise UsageError(f"{flag}: cannot write {path}: {_reason(error)}") from None


def check_output_dir(flag: str, path: str) -> bool:
    """UsageError unless ``path`` is, or can be made, a writable directory. Makes it; returns
    whether it was made here (so that a failed run can remove it again)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise UsageError(f"{flag}: {path} is a file, not a directory")
    made = not os.path.exists(path)
    try:
        os.makedirs(path, exist_ok=True)
        _probe(path)
    except OSError as error:
        if made and os.path.isdir(path):
            shutil.rmtree(path, ignore_errors=True)
        raise UsageError(f"{flag}: cannot write to directory {path}: {_reason(error)}") from None
    return made


def write_text_atomically(path: str, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in the same directory and a
    rename (``softfloat16.atomic``): a reader never sees half a file, a failure leaves no file
    behind, and the file gets the permissions of any file ``open()`` creates.

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "note.txt")
    >>> write_text_atomically(path, "done\\n"); open(path).read(), os.listdir(os.path.dirname(path))
    ('done\\n', ['note.txt'])
    """
    with open_atomic(path, "w", encoding="utf-8", prefix=".sim-") as file:
        file.write(text)


@contextlib.contextmanager
def output_dir(flag: str, path: str) -> Iterator[None]:
    """``check_output_dir`` for the length of a run: a directory made here is removed again if
    the run ends with an exception (Ctrl-C included) while it is still empty."""
    made = check_output_dir(flag, path)
    try:
        yield
    except BaseException:
        if made:
            with contextlib.suppress(OSError):
                os.rmdir(path)  # only if empty: never delete what was written
        raise
