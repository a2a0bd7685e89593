"""Elementwise throughput of the emulator against numpy, ml_dtypes and torch-CPU, in one run.

    python bench/elementwise.py [--n 4194304] [--repeat 5] [--markdown]

Single thread (NUMBA_NUM_THREADS=1, torch.set_num_threads(1)); random finite operands; ns per
element, best of --repeat, measured in turns with the peers; ratio = emulator time / peer time
(below 1: the emulator is faster).
Also reports the first-call compile time in a fresh process with an empty Numba cache, and the
first-call time in a second process that loads the cache (it must not recompile).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("NUMBA_NUM_THREADS", "1")

import numpy as np  # noqa: E402

import softfloat16 as sf  # noqa: E402
from machine import describe_machine  # noqa: E402  (bench/machine.py, beside this script)

OPS = ("add", "mul", "div", "sqrt", "fma")
# (format, op) -> (what the time is divided by, the largest ratio that meets the target): a peer
# of the same run, or "add", the same format's add.
TARGETS = {("fp16", "add"): ("numpy float16", 0.3), ("fp16", "mul"): ("numpy float16", 0.3),
           ("fp16", "div"): ("numpy float16", 1.0), ("fp16", "sqrt"): ("numpy float16", 1.0),
           ("bf16", "add"): ("ml_dtypes bfloat16", 1.0), ("bf16", "mul"): ("ml_dtypes bfloat16", 1.0),
           ("fp32", "add"): ("numpy float32", 4.0), ("fp32", "mul"): ("numpy float32", 4.0),
           ("fp32", "div"): ("numpy float32", 5.0), ("fp32", "sqrt"): ("numpy float32", 6.0)}
TARGETS |= {(fmt_name, "fma"): ("add", 2.0) for fmt_name in ("fp16", "bf16", "fp32")}


def best_ns(fns, n, repeat):
    """name -> best ns/element of each callable, measured in turns so that a noisy neighbour on
    the machine slows every contender alike rather than whichever ran at the time."""
    for fn in fns.values():
        fn()  # warm up (compile, page in)
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeat):
        for name, fn in fns.items():
            t = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - t)
    return {name: t / n * 1e9 for name, t in best.items()}


def operands(fmt, n, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(n) * np.exp2(rng.integers(-8, 8, n))
    return fmt.from_float(x)


def our_functions(fmt, a, b, c):
    absa = a & np.array(fmt.sign_mask - 1, fmt.dtype)
    return {"add": lambda: fmt.add(a, b), "mul": lambda: fmt.mul(a, b), "div": lambda: fmt.div(a, b),
            "sqrt": lambda: fmt.sqrt(absa), "fma": lambda: fmt.fma(a, b, c)}


def target_cell(fmt_name, op, t, peers, add_time):
    """The target of (fmt_name, op) and this run's verdict on it: '<= 0.3x numpy float16: met (0.26x)'."""
    if (fmt_name, op) not in TARGETS:
        return ""
    against, limit = TARGETS[fmt_name, op]
    if against == "add":
        ratio, against = t / add_time, f"{fmt_name} add"
    else:
        times = {peer: tp for peer, tp, _ in peers}
        if against not in times:
            return f"<= {limit}x {against} (not installed)"
        ratio = t / times[against]
    return f"<= {limit}x {against}: {'met' if ratio <= limit else 'MISSED'} ({ratio:.2f}x)"


def peer_functions(fmt_name, a, b, c):
    """name -> {op: callable} of hardware-backed peers on the same values."""
    peers = {}
    views = {"fp16": np.float16, "fp32": np.float32}
    if fmt_name in views:
        x, y, z = (v.view(views[fmt_name]) for v in (a, b, c))
        ax = np.abs(x)
        peers[f"numpy {views[fmt_name].__name__}"] = {
            "add": lambda: x + y, "mul": lambda: x * y, "div": lambda: x / y,
            "sqrt": lambda: np.sqrt(ax), "fma": lambda: x * y + z}
    if fmt_name == "bf16":
        try:
            import ml_dtypes
            x, y, z = (v.view(ml_dtypes.bfloat16) for v in (a, b, c))
            ax = np.abs(x)
            peers["ml_dtypes bfloat16"] = {
                "add": lambda: x + y, "mul": lambda: x * y, "div": lambda: x / y,
                "sqrt": lambda: np.sqrt(ax), "fma": lambda: x * y + z}
        except ImportError:
            pass
    try:
        import torch
        torch.set_num_threads(1)
        tdtype = {"fp16": torch.float16, "bf16": torch.bfloat16, "fp32": torch.float32}[fmt_name]
        signed = np.int16 if a.dtype == np.uint16 else np.int32
        tx, ty, tz = (torch.from_numpy(v.view(signed)).view(tdtype) for v in (a, b, c))
        tax = tx.abs()
        peers[f"torch {str(tdtype).split('.')[1]}"] = {
            "add": lambda: tx + ty, "mul": lambda: tx * ty, "div": lambda: tx / ty,
            "sqrt": lambda: torch.sqrt(tax), "fma": lambda: torch.addcmul(tz, tx, ty)}
    except ImportError:
        pass
    return peers


def low_precision_rows(n, repeat):
    """Rows of the second table: conversions into the 8/4-bit formats against ml_dtypes' astype
    (and torch's .to where it has the dtype), FP8 arithmetic against ml_dtypes (float32 computed,
    then converted), and stochastic rounding against round-to-nearest for the same operation."""
    import ml_dtypes
    rng = np.random.default_rng(7)
    x32 = (rng.standard_normal(n) * np.exp2(rng.integers(-8, 8, n))).astype(np.float32)
    rows = []
    try:
        import torch
        tx = torch.from_numpy(x32)
    except ImportError:
        torch = None
    for name in ("fp8_e4m3fn", "fp8_e5m2", "fp4_e2m1"):
        fmt = sf.format(name)
        contenders = {"ours": lambda fmt=fmt: fmt.from_float(x32),
                      "ml_dtypes astype": lambda fmt=fmt: x32.astype(getattr(ml_dtypes, fmt.float_dtype_name))}
        if torch is not None and hasattr(torch, fmt.float_dtype_name):
            contenders["torch .to"] = lambda fmt=fmt: tx.to(getattr(torch, fmt.float_dtype_name))
        times = best_ns(contenders, n, repeat)
        t = times.pop("ours")
        rows.append([f"fp32 -> {name}", "convert", t, 1.0] + [(p, tp, t / tp) for p, tp in times.items()])
    fp8 = sf.fp8_e4m3fn
    a8, b8 = fp8.from_float(x32, saturate=True), fp8.from_float(x32[::-1].copy(), saturate=True)
    ma, mb = a8.view(ml_dtypes.float8_e4m3fn), b8.view(ml_dtypes.float8_e4m3fn)
    for op, peer in (("add", lambda: ma + mb), ("mul", lambda: ma * mb)):
        times = best_ns({"ours": lambda op=op: getattr(fp8, op)(a8, b8), "ml_dtypes float8_e4m3fn": peer}, n, repeat)
        t = times.pop("ours")
        rows.append(["fp8_e4m3fn", op, t, None] + [(p, tp, t / tp) for p, tp in times.items()])
    for fmt_name, op in (("fp16", "add"), ("bf16", "add"), ("fp32", "add"), ("fp32", "mul"), ("bf16", "fma")):
        fmt = sf.format(fmt_name)
        a, b, c = (operands(fmt, n, seed) for seed in (1, 2, 3))
        args = (a, b, c) if op == "fma" else (a, b)
        times = best_ns({"sr": lambda fmt=fmt, op=op, args=args: getattr(fmt, op)(*args, rounding="sr", seed=1),
                         "rne": lambda fmt=fmt, op=op, args=args: getattr(fmt, op)(*args)}, n, repeat)
        rows.append([fmt_name, f"{op} sr", times["sr"], 1.5,
                     ("same op, rne", times["rne"], times["sr"] / times["rne"])])
    rows += p3109_rows(x32, n, repeat)
    bits = x32.view(np.uint32)
    for dst in ("bf16", "fp8_e4m3fn"):
        times = best_ns({"sr": lambda dst=dst: sf.convert(bits, sf.fp32, dst, rounding="sr", seed=1),
                         "rne": lambda dst=dst: sf.convert(bits, sf.fp32, dst)}, n, repeat)
        rows.append([f"fp32 -> {dst}", "convert sr", times["sr"], 1.5,
                     ("same op, rne", times["rne"], times["sr"] / times["rne"])])
    return rows


def p3109_rows(x32, n, repeat):
    """The 8-bit P3109 formats against the OCP FP8 format of the same widths, measured in turns:
    conversion from fp32, add and mul (looked up in a table), add with stochastic rounding (the
    kernel itself). Target: as fast as the other 8-bit formats (ratio <= 1.1)."""
    rows = []
    for name, peer_name in (("p3109_k8p3se", "fp8_e5m2"), ("p3109_k8p4se", "fp8_e4m3fn")):
        for op, ours, theirs in p3109_cases(sf.format(name), sf.format(peer_name), x32):
            times = best_ns({"ours": ours, peer_name: theirs}, n, repeat)
            rows.append([name, op, times["ours"], 1.1, (peer_name, times[peer_name], times["ours"] / times[peer_name])])
    return rows


def p3109_cases(fmt, peer, x32):
    """(op, ours, the peer's) callables of one P3109 format and its OCP peer, on the same values."""
    y32 = x32[::-1].copy()
    a, b = fmt.from_float(x32, saturate=True), fmt.from_float(y32, saturate=True)
    pa, pb = peer.from_float(x32, saturate=True), peer.from_float(y32, saturate=True)
    return [("convert", lambda: fmt.from_float(x32), lambda: peer.from_float(x32)),
            ("add", lambda: fmt.add(a, b), lambda: peer.add(pa, pb)),
            ("mul", lambda: fmt.mul(a, b), lambda: peer.mul(pa, pb)),
            ("add sr", lambda: fmt.add(a, b, rounding="sr", seed=1), lambda: peer.add(pa, pb, rounding="sr", seed=1))]


def compile_times():
    """(first call with an empty cache, first call in a second process using the cache), seconds."""
    code = ("import time, numpy as np, softfloat16 as sf; a = np.ones(8, np.uint16); t = time.perf_counter(); "
            "sf.fp16.add(a, a); print(time.perf_counter() - t)")
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        run = lambda: float(subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,  # noqa: E731
                                           text=True, check=True).stdout.strip())
        return run(), run()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=1 << 22)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--markdown", action="store_true", help="print a markdown table")
    args = parser.parse_args(argv)
    np.seterr(all="ignore")  # the peers overflow on some random operands, as intended
    rows = []
    for fmt_name in ("fp16", "bf16", "fp32"):
        fmt = sf.format(fmt_name)
        a, b, c = (operands(fmt, args.n, seed) for seed in (1, 2, 3))
        ours = our_functions(fmt, a, b, c)
        peers = peer_functions(fmt_name, a, b, c)
        for op in OPS:
            times = best_ns({"ours": ours[op]} | {peer: fns[op] for peer, fns in peers.items()}, args.n, args.repeat)
            t_ours = times.pop("ours")
            rows.append([fmt_name, op, t_ours] + [(peer, t, t_ours / t) for peer, t in times.items()])
    add_times = {fmt_name: t for fmt_name, op, t, *_ in rows if op == "add"}
    low_precision = low_precision_rows(args.n, args.repeat)
    first, cached = compile_times()
    print(describe_machine() + "\n")
    if args.markdown:
        print("| format | op | softfloat16 ns/elem | peers: ns/elem (ratio ours/peer) | target |")
        print("|---|---|---|---|---|")
        for fmt_name, op, t, *peers in rows:
            cells = "; ".join(f"{p} {tp:.2f} ({r:.2f}x)" for p, tp, r in peers)
            target = target_cell(fmt_name, op, t, peers, add_times[fmt_name])
            print(f"| {fmt_name} | {op} | {t:.2f} | {cells} | {target} |")
        print("\n| format | op | softfloat16 ns/elem | reference: ns/elem (ratio ours/reference) | target |")
        print("|---|---|---|---|---|")
        for fmt_name, op, t, target, *peers in low_precision:
            cells = "; ".join(f"{p} {tp:.2f} ({r:.2f}x)" for p, tp, r in peers)
            print(f"| {fmt_name} | {op} | {t:.2f} | {cells} | {f'<= {target}x' if target else ''} |")
        print(f"\nFirst call of fp16 add with an empty cache: {first:.2f} s; in a second process (cache hit): "
              f"{cached:.3f} s.")
    else:
        for fmt_name, op, t, *peers in rows:
            cells = "  ".join(f"{p}: {tp:6.2f} ns ({r:5.2f}x)" for p, tp, r in peers)
            target = target_cell(fmt_name, op, t, peers, add_times[fmt_name])
            target = f"   target {target}" if target else ""
            print(f"{fmt_name:5s} {op:5s} softfloat16 {t:7.2f} ns/elem   {cells}{target}")
        for fmt_name, op, t, _, *peers in low_precision:
            cells = "  ".join(f"{p}: {tp:6.2f} ns ({r:5.2f}x)" for p, tp, r in peers)
            print(f"{fmt_name:18s} {op:10s} softfloat16 {t:7.2f} ns/elem   {cells}")
        print(f"compile: first call {first:.2f} s (empty cache), {cached:.3f} s (second process, cached)")


if __name__ == "__main__":
    main()
