"""python -m softfloat16: explain, op, verify, and usage errors (exit status 2, no traceback)."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import softfloat16 as sf
from softfloat16.__main__ import main


def run(capsys, *argv: str) -> tuple[int, str, str]:
    try:
        code = main(list(argv))
    except SystemExit as exit_:  # argparse
        code = exit_.code
    out, err = capsys.readouterr()
    return code, out, err


def test_explain_normal(capsys):
    code, out, _ = run(capsys, "explain", "0x3c01", "--format", "fp16")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("fp16 0x3c01 = 0 01111 0000000001")
    assert "  sign      0 (+)" in lines
    assert "  exponent  01111 = 15, unbiased 0" in lines
    assert "  fraction  0000000001 = 1/1024" in lines
    assert "  class     normal" in lines
    assert "  value     1.0009765625 = 1025/1024 = 1025 * 2^-10" in lines
    assert "  ulp       0.0009765625 = 2^-10" in lines
    assert "  next up   0x3c02 = 1.001953125" in lines
    assert "  next down 0x3c00 = 1.0" in lines


@pytest.mark.parametrize("argv, expected", [
    (["0x0001"], ["class     subnormal", "value     0.000000059604644775390625 = 1/16777216",
                  "next down 0x0000 = 0.0", "next up   0x0002"]),
    (["0x8001"], ["next up   0x8000 = -0.0", "next down 0x8002"]),
    (["0x8000"], ["class     zero", "value     -0.0", "next up   0x0001", "next down 0x8001"]),
    (["0x7bff"], ["value     65504.0", "ulp       32.0 = 2^5", "next up   0x7c00 = inf"]),
    (["0xfc00"], ["class     inf", "value     -inf", "next up   0xfbff = -65504.0"]),
    (["0x7d01"], ["class     snan", "+sNaN (payload 0x101)"]),
    (["0x7f80", "-f", "bf16"], ["bf16 0x7f80 = 0 11111111 0000000", "class     inf"]),
    (["0x3f800001", "--format", "float32"], ["value     1.00000011920928955078125 = 8388609/8388608",
                                             "ulp       0.00000011920928955078125 = 2^-23"]),
])
def test_explain_cases(capsys, argv, expected):
    code, out, _ = run(capsys, "explain", *argv)
    assert code == 0
    for text in expected:
        assert text in out, (text, out)


def test_op_add_rtz(capsys):
    code, out, _ = run(capsys, "op", "add", "fp16", "0x3c00", "0x0001", "--rounding", "rtz")
    assert code == 0
    assert "  result  0x3c00 = 1.0 (normal)" in out
    assert "  exact   1.000000059604644775390625" in out
    assert "  flags   INEXACT" in out


@pytest.mark.parametrize("argv, result, flags", [
    (["add", "fp16", "0x3c00", "0x0001", "-r", "rup"], "0x3c01", "INEXACT"),
    (["sqrt", "fp16", "0xbc00", "--nan", "x86"], "0xfe00", "INVALID"),
    (["sqrt", "fp16", "0xbc00"], "0x7e00", "INVALID"),
    (["div", "fp16", "0x3c00", "0x0000"], "0x7c00", "DIVIDE_BY_ZERO"),
    (["mul", "fp16", "0x7bff", "0x4000", "-r", "rtz"], "0x7bff", "OVERFLOW INEXACT"),
    (["mul", "fp16", "0x0400", "0x3800", "--ftz"], "0x0000", "UNDERFLOW INEXACT"),  # 2^-15: tiny
    (["mul", "fp16", "0x0400", "0x3800"], "0x0200", "(none)"),                      # exact subnormal
    (["add", "fp16", "0x0001", "0x0000", "--daz"], "0x0000", "(none)"),
    (["add", "fp16", "0x3c00", "0xbc00", "-r", "rdn"], "0x8000", "(none)"),
    (["fma", "bf16", "0x3f80", "0x3f80", "0x3f80"], "0x4000", "(none)"),
    (["convert", "fp32", "0x3f800001", "--to", "bf16", "-r", "rup"], "0x3f81", "INEXACT"),
])
def test_op_results_and_flags(capsys, argv, result, flags):
    code, out, _ = run(capsys, "op", *argv)
    assert code == 0
    assert f"  result  {result} " in out
    assert f"  flags   {flags}" in out


def test_op_tininess_before_differs(capsys):
    # (1 - 2^-10) * (1 + 2^-10) * 2^-14 = 2^-14 (1 - 2^-20): below min normal (tiny before
    # rounding) but 1 - 2^-20 rounds to 1 at 11 bits (not tiny after); the result is min normal
    args = ["op", "mul", "fp16", "0x3bfe", "0x0401", "-r", "rup"]
    after = run(capsys, *args)[1]
    assert "result  0x0400" in after and "flags   INEXACT" in after
    assert "flags   UNDERFLOW INEXACT" in run(capsys, *args, "--tininess", "before")[1]


def test_op_comparison(capsys):
    code, out, _ = run(capsys, "op", "lt", "fp16", "0xbc00", "0x3c00")
    assert code == 0 and "  result  True" in out


@pytest.mark.parametrize("argv, message", [
    (["explain", "0x3c01", "--format", "fp12"], "unknown format 'fp12'"),
    (["explain", "0xzz"], "not a bit pattern"),
    (["explain", "0x10000"], "does not fit in 16 bits"),
    (["op", "add", "fp16", "0x3c00", "0x1", "--rounding", "up-ish"], "unknown rounding"),
    (["op", "pow", "fp16", "0x3c00", "0x1"], "invalid choice"),
    (["op", "add", "fp16", "0x3c00"], "add takes 2 operand(s), got 1"),
    (["op", "convert", "fp16", "0x3c00"], "needs --to"),
    (["op", "add", "fp16", "0x3c00", "0x1", "--nan", "vax"], "invalid choice"),
    (["verify", "--format", "fp16", "--op", "pow"], "invalid choice"),
    (["verify", "--format", "fp32", "--op", "add"], "verified for fp16, bf16, fp8_e5m2"),
    (["verify", "--format", "fp16", "--op", "add", "--exhaustive", "--sample", "5"], "not allowed"),
    (["verify", "--format", "fp16", "--op", "fma", "--fma-c", "0x3c00,xyz", "--sample", "10"], "--fma-c"),
    ([], "required"),
])
def test_usage_errors_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_entry_point_error_has_no_traceback():
    root = os.path.dirname(os.path.dirname(os.path.abspath(sf.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    for argv in (["explain", "0x3c0g"], ["op", "add", "bf17", "0x1", "0x2"]):
        done = subprocess.run([sys.executable, "-m", "softfloat16", *argv], capture_output=True,
                              text=True, timeout=120, env=env)
        assert done.returncode == 2
        assert "error:" in done.stderr and "Traceback" not in done.stderr
    done = subprocess.run([sys.executable, "-m", "softfloat16", "explain", "0x3c00"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 0 and "value     1.0" in done.stdout


def test_verify_command(capsys, tmp_path):
    checkpoint = tmp_path / "ck.json"
    code, out, err = run(capsys, "verify", "--format", "fp16", "--op", "add", "--rounding", "rtz",
                         "--sample", "200000", "--workers", "1", "--checkpoint", str(checkpoint))
    assert code == 0
    assert out.startswith("verify add fp16 rtz (sample of 200000, seed 0): 200000 cases, 0 mismatches")
    assert checkpoint.exists()
    code, out, err = run(capsys, "verify", "--format", "fp16", "--op", "add", "--rounding", "rtz",
                         "--sample", "200000", "--workers", "1", "--checkpoint", str(checkpoint), "--progress")
    assert code == 0 and "chunks resumed from a checkpoint: 1" in out and "100.0%" in err


# --- bit patterns and rounding names as a new user types them (no ambiguous input) -------------

@pytest.mark.parametrize("text, value", [("0x3c00", 0x3C00), ("0X3C00", 0x3C00), ("0b0011110000000000", 0x3C00),
                                         ("15360", 0x3C00), ("7", 7), ("0", 0)])
def test_bit_patterns_hex_binary_and_decimal(capsys, text, value):
    code, out, err = run(capsys, "explain", text)
    assert code == 0 and out.startswith(f"fp16 {value:#06x} = ")


def test_bare_digits_are_decimal_and_the_note_shows_the_hex_reading(capsys):
    code, out, err = run(capsys, "explain", "1000")
    assert code == 0 and out.startswith("fp16 0x03e8 = ")  # 1000 decimal, not 0x1000
    assert "1000 read as decimal = 0x3e8" in err and "0x1000" in err
    code, out, err = run(capsys, "explain", "15360")
    assert code == 0 and "does not fit" not in err and out.startswith("fp16 0x3c00")


@pytest.mark.parametrize("text", ["3c01", "0x", "-1", "0b102", "1e3", "+0x3c00"])
def test_unreadable_bit_patterns_are_refused_with_the_accepted_forms(capsys, text):
    code, out, err = run(capsys, "explain", text)
    assert code == 2 and "0x... hexadecimal, 0b... binary, or a decimal integer" in err and "Traceback" not in err
    if text == "3c01":
        assert "for hexadecimal write 0x3c01" in err


def test_explain_help_states_the_number_syntax(capsys):
    code, out, _ = run(capsys, "explain", "--help")
    assert code == 0 and "0b... binary" in out and "decimal" in out


@pytest.mark.parametrize("alias, name", [("nearest", "rne"), ("toward_zero", "rtz"), ("up", "rup"), ("Floor", "rdn")])
def test_the_cli_takes_the_rounding_aliases_of_the_python_api(capsys, alias, name):
    code, out, _ = run(capsys, "op", "add", "fp16", "0x3c00", "0x0001", "--rounding", alias)
    assert code == 0 and f"rounding={name}" in out
    assert out == run(capsys, "op", "add", "fp16", "0x3c00", "0x0001", "--rounding", name)[1]


def test_a_rounding_error_lists_names_and_aliases_in_both_interfaces(capsys):
    code, _, err = run(capsys, "op", "add", "fp16", "0x3c00", "0x1", "--rounding", "near")
    with pytest.raises(ValueError) as api_error:
        sf.fp16.add(0x3C00, 1, rounding="near")
    for text in (err, str(api_error.value)):
        assert "rne (nearest_even, nearest, ties_to_even)" in text and "rup (up, toward_positive, ceil)" in text


@pytest.mark.parametrize("argv", [["softfloat16", "explain", "0x3c00"], ["sim", "train", "--help"],
                                  ["sim.crosscheck", "--help"], ["softfloat16", "op", "add", "fp16", "0x1", "0x2"]])
def test_a_closed_pipe_ends_every_command_quietly(argv):
    """`... | head -1`: the reader is gone before the command writes (no traceback on stderr)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(sf.__file__)))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-m", *argv], stdout=write_end, stderr=subprocess.PIPE,
                              text=True, timeout=120, env=env)
    finally:
        os.close(write_end)
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr, done.stderr
    assert done.returncode in (0, 141)


# --- FP8, FP6, FP4, E8M0 and TF32 --------------------------------------------------------------

@pytest.mark.parametrize("argv, expected", [
    (["0x7e", "-f", "fp8_e4m3fn"], ["fp8_e4m3fn 0x7e = 0 1111 110 (1 sign, 4 exponent, 3 fraction bits; bias 7)",
                                    "encoding  fn: NaN 0x7f, 0xff; no inf", "exponent  1111 = 15, unbiased 8",
                                    "value     448.0 = 448 = 14 * 2^5",
                                    "next up   none (+max finite: fp8_e4m3fn has no infinity)",
                                    "next down 0x7d = 416.0"]),
    (["0xff", "-f", "e4m3fn"], ["class     nan: exponent and fraction all ones, either sign", "value     -NaN"]),
    (["0x80", "-f", "fp8_e4m3fnuz"], ["encoding  fnuz: NaN 0x80 only; no inf, no -0",
                                      "class     nan: the pattern of -0, the only NaN", "value     NaN"]),
    (["0x81", "-f", "fp8_e5m2fnuz"], ["class     subnormal", "next up   0x00 = 0.0", "next down 0x82"]),
    (["0x00", "-f", "float8_e4m3fnuz"], ["class     zero", "next down 0x81 = -0.0009765625", "bias 8"]),
    (["0x00", "-f", "e8m0"], ["e8m0 0x00 = 00000000 (0 sign, 8 exponent, 0 fraction bits; bias 127)",
                              "encoding  e8m0: NaN 0xff; unsigned, no zero", "exponent  00000000 = 0, unbiased -127",
                              "= 1 * 2^-127", "next down none (2^-127 is the smallest value, there is no zero)"]),
    (["0xff", "-f", "float8_e8m0fnu"], ["class     nan: 0xff, the only NaN", "value     NaN"]),
    (["0x3f", "-f", "fp6_e2m3"], ["fp6_e2m3 0x3f = 1 11 111", "encoding  finite: none: every pattern a number",
                                  "value     -7.5 = -15/2 = -15 * 2^-1", "next up   0x3e = -7.0",
                                  "next down none (-max finite: fp6_e2m3 has no infinity)"]),
    (["0x9", "-f", "fp4_e2m1"], ["fp4_e2m1 0x9 = 1 00 1", "class     subnormal", "next up   0x8 = -0.0"]),
    (["0x3f802000", "-f", "tf32_fp32"], ["(1 sign, 8 exponent, 10 fraction bits; 13 zero bits below (FP32 layout); "
                                         "bias 127)", "fraction  0000000001 = 1/1024", "next up   0x3f804000",
                                         "next down 0x3f800000 = 1.0"]),
    (["0x7f7fe000", "-f", "tf32_fp32"], ["next up   0x7f800000 = inf"]),
    (["0x7c01", "-f", "fp16"], ["class     snan: exponent all ones, fraction not 0, top fraction bit 0: signaling"]),
])
def test_explain_new_formats(capsys, argv, expected):
    code, out, _ = run(capsys, "explain", *argv)
    assert code == 0
    for text in expected:
        assert text in out, (text, out)


def test_explain_neighbours_walk_the_whole_line_of_every_small_format(capsys):
    # next up from the lowest value visits every value once, in increasing order (ml_dtypes' values)
    import ml_dtypes
    for name, dtype in (("fp8_e4m3fn", ml_dtypes.float8_e4m3fn), ("fp8_e5m2fnuz", ml_dtypes.float8_e5m2fnuz),
                        ("fp6_e3m2", ml_dtypes.float6_e3m2fn), ("fp4_e2m1", ml_dtypes.float4_e2m1fn),
                        ("e8m0", ml_dtypes.float8_e8m0fnu)):
        width = {"fp6": 6, "fp4": 4}.get(name[:3], 8)
        values = np.arange(1 << width, dtype=np.uint8).view(dtype).astype(np.float64)
        expected = sorted({v for v in values if np.isfinite(v)})  # -0 and +0 are one value
        bits = int(np.flatnonzero(values == expected[0])[0])
        visited = []
        while True:
            code, out, _ = run(capsys, "explain", hex(bits), "-f", name)
            assert code == 0
            visited.append(values[bits])
            up = re.search(r"next up   (0x[0-9a-f]+|none)", out).group(1)
            if up == "none":
                break
            bits = int(up, 16)
            if values[bits] == 0 and visited[-1] == 0:  # -0 -> +0 is a step of 0
                visited.pop()
        assert visited == expected, name


@pytest.mark.parametrize("argv, result, flags", [
    (["mul", "fp8_e4m3fn", "0x7e", "0x40"], "0x7f = +NaN (nan)", "OVERFLOW INEXACT"),
    (["mul", "fp8_e4m3fn", "0x7e", "0x40", "--saturate"], "0x7e = 448.0 (normal)", "OVERFLOW INEXACT"),
    (["mul", "fp8_e4m3fn", "0xfe", "0x40", "-r", "rtz"], "0xfe = -448.0 (normal)", "OVERFLOW INEXACT"),
    (["div", "fp8_e4m3fnuz", "0x38", "0x00"], "0x80 = NaN (nan)", "DIVIDE_BY_ZERO"),
    (["div", "fp4_e2m1", "0xa", "0x0", "-r", "rtz"], "0xf = -6.0 (normal)", "DIVIDE_BY_ZERO"),
    (["sqrt", "fp6_e2m3", "0x28"], "0x00 = 0.0 (zero: the NaN stand-in, fp6_e2m3 has no NaN)", "INVALID"),
    (["mul", "fp8_e5m2fnuz", "0x81", "0x01"], "0x00 = 0.0 (zero)", "UNDERFLOW INEXACT"),   # no -0
    (["add", "fp8_e5m2", "0x7b", "0x7b", "--saturate"], "0x7b = 57344.0 (normal)", "OVERFLOW INEXACT"),
    (["convert", "fp32", "0x43f00000", "--to", "fp8_e4m3fn"], "0x7f = +NaN (nan)", "OVERFLOW INEXACT"),
    (["convert", "fp32", "0x43f00000", "--to", "e4m3", "--saturate"], "0x7e = 448.0 (normal)", "OVERFLOW INEXACT"),
    (["convert", "fp32", "0x3fc00000", "--to", "e8m0"], "0x80 = 2.0 (normal)", "INEXACT"),   # 1.5: tie to 2
    (["convert", "fp8_e4m3fnuz", "0x80", "--to", "fp16"], "0xfe00 = -qNaN (payload 0x0) (qnan)", "(none)"),
    (["add", "fp8_e5m2", "0x3c", "0x2c", "-r", "sr", "--random-bits", "0xc0000000"], "0x3d = 1.25", "INEXACT"),
    (["add", "fp8_e5m2", "0x3c", "0x2c", "-r", "sr", "--random-bits", "0xbfffffff"], "0x3c = 1.0", "INEXACT"),
    (["add", "fp8_e5m2", "0x3c", "0x2c", "-r", "sr", "--random-bits", "0x3", "--sr-bits", "2"],   # r = 0
     "0x3c = 1.0", "INEXACT"),
    (["lt", "fp8_e4m3fnuz", "0x81", "0x00"], "True", "(none)"),
])
def test_op_in_the_new_formats(capsys, argv, result, flags):
    code, out, err = run(capsys, "op", *argv)
    assert code == 0, err
    assert f"  result  {result}" in out and f"  flags   {flags}" in out, out


def test_op_stochastic_rounding_with_a_seed_matches_the_api(capsys):
    code, out, _ = run(capsys, "op", "mul", "fp4_e2m1", "0x3", "0x3", "-r", "sr", "--seed", "7", "--sr-bits", "8")
    expected = sf.fp4_e2m1.mul(0x3, 0x3, rounding="sr", seed=7, sr_bits=8)   # 2.25: 2 or 3
    assert code == 0 and f"result  {sf.hex(expected, sf.fp4_e2m1)} " in out
    assert "rounding=sr sr-bits=8 seed=7" in out


def test_op_flags_of_tf32_in_fp32_layout(capsys):
    code, out, _ = run(capsys, "op", "add", "tf32_fp32", "0x3f800000", "0x3a000000", "-r", "rup")
    assert code == 0 and "  result  0x3f802000 " in out and "  flags   INEXACT" in out


@pytest.mark.parametrize("argv, message", [
    (["op", "add", "fp8_e5m2", "0x3c", "0x2c", "-r", "sr"], "exactly one of --seed N or --random-bits WORD"),
    (["op", "add", "fp8_e5m2", "0x3c", "0x2c", "-r", "sr", "--seed", "1", "--random-bits", "0x1"], "exactly one"),
    (["op", "add", "fp8_e5m2", "0x3c", "0x2c", "--seed", "1"], "are for --rounding sr"),
    (["op", "add", "fp8_e5m2", "0x3c", "0x2c", "-r", "sr", "--seed", "1", "--sr-bits", "40"], "sr_bits"),
    (["op", "lt", "fp8_e5m2", "0x3c", "0x2c", "--saturate"], "a comparison rounds nothing"),
    (["op", "add", "e8m0", "0x7f", "0x7f"], "e8m0 is a scale format without arithmetic"),
    (["op", "add", "fp6_e2m3", "0x40", "0x00"], "does not fit in 6 bits"),
    (["explain", "0x10", "-f", "fp4_e2m1"], "does not fit in 4 bits"),
    (["explain", "0x3f800001", "-f", "tf32_fp32"], "low 13 bits zero"),
    (["verify", "--format", "e8m0", "--op", "add"], "is verified for"),
    (["verify", "--format", "fp8_e4m3fn", "--op", "add", "-r", "sr", "--reference", "hardware"], "no hardware"),
])
def test_usage_errors_of_the_new_options(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and "Traceback" not in err, err


def test_verify_command_new_formats(capsys):
    code, out, _ = run(capsys, "verify", "--format", "fp8_e4m3fn", "--op", "mul", "--rounding", "rod",
                       "--exhaustive", "--saturate", "--workers", "1")
    assert code == 0 and out.startswith("verify mul fp8_e4m3fn rod saturate (exhaustive): 65536 cases, 0 mismatches")
    code, out, _ = run(capsys, "verify", "--format", "fp4_e2m1", "--op", "div", "--rounding", "sr", "--sr-bits", "2",
                       "--exhaustive", "--workers", "1")
    assert code == 0 and "verify div fp4_e2m1 sr (2-bit random integers) (exhaustive): 256 cases, 0 mismatches" in out
    assert "reference: fractions" in out
    code, out, _ = run(capsys, "verify", "--format", "fp6_e3m2", "--op", "convert", "--from", "bf16", "-r", "rup",
                       "--exhaustive", "--workers", "1", "--strict-nan")
    assert code == 0 and "convert bf16->fp6_e3m2 rup (exhaustive): 65536 cases, 0 mismatches" in out


# --- IEEE P3109: named p3109_k<K>p<P><s|u><e|f> on the command line ------------------------------------

@pytest.mark.parametrize("argv, expected", [
    (["0x80", "-f", "p3109_k8p3se"], ["p3109_k8p3se 0x80 = 1 00000 00 (1 sign, 5 exponent, 2 fraction bits; bias 16)",
                                      "encoding  p3109: ±inf 0x7f, 0xff; NaN 0x80 only; no -0", "exponent  00000 = 0",
                                      "class     nan: the pattern of -0, the only NaN (no -0)", "value     NaN"]),
    (["0x7f", "-f", "p3109_k8p3se"], ["class     inf", "value     +inf", "next down 0x7e = 49152.0"]),
    (["0xff", "-f", "p3109_k8p3se"], ["class     inf", "value     -inf", "next up   0xfe = -49152.0"]),
    (["0x7e", "-f", "p3109_k8p3se"], ["class     normal", "value     49152.0 = 49152 = 6 * 2^13",
                                      "next up   0x7f = inf"]),
    (["0x00", "-f", "p3109_k8p3se"], ["class     zero", "value     0.0 = 0 = 0 * 2^-17", "next up   0x01",
                                      "next down 0x81 = -0.00000762939453125"]),
    (["0x81", "-f", "p3109_k8p3se"], ["class     subnormal", "exponent  00000 = 0: zero/subnormal, scale 2^-15",
                                      "value     -0.00000762939453125 = -1/131072 = -1 * 2^-17",
                                      "next up   0x00 = 0.0"]),
    (["0x7f", "-f", "p3109_k8p3sf"], ["encoding  p3109: NaN 0x80 only; no inf, no -0", "value     57344.0",
                                      "next up   none (+max finite: p3109_k8p3sf has no infinity)"]),
    (["0x40", "-f", "p3109_k8p1se"], ["p3109_k8p1se 0x40 = 0 1000000 (1 sign, 7 exponent, 0 fraction bits; bias 64)",
                                      "exponent  1000000 = 64, unbiased 0", "value     1.0 = 1 = 1 * 2^0",
                                      "ulp       1.0 = 2^0", "next up   0x41 = 2.0", "next down 0x3f = 0.5"]),
    (["0x00", "-f", "p3109_k8p1se"], ["exponent  0000000 = 0: zero, scale 2^-63, no implicit 1", "class     zero"]),
    (["0x00", "-f", "p3109_k8p1ue"], ["p3109_k8p1ue 0x00 = 00000000 (0 sign, 8 exponent, 0 fraction bits; bias 128)",
                                      "encoding  p3109: +inf 0xfe; NaN 0xff; unsigned", "class     zero",
                                      "next down none (0 is the smallest value: p3109_k8p1ue is unsigned)"]),
    (["0xfe", "-f", "p3109_k8p1ue"], ["class     inf", "value     +inf", "next down 0xfd"]),
    (["0xff", "-f", "p3109_k8p4uf"], ["class     nan: 0xff, the only NaN", "value     NaN"]),
    (["0xfe", "-f", "p3109_k8p4uf"], ["value     57344.0",
                                      "next up   none (+max finite: p3109_k8p4uf has no infinity)"]),
    (["0x3", "-f", "p3109_k3p2se"], ["p3109_k3p2se 0x3 = 0 1 1", "class     inf", "next down 0x2 = 1.0"]),
])
def test_explain_p3109_formats(capsys, argv, expected):
    code, out, _ = run(capsys, "explain", *argv)
    assert code == 0
    for text in expected:
        assert text in out, (text, out)
    assert ("  sign      " in out) == (argv[-1][-2] == "s")  # an unsigned format has no sign field


@pytest.mark.parametrize("name", ["p3109_k8p3se", "p3109_k8p1sf", "p3109_k8p4ue", "p3109_k5p1uf", "p3109_k3p2se"])
def test_explain_classes_and_neighbours_of_every_p3109_code_against_gfloat(capsys, name):
    gfloat = pytest.importorskip("gfloat")
    from gfloat.formats import format_info_p3109
    from gfloat.types import Domain, FloatClass, Signedness
    k, p, s, d = re.fullmatch(r"p3109_k(\d)p(\d)([su])([ef])", name).groups()
    info = format_info_p3109(int(k), int(p), Signedness.Signed if s == "s" else Signedness.Unsigned,
                             Domain.Extended if d == "e" else Domain.Finite)
    decoded = [gfloat.decode_float(info, code) for code in range(1 << int(k))]
    values = sorted({x.fval for x in decoded if not np.isnan(x.fval)})  # the line, inf at its ends
    names = {FloatClass.ZERO: "zero", FloatClass.SUBNORMAL: "subnormal", FloatClass.NORMAL: "normal",
             FloatClass.INFINITE: "inf", FloatClass.NAN: "nan"}
    for code, x in enumerate(decoded):
        status, out, _ = run(capsys, "explain", hex(code), "-f", name)
        assert status == 0
        assert re.search(r"class     (\w+)", out).group(1) == names[x.fclass], (hex(code), out)
        if x.fclass in (FloatClass.NAN, FloatClass.INFINITE):
            continue
        i = values.index(x.fval)
        for label, step in (("next up  ", 1), ("next down", -1)):
            found = re.search(rf"{label} (0x[0-9a-f]+|none)", out).group(1)
            j = i + step
            if found == "none":
                assert not 0 <= j < len(values), (hex(code), label, out)
            else:
                assert decoded[int(found, 16)].fval == values[j], (hex(code), label, out)


def test_p3109_names_on_the_command_line(capsys):
    code, out, err = run(capsys, "op", "div", "p3109_k8p3se", "0x40", "0x00")
    assert code == 0 and "  result  0x7f = inf (inf)" in out and "DIVIDE_BY_ZERO" in out
    code, out, err = run(capsys, "op", "sqrt", "p3109_k8p3se", "0xc0")
    assert code == 0 and "  result  0x80 = NaN (nan)" in out and "INVALID" in out
    for name, message in (("p3109_k9p3se", "no format of K=9 bits"), ("p3109_k8p8se", "P is 1..7"),
                          ("p3109_k8p3sx", "p3109_k<K>p<P><s|u><e|f>")):
        code, out, err = run(capsys, "explain", "0x0", "-f", name)
        assert code == 2 and message in err and "Traceback" not in err, err
