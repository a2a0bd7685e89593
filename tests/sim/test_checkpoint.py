"""Checkpoint files: bit-exact round trips, rejection of damaged files, atomic writes."""

import io
import json
import math
import os
import zipfile

import numpy as np
import pytest

from sim import checkpoint
from sim.checkpoint import (
    SCHEMA_VERSION,
    CheckpointError,
    load_checkpoint,
    save_checkpoint,
)


def sample_arrays():
    rng = np.random.default_rng(0)
    float32 = rng.integers(0, 2**32, size=257, dtype=np.uint32).view(np.float32)  # NaN payloads too
    float32[:4] = [-0.0, np.inf, -np.inf, np.float32(1e-45)]
    return {
        "fp16_bits": np.arange(2**16, dtype=np.uint16),  # every FP16 pattern
        "fp32_bits": rng.integers(0, 2**32, size=(7, 5), dtype=np.uint32),
        "master": float32,
        "counts": np.array([np.iinfo(np.int64).min, -1, 0, np.iinfo(np.int64).max]),
        "mask": np.array([[True, False], [False, True]]),
        "scalar": np.array(3.5, dtype=np.float64),
        "empty": np.zeros((0, 3), dtype=np.float32),
        "fortran": np.asfortranarray(np.arange(12, dtype=np.int32).reshape(3, 4)),
        "big_endian": np.arange(5, dtype=">u4"),
        # names that would collide with np.savez's own parameters
        "file": np.ones(2, dtype=np.int8),
        "allow_pickle": np.zeros(1, dtype=np.uint8),
    }


META = {
    "step": 1234,
    "config": {"precision": "fp16", "lr": 0.1, "betas": [0.9, 0.999]},
    "scaler": {"scale": 65536.0, "history": [65536.0, 32768.0], "min_scale": None},
    "loss": [float("nan"), float("inf"), 1e-300, 2.0**-149],
    "note": "héllo ✓",
    "flag": True,
}


def assert_bit_identical(loaded, original):
    assert list(loaded) == sorted(original)
    for name, array in original.items():
        got = loaded[name]
        assert got.dtype == array.dtype and got.shape == array.shape, name
        assert np.ascontiguousarray(got).tobytes() == np.ascontiguousarray(array).tobytes(), name


def assert_meta_equal(loaded, original):
    # json round trip through strings compares NaN by spelling
    assert json.dumps(loaded, sort_keys=True) == json.dumps(original, sort_keys=True)


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "ckpt.npz"
    save_checkpoint(path, sample_arrays(), META)
    return path


def rewrite_entries(path, replace=(), remove=(), add=()):
    """Rebuild the zip at ``path`` with entries replaced, removed or added (a valid zip)."""
    with zipfile.ZipFile(path) as archive:
        entries = {name: archive.read(name) for name in archive.namelist()}
    entries.update(dict(replace))
    entries.update(dict(add))
    for name in remove:
        del entries[name]
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in entries.items():
            archive.writestr(name, data)


def npy_bytes(array):
    buffer = io.BytesIO()
    np.lib.format.write_array(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def json_entry(document):
    return npy_bytes(np.frombuffer(json.dumps(document).encode(), dtype=np.uint8))


def read_header(path):
    with np.load(path, allow_pickle=False) as npz:
        return json.loads(npz["__checkpoint__"].tobytes())


def leftovers(folder):
    return sorted(name for name in os.listdir(folder) if name.endswith(".tmp"))


# --- round trip ----------------------------------------------------------------------------------


def test_round_trip_is_bit_exact(saved):
    arrays, meta = load_checkpoint(saved)
    assert_bit_identical(arrays, sample_arrays())
    assert_meta_equal(meta, META)
    assert math.isnan(meta["loss"][0]) and meta["loss"][3] == 2.0**-149


def test_str_paths_and_plain_npz_reading(saved):
    arrays, _ = load_checkpoint(str(saved))
    with np.load(saved, allow_pickle=False) as npz:  # an ordinary .npz, no pickle inside
        assert np.array_equal(npz["fp16_bits"], arrays["fp16_bits"])
        assert {"__checkpoint__", "__meta__"} <= set(npz.files)
    assert read_header(saved)["schema_version"] == SCHEMA_VERSION


def test_meta_normalisation():
    path_meta = {"a": (1, 2), "b": np.float32(0.1), "c": np.int64(7), "d": np.bool_(True)}
    normal = checkpoint._plain_json(path_meta, "meta")
    assert normal == {"a": [1, 2], "b": float(np.float32(0.1)), "c": 7, "d": True}
    assert type(normal["c"]) is int and type(normal["d"]) is bool


def test_same_content_gives_identical_bytes(tmp_path):
    first, second = tmp_path / "a.npz", tmp_path / "b.npz"
    save_checkpoint(first, sample_arrays(), META)
    save_checkpoint(second, sample_arrays(), META)
    assert first.read_bytes() == second.read_bytes()


def test_overwrite_replaces_the_old_checkpoint(saved):
    save_checkpoint(saved, {"w": np.arange(3)}, {"step": 1})
    arrays, meta = load_checkpoint(saved)
    assert list(arrays) == ["w"] and meta == {"step": 1}
    assert leftovers(saved.parent) == []


# --- damaged files ---------------------------------------------------------------------------


@pytest.mark.parametrize("keep", [0, 1, 10, 100, 0.5, -1, -22, -23])
def test_truncated_file_is_rejected(saved, keep):
    data = saved.read_bytes()
    length = int(len(data) * keep) if isinstance(keep, float) else keep % len(data)
    saved.write_bytes(data[:length])
    with pytest.raises(CheckpointError, match=str(saved.name)):
        load_checkpoint(saved)


def test_flipped_byte_in_array_data_is_rejected(saved):
    data = bytearray(saved.read_bytes())
    position = data.index(np.arange(100, 120, dtype=np.uint16).tobytes())  # inside fp16_bits
    data[position] ^= 0x01
    saved.write_bytes(bytes(data))
    with pytest.raises(CheckpointError, match="corrupt"):
        load_checkpoint(saved)


def test_every_single_byte_flip_is_caught_or_harmless(tmp_path):
    path = tmp_path / "small.npz"
    arrays = {"w": np.arange(6, dtype=np.float32).reshape(2, 3), "b": np.array([7], np.uint16)}
    meta = {"step": 3, "scale": 1024.0}
    save_checkpoint(path, arrays, meta)
    original = path.read_bytes()
    for position in range(len(original)):
        damaged = bytearray(original)
        damaged[position] ^= 0xFF
        path.write_bytes(bytes(damaged))
        try:
            loaded, loaded_meta = load_checkpoint(path)
        except CheckpointError:
            continue
        # zip bookkeeping the contents do not depend on (timestamps, attributes) may change
        assert_bit_identical(loaded, arrays)
        assert loaded_meta == meta


def test_checksum_catches_a_consistently_rewritten_array(saved):
    tampered = sample_arrays()["fp32_bits"].copy()
    tampered[0, 0] ^= 1
    rewrite_entries(saved, replace={"fp32_bits.npy": npy_bytes(tampered)})
    with pytest.raises(CheckpointError, match="SHA-256 checksum mismatch"):
        load_checkpoint(saved)


def test_checksum_covers_meta(saved):
    rewrite_entries(saved, replace={"__meta__.npy": json_entry({**META, "step": 1235})})
    with pytest.raises(CheckpointError, match="checksum"):
        load_checkpoint(saved)


def test_wrong_schema_version_is_rejected(saved):
    header = {**read_header(saved), "schema_version": SCHEMA_VERSION + 1}
    rewrite_entries(saved, replace={"__checkpoint__.npy": json_entry(header)})
    with pytest.raises(CheckpointError, match=f"schema version {SCHEMA_VERSION + 1}"):
        load_checkpoint(saved)


@pytest.mark.parametrize(
    ("header_change", "match"),
    [
        ({"format": "something-else"}, "not a softfloat16-sim-checkpoint"),
        ({"schema_version": True}, "schema version"),
        ({"arrays": "fp16_bits"}, "array list"),
        ({"sha256": "00"}, "sha256"),
    ],
)
def test_malformed_header_is_rejected(saved, header_change, match):
    header = {**read_header(saved), **header_change}
    rewrite_entries(saved, replace={"__checkpoint__.npy": json_entry(header)})
    with pytest.raises(CheckpointError, match=match):
        load_checkpoint(saved)


def test_missing_and_extra_entries_are_rejected(saved, tmp_path):
    rewrite_entries(saved, remove=["mask.npy"])
    with pytest.raises(CheckpointError, match=r"missing \['mask'\]"):
        load_checkpoint(saved)
    other = tmp_path / "other.npz"
    save_checkpoint(other, {"w": np.arange(2)}, {})
    rewrite_entries(other, add={"sneaky.npy": npy_bytes(np.arange(2))})
    with pytest.raises(CheckpointError, match=r"unexpected \['sneaky'\]"):
        load_checkpoint(other)


def test_other_files_are_rejected(tmp_path):
    plain = tmp_path / "plain.npz"
    np.savez(plain, w=np.arange(3))
    with pytest.raises(CheckpointError, match="no '__checkpoint__' entry"):
        load_checkpoint(plain)
    single = tmp_path / "single.npy"
    np.save(single, np.arange(3))
    with pytest.raises(CheckpointError, match="single .npy array"):
        load_checkpoint(single)
    for name, content in [("empty.npz", b""), ("text.npz", b"hello"), ("pickle.npz", b"\x80\x04.")]:
        with pytest.raises(CheckpointError, match=name):
            (tmp_path / name).write_bytes(content)
            load_checkpoint(tmp_path / name)
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "absent.npz")
    assert issubclass(CheckpointError, ValueError)


# --- atomic writes -----------------------------------------------------------------------------


def test_unserialisable_meta_leaves_the_old_file_intact(saved):
    before = saved.read_bytes()
    with pytest.raises(TypeError, match=r"meta\['bad'\]"):
        save_checkpoint(saved, {"w": np.arange(3)}, {"bad": object()})
    assert saved.read_bytes() == before
    assert leftovers(saved.parent) == []


@pytest.mark.parametrize("failing", ["fsync", "replace", "write_array"])
def test_failure_while_writing_leaves_the_old_file_intact(saved, monkeypatch, failing):
    before = saved.read_bytes()

    def fail(*args, **kwargs):
        raise OSError(f"simulated {failing} failure")

    target = np.lib.format if failing == "write_array" else os
    monkeypatch.setattr(target, failing, fail)
    with pytest.raises(OSError, match="simulated"):
        save_checkpoint(saved, {"w": np.arange(3)}, {"step": 2})
    monkeypatch.undo()
    assert saved.read_bytes() == before
    assert leftovers(saved.parent) == []
    load_checkpoint(saved)


def test_failure_on_a_new_path_leaves_nothing(tmp_path, monkeypatch):
    def fail(descriptor):
        raise OSError("disk")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="disk"):
        save_checkpoint(tmp_path / "new.npz", {"w": np.arange(3)}, {})
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize(
    ("arrays", "meta", "error", "match"),
    [
        ({"w": np.array([object()])}, {}, TypeError, "dtype object"),
        ({"w": np.array(["text"])}, {}, TypeError, "dtype"),
        ({"w": [1, 2]}, {}, TypeError, "numpy array"),
        ({"__meta__": np.arange(2)}, {}, ValueError, "reserved"),
        ({"a/b": np.arange(2)}, {}, ValueError, "not allowed"),
        ({"": np.arange(2)}, {}, ValueError, "not allowed"),
        ({1: np.arange(2)}, {}, TypeError, "strings"),
        ({}, {1: "x"}, TypeError, "non-string key"),
        ({}, {"x": {2.5}}, TypeError, "set"),
        ({}, [("step", 1)], TypeError, "meta must be a dict"),
        ([np.arange(2)], {}, TypeError, "mapping"),
    ],
)
def test_bad_arguments_are_refused_before_writing(tmp_path, arrays, meta, error, match):
    with pytest.raises(error, match=match):
        save_checkpoint(tmp_path / "x.npz", arrays, meta)
    assert os.listdir(tmp_path) == []
