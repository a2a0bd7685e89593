"""Datasets and minibatch order: shapes, determinism, exact resumption, bad arguments."""

import hashlib
import json

import numpy as np
import pytest

from sim.data import (
    BatchIterator,
    epoch_order,
    load_digits_split,
    make_synthetic,
    split_dataset,
)


def sha256(*arrays):
    return hashlib.sha256(b"".join(np.ascontiguousarray(a).tobytes() for a in arrays)).hexdigest()


# --- digits ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def digits():
    pytest.importorskip("sklearn")
    return load_digits_split(seed=0)


def test_digits_split_shapes_types_and_range(digits):
    assert digits.x_train.shape == (1438, 64) and digits.x_test.shape == (359, 64)
    assert digits.y_train.shape == (1438,) and digits.y_test.shape == (359,)
    assert digits.x_train.dtype == np.float32 and digits.y_train.dtype == np.int64
    for x in (digits.x_train, digits.x_test):
        assert x.min() == 0.0 and x.max() == 1.0
        assert np.array_equal(x * 16, np.round(x * 16))  # pixels / 16 exactly
    assert set(np.unique(digits.y_train)) == set(range(10)) == set(np.unique(digits.y_test))


def test_digits_split_is_a_partition_of_the_dataset(digits):
    from sklearn.datasets import load_digits

    data = load_digits()
    rows = np.concatenate([digits.x_train, digits.x_test]) * 16
    labels = np.concatenate([digits.y_train, digits.y_test])
    ours = sorted(zip(map(bytes, rows.astype(np.uint8)), labels.tolist(), strict=True))
    theirs = sorted(zip(map(bytes, data.data.astype(np.uint8)), data.target.tolist(), strict=True))
    assert ours == theirs


def test_digits_split_is_fixed_by_the_seed(digits):
    again = load_digits_split(seed=0)
    assert all(np.array_equal(a, b) for a, b in zip(digits, again, strict=True))
    other = load_digits_split(seed=1)
    assert not np.array_equal(digits.y_test, other.y_test)
    smaller = load_digits_split(seed=0, test_fraction=0.5)
    assert smaller.x_test.shape == (898, 64)  # round(1797 * 0.5)


def test_digits_split_is_stable_across_numpy_versions(digits):
    # Golden digest: only PCG64's raw stream and a sort decide the split.
    assert sha256(digits.y_test) == (
        "def54938bd0e1850d9bced46aeb759086456944090a903b869b9874a69011d90"
    )


# --- split_dataset -----------------------------------------------------------------------------


def test_split_keeps_original_order_and_covers_everything():
    x = np.arange(40, dtype=np.float32).reshape(20, 2)
    y = np.arange(20) % 3
    split = split_dataset(x, y, seed=4, test_fraction=0.25)
    assert split.x_test.shape == (5, 2) and split.x_train.shape == (15, 2)
    train_ids, test_ids = split.x_train[:, 0] // 2, split.x_test[:, 0] // 2
    assert np.all(np.diff(train_ids) > 0) and np.all(np.diff(test_ids) > 0)
    assert sorted(np.concatenate([train_ids, test_ids]).tolist()) == list(range(20))
    assert np.array_equal(split.y_train, (train_ids.astype(np.int64)) % 3)


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        ((np.zeros(5), np.zeros(5, int)), {}, ValueError, "2-D"),
        ((np.zeros((5, 2)), np.zeros(4, int)), {}, ValueError, "shape"),
        ((np.zeros((5, 2)), np.zeros(5)), {}, TypeError, "integer class labels"),
        ((np.zeros((5, 2)), np.zeros(5, int)), {"test_fraction": 0.0}, ValueError, "test_fraction"),
        ((np.zeros((5, 2)), np.zeros(5, int)), {"test_fraction": 1.0}, ValueError, "test_fraction"),
        ((np.zeros((5, 2)), np.zeros(5, int)), {"test_fraction": "a"}, TypeError, "test_fraction"),
        ((np.zeros((5, 2)), np.zeros(5, int)), {"test_fraction": 0.01}, ValueError, "at least one"),
        ((np.zeros((5, 2)), np.zeros(5, int)), {"seed": -1}, ValueError, "seed"),
        ((np.zeros((5, 2)), np.zeros(5, int)), {"seed": 1.5}, TypeError, "seed"),
    ],
)
def test_split_rejects_bad_arguments(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        split_dataset(*args, **kwargs)


def test_digits_rejects_bad_arguments():
    pytest.importorskip("sklearn")
    with pytest.raises(ValueError, match="test_fraction"):
        load_digits_split(test_fraction=1.5)


# --- make_synthetic ----------------------------------------------------------------------------


def test_synthetic_shapes_balance_and_determinism():
    x, y = make_synthetic(101, n_features=5, n_classes=4, seed=3)
    assert x.shape == (101, 5) and x.dtype == np.float32
    assert y.shape == (101,) and y.dtype == np.int64
    assert np.bincount(y).tolist() == [26, 25, 25, 25]
    again = make_synthetic(101, n_features=5, n_classes=4, seed=3)
    assert np.array_equal(x, again[0]) and np.array_equal(y, again[1])
    other = make_synthetic(101, n_features=5, n_classes=4, seed=4)
    assert not np.array_equal(x, other[0])
    assert not np.array_equal(y, np.sort(y))  # shuffled, not grouped by class


def test_synthetic_is_stable_across_numpy_versions_and_machines():
    x, y = make_synthetic(200, 8, 4, seed=5)
    assert sha256(x, y) == "a8b866d4656db9f135a6177f51cb709ff156263fb78b81d575ed6f4045b61fc4"


def test_synthetic_is_learnable_blobs_with_unit_noise():
    x, y = make_synthetic(2000, n_features=8, n_classes=4, seed=0)
    means = np.stack([x[y == label].mean(axis=0) for label in range(4)])
    noise = x - means[y]
    assert abs(noise.mean()) < 0.05 and abs(noise.var() - 1.0) < 0.05
    predicted = ((x[:, None, :] - means[None]) ** 2).sum(axis=-1).argmin(axis=1)
    assert (predicted == y).mean() > 0.9  # a nearest-mean classifier separates the classes


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"n": 0}, ValueError),
        ({"n": 2, "n_classes": 3}, ValueError),
        ({"n_features": 0}, ValueError),
        ({"n_classes": 1}, ValueError),
        ({"n": 10.0}, TypeError),
        ({"n": True}, TypeError),
        ({"seed": -2}, ValueError),
        ({"separation": 0.0}, ValueError),
        ({"separation": float("inf")}, ValueError),
    ],
)
def test_synthetic_rejects_bad_arguments(kwargs, error):
    arguments = {"n": 10, "n_features": 2, "n_classes": 3, "seed": 0, **kwargs}
    with pytest.raises(error):
        make_synthetic(**arguments)


# --- epoch_order and BatchIterator -------------------------------------------------------------


def test_epoch_order_is_a_fresh_permutation_each_epoch():
    orders = [epoch_order(50, seed=9, epoch=epoch) for epoch in range(3)]
    for order in orders:
        assert order.dtype == np.int64 and sorted(order.tolist()) == list(range(50))
    assert not np.array_equal(orders[0], orders[1]) and not np.array_equal(orders[1], orders[2])
    assert np.array_equal(orders[2], epoch_order(50, 9, 2))
    assert not np.array_equal(orders[0], epoch_order(50, 10, 0))
    assert sha256(epoch_order(1000, 0, 0)) == (
        "c8e00856eeebd18502ffaeb1a0b9a33929b2d29d44ebd77320b6d7bc6656a028"
    )


def test_every_epoch_visits_every_sample_once():
    batches = BatchIterator(10, batch_size=3, seed=1)
    assert batches.batches_per_epoch == 4
    for epoch in range(3):
        assert batches.epoch == epoch and batches.batch_in_epoch == 0
        chunks = [next(batches) for _ in range(4)]
        assert [len(chunk) for chunk in chunks] == [3, 3, 3, 1]
        assert np.array_equal(np.concatenate(chunks), epoch_order(10, 1, epoch))
    assert batches.epoch == 3


def test_drop_last_drops_the_short_batch():
    batches = BatchIterator(10, batch_size=3, seed=1, drop_last=True)
    assert batches.batches_per_epoch == 3
    chunks = [next(batches) for _ in range(6)]
    assert all(len(chunk) == 3 for chunk in chunks)
    assert np.array_equal(np.concatenate(chunks[:3]), epoch_order(10, 1, 0)[:9])
    assert np.array_equal(np.concatenate(chunks[3:]), epoch_order(10, 1, 1)[:9])


def test_batches_are_copies():
    batches = BatchIterator(6, batch_size=3, seed=0)
    first = next(batches)
    assert first.flags.owndata  # the caller may modify it without touching the epoch's order
    first[:] = -1
    batches.load_state_dict({**batches.state_dict(), "batch_in_epoch": 0})
    assert np.array_equal(next(batches), epoch_order(6, 0, 0)[:3])


@pytest.mark.parametrize("stop", [0, 1, 3, 4, 5, 9])
def test_resume_gives_exactly_the_same_stream(stop):
    whole = BatchIterator(10, batch_size=3, seed=2)
    expected = [next(whole) for _ in range(12)]
    first = BatchIterator(10, batch_size=3, seed=2)
    seen = [next(first) for _ in range(stop)]
    state = json.loads(json.dumps(first.state_dict()))
    resumed = BatchIterator(10, batch_size=3, seed=2)
    resumed.load_state_dict(state)
    seen += [next(resumed) for _ in range(12 - stop)]
    assert all(np.array_equal(a, b) for a, b in zip(seen, expected, strict=True))


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"n": 11}, "n=11"),
        ({"batch_size": 4}, "batch_size=4"),
        ({"seed": 3}, "seed=3"),
        ({"drop_last": True}, "drop_last=True"),
        ({"drop_last": 0}, "drop_last=0"),
        ({"epoch": -1}, "epoch"),
        ({"epoch": 1.0}, "epoch"),
        ({"batch_in_epoch": 4}, "batch_in_epoch=4"),
        ({"extra": 1}, "unexpected keys"),
    ],
)
def test_load_state_dict_rejects_mismatches(change, match):
    batches = BatchIterator(10, batch_size=3, seed=2)
    next(batches)
    before = batches.state_dict()
    with pytest.raises(ValueError, match=match):
        batches.load_state_dict({**before, **change})
    assert batches.state_dict() == before
    with pytest.raises(ValueError, match="missing keys"):
        batches.load_state_dict({"n": 10})
    with pytest.raises(ValueError, match="must be a dict"):
        batches.load_state_dict(None)


@pytest.mark.parametrize(
    ("args", "kwargs", "error"),
    [
        ((0, 1), {}, ValueError),
        ((5, 0), {}, ValueError),
        ((5, 2, -1), {}, ValueError),
        ((5, 2.0), {}, TypeError),
        ((5, 6), {"drop_last": True}, ValueError),
        ((5, 2), {"drop_last": "yes"}, TypeError),
    ],
)
def test_batch_iterator_rejects_bad_arguments(args, kwargs, error):
    with pytest.raises(error):
        BatchIterator(*args, **kwargs)


def test_batch_larger_than_dataset_without_drop_last_is_the_whole_epoch():
    batches = BatchIterator(4, batch_size=10, seed=0)
    assert batches.batches_per_epoch == 1
    assert np.array_equal(next(batches), epoch_order(4, 0, 0))
    assert batches.epoch == 1
