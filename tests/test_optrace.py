"""softfloat16.optrace: the one op-trace schema (sim's cross-check dumps, softfloat16.torch's
traces), its reader and writer, and the one table of dtypes and format names.

Oracles: numpy's and ml_dtypes' own dtypes (names, widths), softfloat16's Format objects, and
files written literally in the schema-version-1 layout (as the first dumps and traces were), so a
change of the layout fails here.
"""
from __future__ import annotations

import re
import zipfile

import numpy as np
import pytest

import softfloat16 as sf
from softfloat16.npzfile import load_npz, save_npz
from softfloat16.optrace import (
    DUMP_KIND, FILE_KINDS, SCHEMA_VERSION, TRACE_KIND, VALUE_FORMATS, OpTrace, OpTraceError, TracedOp,
    format_of_dtype, load_op_trace, save_op_trace, storage_dtype,
)

ml_dtypes = pytest.importorskip("ml_dtypes")

BITS = {"fp16", "bf16", "fp32", "fp64", "fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fnuz", "fp8_e5m2fnuz", "e8m0"}
VALUES = {"bool", "uint8", "int8", "int16", "int32", "int64", "complex64", "complex128"}


def test_the_table_names_every_format_once_and_round_trips_its_dtype():
    assert set(VALUE_FORMATS) == BITS | VALUES
    assert {name for name, value in VALUE_FORMATS.items() if value.bits} == BITS
    for name, value in VALUE_FORMATS.items():
        assert value.name == name and format_of_dtype(value.dtype_name) == name
        assert storage_dtype(name) == value.storage
        if value.bits:  # bit patterns: the unsigned integer of the dtype's own width
            dtype = np.dtype(getattr(ml_dtypes, value.dtype_name, value.dtype_name))  # float16: numpy's own
            assert value.storage == np.dtype(f"u{dtype.itemsize}") and format_of_dtype(dtype) == name
        else:  # values: the dtype itself
            assert value.storage == np.dtype(value.dtype_name) and format_of_dtype(value.storage) == name
    # Every bit format but fp64 is a softfloat16 format of the same name and storage.
    for name in BITS - {"fp64"}:
        fmt = VALUE_FORMATS[name].format
        assert fmt is sf.format(name) and np.dtype(fmt.dtype) == storage_dtype(name)
        assert fmt.float_dtype_name == VALUE_FORMATS[name].dtype_name
    assert VALUE_FORMATS["fp64"].format is None and format_of_dtype("float4_e2m1fn") is None
    with pytest.raises(ValueError, match="unknown op-trace format 'fp128'; accepted: fp16, bf16"):
        storage_dtype("fp128")


def _v1_file(path, kind=DUMP_KIND, **changes):
    """A file in the schema-version-1 layout, written literally (not through save_op_trace)."""
    meta = {
        "kind": kind, "schema_version": 1, "side": "torch", "mode": "exact", "device": {"device": "cpu"},
        "settings": {}, "config": {"precision": "fp16"}, "steps": 2,
        "ops": [
            {"step": -1, "name": "init", "kind": "source", "impl": "data", "attrs": {}, "inputs": [],
             "outputs": [["w", "fp16", "v0"]]},
            {"step": 1, "name": "fc1.relu", "kind": "relu", "impl": "sim", "attrs": {"x": [1, 2.5]},
             "inputs": [["x", "fp16", "v0"]], "outputs": [["out", "fp16", "v1"], ["n", "int64", "v2"]]},
        ],
    }
    arrays = {"v0": np.array([0xBC00, 0x3C00], np.uint16), "v1": np.array([0, 0x3C00], np.uint16),
              "v2": np.array(1, np.int64)}
    meta.update(changes)
    save_npz(path, arrays, meta)
    return path


def test_a_schema_1_file_written_literally_loads_and_saves_back_byte_for_byte(tmp_path):
    path = _v1_file(tmp_path / "v1.npz")
    trace = load_op_trace(path)
    assert (trace.kind, trace.side, trace.mode, trace.steps, trace.config) == (DUMP_KIND, "torch", "exact", 2,
                                                                               {"precision": "fp16"})
    relu = trace.ops[1]
    assert (relu.step, relu.name, relu.kind, relu.impl, relu.attrs) == (1, "fc1.relu", "relu", "sim", {"x": [1, 2.5]})
    np.testing.assert_array_equal(relu.inputs[0][2], [0xBC00, 0x3C00])
    assert relu.outputs[1][2].shape == () and relu.outputs[1][1] == "int64"
    again = tmp_path / "again.npz"
    save_op_trace(again, trace)
    assert again.read_bytes() == path.read_bytes()


def test_each_distinct_array_is_stored_once_and_0_d_stays_0_d(tmp_path):
    x = np.array([1, 2], np.uint16)
    ops = [TracedOp(0, "a", "aten", "torch-cpu", {}, [("self", "fp16", x)], [("out", "bf16", x.copy())]),
           TracedOp(1, "b", "aten", "torch-cpu", {}, [("self", "bf16", x[::-1][::-1])],
                    [("out", "fp32", np.array(7, np.uint32))])]
    path = tmp_path / "t.npz"
    save_op_trace(path, OpTrace(ops, "emulator", "native", {}, {}, {}, kind=TRACE_KIND))
    arrays, meta = load_npz(path)
    assert sorted(arrays) == ["v0", "v1"] and meta["steps"] == 2 and meta["schema_version"] == SCHEMA_VERSION
    assert load_op_trace(path, TRACE_KIND).ops[1].outputs[0][2].shape == ()


def one_line_error(path, kind=None) -> str:
    """The error of reading ``path``: one line that names the file."""
    with pytest.raises(OpTraceError) as caught:
        load_op_trace(path, kind)
    message = str(caught.value)
    assert "\n" not in message and str(path) in message, message
    return message


@pytest.mark.parametrize(("change", "message"), [
    ({"schema_version": 2}, "cross-check dump schema version 2; this code reads version 1"),
    ({"schema_version": True}, "schema version True"),
    ({"kind": "sim-train"}, "not a cross-check dump of python -m sim crosscheck or a torch trace of "
                            "softfloat16.torch.record: a file of kind 'sim-train'"),
    ({"side": "gpu"}, "side must be one of"),
    ({"steps": -1}, "steps must be a non-negative integer"),
    ({"config": []}, "config must be an object"),
    ({"ops": {}}, "ops must be a list"),
    ({"ops": [{"step": 0}]}, "op 0 must have exactly the fields"),
    ({"ops": [{"step": -2, "name": "a", "kind": "k", "impl": "", "attrs": {}, "inputs": [], "outputs": []}]},
     "op 0: step must be an integer >= -1"),
    ({"ops": [{"step": 0, "name": "", "kind": "k", "impl": "", "attrs": {}, "inputs": [], "outputs": []}]},
     "name and kind must be non-empty strings"),
    ({"ops": [{"step": 0, "name": "a", "kind": "k", "impl": "", "attrs": {}, "inputs": [["x", "fp16"]],
               "outputs": []}]}, r"op 0 \(a\) input: malformed entry"),
    ({"ops": [{"step": 0, "name": "a", "kind": "k", "impl": "", "attrs": {}, "inputs": [["x", "fp17", "v0"]],
               "outputs": []}]}, "unknown format 'fp17'"),
    ({"ops": [{"step": 0, "name": "a", "kind": "k", "impl": "", "attrs": {}, "inputs": [["x", "fp32", "v0"]],
               "outputs": []}]}, "array 'v0' has dtype uint16, but fp32 needs uint32"),
    ({"ops": [{"step": 0, "name": "a", "kind": "k", "impl": "", "attrs": {}, "inputs": [["x", "fp16", "v9"]],
               "outputs": []}]}, "array 'v9' is missing from the file"),
    ({"ops": []}, r"arrays \['v0', 'v1', 'v2'\] are not referenced by any op"),
], ids=["version", "version-bool", "kind", "side", "steps", "config", "ops", "op-fields", "step", "name",
        "entry", "format", "dtype", "missing", "unreferenced"])
def test_inconsistent_contents_give_one_line_naming_the_file(tmp_path, change, message):
    path = _v1_file(tmp_path / "bad.npz", **change)
    assert re.search(message, one_line_error(path))


def test_missing_fields_foreign_kinds_and_damaged_bytes(tmp_path):
    path = _v1_file(tmp_path / "v1.npz")
    _, meta = load_npz(path)
    del meta["ops"], meta["mode"]
    lacking = tmp_path / "lacking.npz"
    save_npz(lacking, {}, meta)
    assert "metadata lacks ['mode', 'ops']" in one_line_error(lacking)
    # Asked for one kind, given the other: both named.
    message = one_line_error(path, TRACE_KIND)
    assert message.endswith(f"not {FILE_KINDS[TRACE_KIND][1]}: {FILE_KINDS[DUMP_KIND][1]}")
    data = path.read_bytes()
    with zipfile.ZipFile(path) as archive:  # one bit of the first array's data flipped
        info = archive.infolist()[0]
    at = info.header_offset + 30 + len(info.filename) + len(info.extra) + 130
    cases = {"truncated.npz": data[: len(data) // 2], "flipped.npz": data[:at] + bytes([data[at] ^ 1]) + data[at + 1:],
             "text.npz": b'{"not": "a zip"}'}
    for name, content in cases.items():
        damaged = tmp_path / name
        damaged.write_bytes(content)
        assert one_line_error(damaged, DUMP_KIND).startswith(
            "cannot read the cross-check dump: ")
        assert one_line_error(damaged).startswith("cannot read the op trace: ")
    with pytest.raises(FileNotFoundError):
        load_op_trace(tmp_path / "absent.npz")


def test_the_writer_refuses_what_the_reader_would_before_writing(tmp_path):
    path = tmp_path / "t.npz"
    good = [TracedOp(0, "a", "aten", "torch-cpu", {}, [], [("out", "fp16", np.zeros(2, np.uint16))])]
    bad = [TracedOp(0, "a", "aten", "torch-cpu", {}, [], [("out", "fp16", np.zeros(2, np.float16))])]
    with pytest.raises(ValueError, match=r"op 0 \(a\) 'out': a float16 array for fp16, which needs uint16"):
        save_op_trace(path, OpTrace(bad, "torch", "native", {}, {}, {}, kind=TRACE_KIND))
    with pytest.raises(ValueError, match="kind: expected one of"):
        save_op_trace(path, OpTrace(good, "torch", "native", {}, {}, {}))
    with pytest.raises(ValueError, match="side: expected one of torch, emulator, got 'gpu'"):
        save_op_trace(path, OpTrace(good, "gpu", "native", {}, {}, {}, kind=TRACE_KIND))
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="kind: expected one of .* or None, got 'sim-train'"):
        load_op_trace(path, "sim-train")
