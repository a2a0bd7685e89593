"""Datasets and a deterministic minibatch order for the training simulator.

Every random choice here comes from the raw 64-bit output of numpy's PCG64 bit generator, seeded
through ``SeedSequence``; both are stable across numpy versions (``Generator`` methods such as
``permutation`` or ``normal`` are not promised to be). Shuffles sort those raw words; the
synthetic data uses only IEEE ``+ - *`` on them, never libm. So a seed gives the same bytes on
every machine and numpy version, which a bit-reproducible training run needs.
"""

from __future__ import annotations

import numbers
from typing import Any, NamedTuple

import numpy as np

__all__ = [
    "BatchIterator",
    "DatasetSplit",
    "epoch_order",
    "load_digits_split",
    "make_synthetic",
    "split_dataset",
]

# Stream tags, so that one seed gives independent streams for independent purposes.
_SPLIT_STREAM, _SYNTHETIC_STREAM, _BATCH_STREAM = 0, 1, 2


class DatasetSplit(NamedTuple):
    """Train and test arrays: features float32 ``(n, n_features)``, labels int64 ``(n,)``."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def _integer(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


def _raw_words(count: int, *entropy: int) -> np.ndarray:
    """``count`` raw uint64 words of the PCG64 stream named by ``entropy`` (seed, tag, ...)."""
    return np.random.PCG64(np.random.SeedSequence(list(entropy))).random_raw(count)


def _permutation(n: int, *entropy: int) -> np.ndarray:
    # Sorting random 64-bit keys gives a uniform shuffle; the stable sort settles (vanishingly
    # rare) equal keys by position, so the result depends on the raw words alone.
    return np.argsort(_raw_words(n, *entropy), kind="stable").astype(np.int64)


def _uniform(count: int, *entropy: int) -> np.ndarray:
    """Uniform float64 in [0, 1): the top 53 bits of each raw word, scaled exactly."""
    return (_raw_words(count, *entropy) >> np.uint64(11)).astype(np.float64) * 2.0**-53


def epoch_order(n: int, seed: int, epoch: int) -> np.ndarray:
    """The order (an int64 permutation of ``range(n)``) in which epoch ``epoch`` visits samples.

    A pure function of its arguments, so a resumed run can rebuild any epoch's order.

    >>> order = epoch_order(10, seed=0, epoch=3)
    >>> sorted(order.tolist()) == list(range(10)), bool((order == epoch_order(10, 0, 3)).all())
    (True, True)
    """
    n = _integer("n", n, 1)
    seed = _integer("seed", seed, 0)
    epoch = _integer("epoch", epoch, 0)
    return _permutation(n, seed, _BATCH_STREAM, epoch)


def split_dataset(
    x: np.ndarray, y: np.ndarray, seed: int = 0, test_fraction: float = 0.2
) -> DatasetSplit:
    """Split samples into train and test sets, fixed by ``seed``.

    ``round(n * test_fraction)`` samples, chosen by a seeded shuffle, form the test set; both
    sets keep the samples' original order.

    >>> x, y = np.arange(20, dtype=np.float32).reshape(10, 2), np.arange(10)
    >>> split = split_dataset(x, y, seed=1, test_fraction=0.3)
    >>> split.x_train.shape, split.x_test.shape, split.y_test.dtype
    ((7, 2), (3, 2), dtype('int64'))
    """
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 2:
        raise ValueError(f"x must be 2-D (samples, features), got shape {x.shape}")
    if y.shape != (x.shape[0],):
        raise ValueError(f"y must have shape ({x.shape[0]},) to match x, got {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        raise TypeError(f"y must hold integer class labels, got dtype {y.dtype}")
    seed = _integer("seed", seed, 0)
    if isinstance(test_fraction, bool) or not isinstance(test_fraction, numbers.Real):
        raise TypeError(f"test_fraction must be a number, got {test_fraction!r}")
    if not 0.0 < test_fraction < 1.0:
        raise ValueError(f"test_fraction must be in (0, 1), got {test_fraction!r}")
    n = x.shape[0]
    n_test = round(n * float(test_fraction))
    if not 1 <= n_test <= n - 1:
        raise ValueError(
            f"test_fraction={test_fraction!r} of {n} samples leaves {n_test} test and "
            f"{n - n_test} train samples; both sets need at least one"
        )
    order = _permutation(n, seed, _SPLIT_STREAM)
    test, train = np.sort(order[:n_test]), np.sort(order[n_test:])
    labels = y.astype(np.int64)
    return DatasetSplit(x[train], labels[train], x[test], labels[test])


def load_digits_split(seed: int = 0, test_fraction: float = 0.2) -> DatasetSplit:
    """scikit-learn's handwritten digits (1797 8x8 images, 10 classes), split by ``seed``.

    The data ships inside scikit-learn, so nothing is downloaded. Pixels (0..16) are divided
    by 16, which is exact, giving float32 features in [0, 1]; labels are int64.

    >>> split = load_digits_split(seed=0)
    >>> split.x_train.shape, split.x_test.shape, split.x_train.dtype, float(split.x_train.max())
    ((1438, 64), (359, 64), dtype('float32'), 1.0)
    """
    try:
        from sklearn.datasets import load_digits  # only this loader needs scikit-learn
    except ImportError as error:
        raise ImportError(
            "load_digits_split needs scikit-learn (pip install scikit-learn); "
            "make_synthetic needs nothing extra"
        ) from error
    digits = load_digits()
    x = digits.data.astype(np.float32) / np.float32(16.0)
    return split_dataset(x, digits.target.astype(np.int64), seed=seed, test_fraction=test_fraction)


def make_synthetic(
    n: int, n_features: int, n_classes: int, seed: int = 0, *, separation: float = 3.0
) -> tuple[np.ndarray, np.ndarray]:
    """A small classification problem of Gaussian-like blobs, for fast tests.

    Each class has a center drawn uniformly from ``[-separation, separation)`` per feature;
    samples are their class center plus noise of mean 0 and variance 1 (the sum of 12 uniforms
    minus 6, which needs no libm and so is bit-identical everywhere). Classes are balanced
    (sizes differ by at most one) and the samples come shuffled. Returns float32 features
    ``(n, n_features)`` and int64 labels ``(n,)``.

    >>> x, y = make_synthetic(100, n_features=4, n_classes=3, seed=0)
    >>> x.shape, x.dtype, y.dtype, np.bincount(y).tolist()
    ((100, 4), dtype('float32'), dtype('int64'), [34, 33, 33])
    """
    n = _integer("n", n, 1)
    n_features = _integer("n_features", n_features, 1)
    n_classes = _integer("n_classes", n_classes, 2)
    seed = _integer("seed", seed, 0)
    if n < n_classes:
        raise ValueError(f"n={n} samples cannot cover n_classes={n_classes} classes")
    if isinstance(separation, bool) or not isinstance(separation, numbers.Real):
        raise TypeError(f"separation must be a number, got {separation!r}")
    if not 0.0 < separation < np.inf:
        raise ValueError(f"separation must be positive and finite, got {separation!r}")
    uniform = _uniform(n_classes * n_features + 12 * n * n_features, seed, _SYNTHETIC_STREAM)
    centers = (uniform[: n_classes * n_features] * 2.0 - 1.0) * float(separation)
    centers = centers.reshape(n_classes, n_features)
    terms = uniform[n_classes * n_features :].reshape(12, n, n_features)
    noise = terms[0].copy()
    for term in terms[1:]:  # one add at a time: a fixed order, unlike a SIMD reduction
        noise += term
    noise -= 6.0
    labels = (np.arange(n, dtype=np.int64) % n_classes)[_permutation(n, seed, _SYNTHETIC_STREAM)]
    features = (centers[labels] + noise).astype(np.float32)
    return features, labels


class BatchIterator:
    """Endless minibatches of sample indices, reshuffled every epoch, resumable exactly.

    Epoch ``e`` visits the samples in ``epoch_order(n, seed, e)``, cut into ``batch_size``
    pieces; the last piece is shorter unless ``drop_last`` (then the leftover samples are not
    seen that epoch). The position is just ``(epoch, batch_in_epoch)``: each epoch's order is a
    pure function of the seed and the epoch, so there is no generator state to save, and
    :meth:`state_dict` holds plain ints and bools.

    >>> batches = BatchIterator(5, batch_size=2, seed=0)
    >>> [len(next(batches)) for _ in range(4)], batches.epoch, batches.batch_in_epoch
    ([2, 2, 1, 2], 1, 1)
    """

    _KEYS = ("n", "batch_size", "seed", "drop_last", "epoch", "batch_in_epoch")

    def __init__(self, n: int, batch_size: int, seed: int = 0, *, drop_last: bool = False) -> None:
        self._n = _integer("n", n, 1)
        self._batch_size = _integer("batch_size", batch_size, 1)
        self._seed = _integer("seed", seed, 0)
        if not isinstance(drop_last, (bool, np.bool_)):
            raise TypeError(f"drop_last must be a bool, got {drop_last!r}")
        self._drop_last = bool(drop_last)
        if self._drop_last and self._batch_size > self._n:
            raise ValueError(
                f"batch_size={batch_size} > n={n} with drop_last=True would never yield a batch"
            )
        self._epoch = 0
        self._batch_in_epoch = 0
        self._order_cache: tuple[int, np.ndarray] | None = None

    n = property(lambda self: self._n, doc="Number of samples.")
    batch_size = property(lambda self: self._batch_size, doc="Samples per (full) batch.")
    seed = property(lambda self: self._seed, doc="Seed of every epoch's order.")
    drop_last = property(lambda self: self._drop_last, doc="Whether a short last batch is dropped.")
    epoch = property(lambda self: self._epoch, doc="The epoch the next batch comes from.")
    batch_in_epoch = property(
        lambda self: self._batch_in_epoch, doc="Index of the next batch within its epoch."
    )

    @property
    def batches_per_epoch(self) -> int:
        """How many batches one epoch yields."""
        if self._drop_last:
            return self._n // self._batch_size
        return -(-self._n // self._batch_size)

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> np.ndarray:
        """The next batch: an int64 array of sample indices (never raises StopIteration)."""
        if self._order_cache is None or self._order_cache[0] != self._epoch:
            self._order_cache = (self._epoch, epoch_order(self._n, self._seed, self._epoch))
        start = self._batch_in_epoch * self._batch_size
        batch = self._order_cache[1][start : start + self._batch_size].copy()
        self._batch_in_epoch += 1
        if self._batch_in_epoch == self.batches_per_epoch:
            self._epoch, self._batch_in_epoch = self._epoch + 1, 0
        return batch

    def state_dict(self) -> dict[str, Any]:
        """Configuration and position as plain Python values (JSON-serialisable).

        >>> BatchIterator(10, batch_size=4, seed=7).state_dict()
        {'n': 10, 'batch_size': 4, 'seed': 7, 'drop_last': False, 'epoch': 0, 'batch_in_epoch': 0}
        """
        return {
            "n": self._n,
            "batch_size": self._batch_size,
            "seed": self._seed,
            "drop_last": self._drop_last,
            "epoch": self._epoch,
            "batch_in_epoch": self._batch_in_epoch,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Move to the position saved by :meth:`state_dict`.

        The saved configuration must match this iterator's (a state from another dataset, batch
        size or seed would silently change the data order), else ValueError naming the field.

        >>> batches = BatchIterator(10, batch_size=4, seed=7)
        >>> resumed = BatchIterator(10, batch_size=4, seed=7)
        >>> _ = next(batches)
        >>> resumed.load_state_dict(batches.state_dict())
        >>> bool((next(resumed) == next(batches)).all())
        True
        """
        try:
            epoch, batch = self._parse_position(state)
        except TypeError as error:  # a malformed state is one bad argument value
            raise ValueError(str(error)) from None
        if batch >= self.batches_per_epoch:
            raise ValueError(
                f"BatchIterator state batch_in_epoch={batch} is outside "
                f"[0, {self.batches_per_epoch}) batches per epoch"
            )
        self._epoch, self._batch_in_epoch = epoch, batch

    def _parse_position(self, state: Any) -> tuple[int, int]:
        if not isinstance(state, dict):
            raise TypeError(f"BatchIterator state must be a dict, got {type(state).__name__}")
        missing = [key for key in self._KEYS if key not in state]
        unexpected = sorted(str(key) for key in state if key not in self._KEYS)
        if missing or unexpected:
            raise ValueError(
                f"BatchIterator state dict does not match: missing keys {missing}, unexpected "
                f"keys {unexpected}"
            )
        mine = self.state_dict()
        for key in ("n", "batch_size", "seed", "drop_last"):
            if type(state[key]) is not type(mine[key]) or state[key] != mine[key]:
                raise ValueError(
                    f"BatchIterator state was saved with {key}={state[key]!r}, but this iterator "
                    f"has {key}={mine[key]!r}"
                )
        epoch = _integer("BatchIterator state epoch", state["epoch"], 0)
        batch = _integer("BatchIterator state batch_in_epoch", state["batch_in_epoch"], 0)
        return epoch, batch
