#!/usr/bin/env python3
"""dit_offload.py: seconds per forward pass of a synthetic DiT on a real GPU,
under vramshim and under its alternatives, against the physical bound.

Run it through Meson (it needs a GPU and PyTorch; without them it exits 77,
which Meson reports as skipped):

    meson test -C build --benchmark --suite gpu -v

or by hand:

    python3 bench/gpu/dit_offload.py build/shim/libvramshim.so \\
        [--vramshim-tool build/tools/vramshim] [--passes 5] [--tokens 4096] \\
        [--limits 25,40,60] [--max-weights 41G] [--dtype bf16|fp16]

    python3 bench/gpu/dit_offload.py --self-test [--shim-source shim/offload.c]

The self-test runs the parts that need no GPU and no torch (sizing, the
shim's exit summary, the table) and is in the `unit` suite.

The model. A DiT with Qwen-Image's shapes: hidden size 3072, 24 heads of
128, 60 blocks, each an adaLN modulation (3072 -> 6 x 3072), attention
(QKV and output projections) and an MLP (3072 -> r x 3072 -> 3072), random
weights (nothing is downloaded), bf16 (fp16 where bf16 is missing). A
block's weights are one flat tensor, so that every configuration moves a
block as one allocation. With r = 13 the weights come to 40.8 GB, Qwen-Image's
DiT; r is lowered until the weights W fit the machine: the largest limit
(60% of W by default, so W is 1.67x the largest limit) plus activations
must fit the GPU's free memory, and W must fit in 45% of the host's
available memory (the pinned copy of the streaming loop, or the shim's host
pool, plus what the process needs besides).

A pass is a forward over one batch of `--tokens` tokens; after warm-up
passes, the median of `--passes` passes, each timed between
torch.cuda.synchronize() calls. Each configuration runs in its own child
process:
  a) no limit: all weights resident (skipped when they do not fit);
  b) vramshim: LD_PRELOAD=libvramshim.so VRAM_LIMIT=<L> VRAMSHIM_POLICY=cyclic
     at each limit; the bytes it moved per pass are read from its live
     snapshot (`vramshim dump PID --json`, when --vramshim-tool is given)
     and its totals from its exit summary (VRAMSHIM_LOG=info);
  c) accelerate's cpu_offload, when accelerate is installed;
  d) a hand-written streaming loop: weights in pinned host memory, as many
     blocks resident as the limit holds, the others copied in on a side
     stream into two buffers, block i+1 while block i computes. It is the
     practical bound; its child also measures the compute time of a pass on
     resident weights (C) and the pinned H2D bandwidth (B).

For (a) and (b) one more pass records a CUDA event before and after each
block on the compute stream: the gaps between blocks are the GPU's idle
time (waits for restores, host work between launches). It prints the idle
fraction of that pass and its bubbles (gaps over 20 us: how many, their
total and the longest).

The bound at a limit L is max(C, S / B) with S the bytes that must stream
per pass at L: the weights of the blocks that do not fit beside two
streaming buffers and the activations. C is the time of (a) when it ran,
else the resident-weights pass of (d). Exit status: 0 when every
configuration ran or was skipped for a stated reason, 1 when a child
failed, 2 on a usage error, 77 without torch or a GPU.
"""
import argparse
import contextlib
import io
import itertools
import json
import os
import re
import subprocess
import sys
import tempfile
import time

SKIP = 77
HIDDEN = 3072
HEADS = 24
BLOCKS = 60
QWEN_MLP_RATIO = 13  # 60 x (10 + 2 x 13) x 3072^2 x 2 bytes = 40.8 GB
DEFAULT_LIMITS = (25, 40, 60)
HOST_FRACTION = 0.45
GPU_FRACTION = 0.92
CONTEXT_RESERVE = 1 << 30  # CUDA context, cuBLAS workspaces, fragmentation
GIB = float(1 << 30)

# The exit summary's lines at VRAMSHIM_LOG=info (shim/offload.c): what was
# evicted, what restored, how long operations waited for restores.
SUMMARY = re.compile(r"(?s)  evicted +(\d+) times, [^(\n]*\((\d+) bytes\).*?"
                     r"  restored +(\d+) times, [^(\n]*\((\d+) bytes\)"
                     r"(?:.*?  waited +([0-9.]+) ms for restores)?")
# The plan's line of the summary's details (VRAMSHIM_LOG=debug, device 0):
# how often the plan was built, each build moving allocations between kept
# and streamed, and the cycle the policy learned.
PLANS = re.compile(r"offload details: device 0: plans built (\d+), learned cycle (\d+) operations"
                   r"(?:, the plan streams \d+ bytes a cycle; built for ([a-z0-9 ,]+))?")


# ---- the parts that need no GPU ------------------------------------------

def block_params(hidden, mlp_ratio):
    """Parameters of one block: modulation 6h^2, QKV 3h^2, output h^2, MLP
    2rh^2, and their biases."""
    return (10 + 2 * mlp_ratio) * hidden * hidden + (11 + mlp_ratio) * hidden


def activation_bytes(tokens, hidden, mlp_ratio, dtype_bytes):
    """Device bytes of a pass besides the weights, an upper estimate: the
    hidden state and its residual copies, QKV, the attention output and
    the MLP's intermediate, plus 256 MiB for workspaces."""
    per_token = hidden * (10 + 2 * mlp_ratio)
    return tokens * per_token * dtype_bytes + (256 << 20)


def choose_size(gpu_free, host_available, limit_pcts=DEFAULT_LIMITS, dtype_bytes=2, tokens=4096,
                hidden=HIDDEN, blocks=BLOCKS, max_weights=None):
    """Picks the MLP ratio (and, on very small machines, fewer blocks) so
    that the largest limit fits the GPU and the weights fit the host.
    Returns a dict, or raises ValueError when nothing fits."""
    if not limit_pcts or min(limit_pcts) <= 0 or max(limit_pcts) >= 100:
        raise ValueError("limits must be percentages of the weights between 1 and 99")
    gpu_budget = gpu_free * GPU_FRACTION - CONTEXT_RESERVE
    host_budget = host_available * HOST_FRACTION
    for n_blocks in [blocks] + [b for b in (32, 16, 8) if b < blocks]:
        for ratio in range(QWEN_MLP_RATIO, 0, -1):
            block_bytes = block_params(hidden, ratio) * dtype_bytes
            weights = block_bytes * n_blocks
            act = activation_bytes(tokens, hidden, ratio, dtype_bytes)
            limits = [weights * p // 100 for p in limit_pcts]
            if max_weights is not None and weights > max_weights:
                continue
            if weights > host_budget or max(limits) > gpu_budget:
                continue
            # The smallest limit must hold two streaming buffers and the
            # activations, or no configuration can run under it.
            if min(limits) < 2 * block_bytes + act:
                continue
            return {
                "hidden": hidden,
                "heads": HEADS,
                "blocks": n_blocks,
                "mlp_ratio": ratio,
                "tokens": tokens,
                "dtype_bytes": dtype_bytes,
                "block_bytes": block_bytes,
                "weights": weights,
                "activations": act,
                "limit_pcts": list(limit_pcts),
                "limits": limits,
                "resident_fits": weights + act <= gpu_budget,
            }
    raise ValueError("no model size fits: %.1f GiB free on the GPU, %.1f GiB available on the host"
                     % (gpu_free / GIB, host_available / GIB))


def resident_blocks(limit, block_bytes, blocks, activations):
    """Blocks the streaming loop keeps resident under `limit`: what is left
    after two streaming buffers and the activations."""
    room = limit - 2 * block_bytes - activations
    return max(0, min(blocks, room // block_bytes)) if room > 0 else 0


def streamed_bytes(limit, spec, activations=None):
    """Bytes that must come over the link per pass at `limit` (None: no
    limit, nothing streams)."""
    if limit is None:
        return 0
    act = spec["activations"] if activations is None else activations
    k = resident_blocks(limit, spec["block_bytes"], spec["blocks"], act)
    return (spec["blocks"] - k) * spec["block_bytes"]


def bound_seconds(compute_s, streamed, h2d_bytes_per_s):
    return max(compute_s, streamed / h2d_bytes_per_s)


def last_match(pattern, text):
    """The last match of `pattern` in `text`, or None."""
    m = None
    for m in pattern.finditer(text):
        pass
    return m


def parse_shim_summary(text):
    """The shim's exit summary at VRAMSHIM_LOG=info (the plan's figures at
    debug), or None."""
    m = last_match(SUMMARY, text)
    if m is None:
        return None
    plans = last_match(PLANS, text)
    return {"evictions": int(m.group(1)), "restores": int(m.group(3)),
            "to_host": int(m.group(2)), "to_device": int(m.group(4)),
            "restore_wait_ms": float(m.group(5)) if m.group(5) is not None else None,
            "plans_built": int(plans.group(1)) if plans else None,
            "cycle_ops": int(plans.group(2)) if plans else None,
            "plan_causes": plans.group(3) if plans else None}


def parse_meminfo(text):
    """MemAvailable from /proc/meminfo, in bytes, or None."""
    m = re.search(r"^MemAvailable:\s+(\d+) kB", text, re.M)
    return int(m.group(1)) * 1024 if m else None


def parse_size(text):
    m = re.match(r"^\s*([0-9.]+)\s*([KMGT]?)i?B?\s*$", text, re.I)
    if not m:
        raise ValueError("not a size: %r (forms: 41G, 40960M, 44023414784)" % text)
    scale = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}[m.group(2).upper()]
    return int(float(m.group(1)) * scale)


def median(values):
    v = sorted(values)
    n = len(v)
    if n == 0:
        raise ValueError("median of nothing")
    return v[n // 2] if n % 2 else (v[n // 2 - 1] + v[n // 2]) / 2.0


def format_bytes(n):
    if n is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return "%.1f %s" % (n / float(scale), unit)
    return "%d B" % n


def format_table(rows, compute_s, h2d_bytes_per_s):
    """rows: dicts with config, limit (bytes or None), seconds (or None),
    note (why there is no time), streamed (bytes per pass the
    configuration moved, or None), need (bytes that must stream) and
    optionally loop (seconds of the streaming loop it compares with).
    Returns the table's lines: s/pass, the bound, the ratio to it and the
    ratio to the streaming loop."""
    head = "%-28s %10s %9s %12s %9s %8s %8s" % ("configuration", "limit", "s/pass", "moved/pass",
                                               "bound s", "x bound", "x loop")
    lines = [head, "-" * len(head)]
    for r in rows:
        bound = bound_seconds(compute_s, r["need"], h2d_bytes_per_s)
        if r["seconds"] is None:
            lines.append("%-28s %10s %9s   %s" % (r["config"], format_bytes(r["limit"]), "-", r["note"]))
            continue
        loop = r.get("loop")
        goal = ""
        if r["config"].startswith(VRAMSHIM_ROW):
            goal = "  met" if r["seconds"] / bound <= GOAL_OVER_BOUND else "  MISSED"
        lines.append("%-28s %10s %9.3f %12s %9.3f %8.2f %8s%s" % (
            r["config"], format_bytes(r["limit"]), r["seconds"], format_bytes(r["streamed"]), bound,
            r["seconds"] / bound, "%.2f" % (r["seconds"] / loop) if loop else "-", goal))
    return lines


def goal_summary(rows, compute_s, h2d_bytes_per_s):
    """The summary line: whether every vramshim row is within GOAL_OVER_BOUND
    of its bound, and which are not."""
    shim = [r for r in rows if r["config"].startswith(VRAMSHIM_ROW) and r["seconds"] is not None]
    over = [r for r in shim
            if r["seconds"] / bound_seconds(compute_s, r["need"], h2d_bytes_per_s) > GOAL_OVER_BOUND]
    worst = max([r["seconds"] / bound_seconds(compute_s, r["need"], h2d_bytes_per_s) for r in shim] or [0.0])
    return "dit_offload: vramshim at most %.2f x the bound at every limit: %d of %d, worst %.2f: %s" % (
        GOAL_OVER_BOUND, len(shim) - len(over), len(shim), worst, "met" if shim and not over else "MISSED")


# The shim's host time in its live snapshot: making room and restoring for
# the application's operations, and wherever the engine is, its waits for
# the GPU and its virtual-memory calls.
HOST_TIME_KEYS = ("restore_wait_ns", "host_gpu_wait_ns", "host_vmm_ns")
GOAL_OVER_BOUND = 1.05  # the speed issue's goal: a pass within 1.05 x max(C, S / B)
VRAMSHIM_ROW = "b) "  # the rows the goal applies to
BASELINE_ROW = "e) "  # --baseline-shim's rows, beside them, not judged

BUBBLE_MS = 0.02  # a gap between two blocks' kernels longer than this is a bubble


def bubble_stats(spans_ms, threshold_ms=BUBBLE_MS):
    """The GPU's idle time in one pass, from CUDA events recorded on the
    compute stream before and after each block: spans_ms is
    [(start, end), ...] in milliseconds from the pass's first event, in
    block order. Returns {"idle": the fraction of the pass between blocks,
    "bubbles": gaps longer than threshold_ms, "gap_ms": their total,
    "longest_ms": the longest gap}."""
    if not spans_ms:
        return {"idle": 0.0, "bubbles": 0, "gap_ms": 0.0, "longest_ms": 0.0}
    span = spans_ms[-1][1] - spans_ms[0][0]
    gaps = [max(0.0, b[0] - a[1]) for a, b in zip(spans_ms, spans_ms[1:])]
    idle = sum(gaps) / span if span > 0 else 0.0
    big = [g for g in gaps if g > threshold_ms]
    return {"idle": idle, "bubbles": len(big), "gap_ms": sum(big), "longest_ms": max(gaps) if gaps else 0.0}


def stall_inside_blocks(spans_ms, resident_spans_ms):
    """The GPU's waits that the gaps between blocks cannot show: the shim
    makes a block's first kernel wait for its restore on the GPU, after the
    event recorded before the block, so such a wait lengthens the block's
    span. Returns the fraction of the pass by which the blocks' spans
    exceed the same blocks' spans with every weight resident (block by
    block, never below zero), or None without a resident run to compare."""
    if not spans_ms or not resident_spans_ms or len(spans_ms) != len(resident_spans_ms):
        return None
    span = spans_ms[-1][1] - spans_ms[0][0]
    extra = sum(max(0.0, (e - s) - (re - rs)) for (s, e), (rs, re) in zip(spans_ms, resident_spans_ms))
    return extra / span if span > 0 else 0.0


def self_test(shim_source=None):
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    b = bubble_stats([(0.0, 1.0), (1.0, 2.0), (2.5, 3.0), (3.01, 4.0)])
    check(b["bubbles"] == 1 and abs(b["gap_ms"] - 0.5) < 1e-9 and abs(b["idle"] - 0.51 / 4.0) < 1e-9
          and abs(b["longest_ms"] - 0.5) < 1e-9, "bubble_stats: %r" % b)
    check(bubble_stats([])["bubbles"] == 0, "bubble_stats of no blocks")
    stall = stall_inside_blocks([(0.0, 1.5), (1.5, 2.5), (2.5, 4.0)], [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)])
    check(stall is not None and abs(stall - 1.0 / 4.0) < 1e-9, "stall_inside_blocks: %r" % stall)
    check(stall_inside_blocks([(0.0, 1.0)], []) is None, "stall_inside_blocks without a resident run")
    t = traffic_by_kind({1: {"size": 8, "evictions": 1, "restores": 1}, 2: {"size": 3, "evictions": 0, "restores": 0}},
                        {1: {"size": 8, "evictions": 5, "restores": 3}, 2: {"size": 3, "evictions": 2, "restores": 4},
                         9: {"size": 5, "evictions": 2, "restores": 0}}, 8, 2)
    check(t["weights"] == [1.0, 8.0, 2.0, 16.0] and t["others"] == [2.0, 6.0, 2.0, 8.0] and t["other_bytes"] == 8,
          "traffic_by_kind: %r" % t)

    w = block_params(HIDDEN, QWEN_MLP_RATIO) * BLOCKS * 2
    check(40.5e9 < w < 41.2e9, "Qwen-like weights are %d bytes, expected about 40.8 GB" % w)

    h100 = choose_size(gpu_free=79 * (1 << 30), host_available=120 * (1 << 30))
    check(h100["mlp_ratio"] == QWEN_MLP_RATIO and h100["blocks"] == BLOCKS, "H100 sizing: %r" % h100)
    check(h100["resident_fits"], "H100: 40.8 GB should fit resident")
    check(h100["limits"] == [h100["weights"] * p // 100 for p in DEFAULT_LIMITS], "limits: %r" % h100["limits"])
    check(1.5 <= h100["weights"] / float(max(h100["limits"])) <= 2.0, "W is not 1.5-2x the largest limit")

    small = choose_size(gpu_free=23 * (1 << 30), host_available=60 * (1 << 30))
    check(small["weights"] <= 60 * (1 << 30) * HOST_FRACTION, "24 GB GPU: weights beyond the host budget")
    check(max(small["limits"]) <= 23 * (1 << 30) * GPU_FRACTION - CONTEXT_RESERVE,
          "24 GB GPU: the largest limit beyond the GPU")
    check(small["mlp_ratio"] < QWEN_MLP_RATIO, "24 GB GPU: should use a smaller MLP")

    capped = choose_size(gpu_free=139 * (1 << 30), host_available=120 * (1 << 30), max_weights=8 << 30)
    check(capped["weights"] <= 8 << 30, "--max-weights not honoured: %d" % capped["weights"])

    try:
        choose_size(gpu_free=2 << 30, host_available=1 << 30)
        failures.append("a 2 GiB GPU with 1 GiB of host memory was sized")
    except ValueError:
        pass
    try:
        choose_size(gpu_free=80 << 30, host_available=120 << 30, limit_pcts=(25, 100))
        failures.append("a 100% limit was accepted")
    except ValueError:
        pass

    spec = h100
    k = resident_blocks(spec["limits"][0], spec["block_bytes"], spec["blocks"], spec["activations"])
    check(0 < k < spec["blocks"], "resident blocks at 25%%: %d" % k)
    check(streamed_bytes(None, spec) == 0, "no limit streams nothing")
    check(streamed_bytes(spec["limits"][0], spec) == (spec["blocks"] - k) * spec["block_bytes"],
          "streamed bytes at 25%")
    check(streamed_bytes(0, spec) == spec["weights"], "a zero limit streams everything")

    check(bound_seconds(0.5, 10 * 10 ** 9, 50 * 10 ** 9) == 0.5, "compute-bound bound")
    check(abs(bound_seconds(0.1, 10 * 10 ** 9, 50 * 10 ** 9) - 0.2) < 1e-12, "link-bound bound")

    line = ("vramshim[1] info:   evicted         1200 times, 0 B to the host (0 bytes); 0 unchanged since their "
            "host copy (0 bytes not copied)\n"
            "vramshim[1] info:   restored        1180 times, 721 GiB to the device (774000000000 bytes); 0 brought "
            "in ahead of use (0 never used)\n"
            "vramshim[1] info:   waited          1.000 ms for restores; over the limit 0 times")
    s = parse_shim_summary("noise\n" + line + "\n")
    check(s == {"evictions": 1200, "restores": 1180, "to_host": 0, "to_device": 774000000000,
                "restore_wait_ms": 1.0, "plans_built": None, "cycle_ops": None, "plan_causes": None},
          "summary parse: %r" % s)
    s = parse_shim_summary(line + "\nvramshim[1] debug: offload details: device 0: plans built 48, learned cycle "
                           "1920 operations, the plan streams 377487360 bytes a cycle; built for the cycle 3, "
                           "members 40, a rhythm 9, the budget 1, the settings 2\n")
    check(s is not None and s["plans_built"] == 48 and s["cycle_ops"] == 1920
          and s["plan_causes"] == "the cycle 3, members 40, a rhythm 9, the budget 1, the settings 2",
          "plans line parse: %r" % s)
    check(parse_shim_summary("info:   evicted x") is None, "a broken summary was parsed")
    if shim_source:
        with open(shim_source) as f:
            src = f.read()
        # A format string of the shim's: its adjacent literals and PRIu64
        # macros joined from `start`, every conversion filled with `fill`.
        piece = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|(PRIu64))')

        def sample(start, fill):
            at = src.find(start)
            if at < 0:
                return ""
            fmt = []
            m = piece.match(src, at)
            while m:
                fmt.append(m.group(1) if m.group(1) is not None else "llu")
                m = piece.match(src, m.end())
            return re.sub(r"%[-.0-9]*(llu|f|d|s)", fill, "".join(fmt))

        pattern_ok = parse_shim_summary("\n".join(sample(start, "7") for start in
                                                   ('"  evicted ', '"  restored ', '"  waited '))) is not None
        check(pattern_ok, "the shim's exit summary in %s no longer matches %s" % (shim_source, SUMMARY.pattern))
        plans = PLANS.search(sample('"offload details: device %d: plans built', "0"))
        plans_ok = plans is not None and plans.group(3) is not None
        check(plans_ok, "the plan's line in %s no longer matches %s" % (shim_source, PLANS.pattern))

    check(parse_meminfo("MemTotal: 100 kB\nMemAvailable:   2048 kB\n") == 2 << 20, "meminfo")
    check(parse_size("41G") == 41 << 30 and parse_size("512MiB") == 512 << 20 and parse_size("1000") == 1000,
          "parse_size")
    check(median([3, 1, 2]) == 2 and median([4, 1, 2, 3]) == 2.5, "median")

    rows = [
        {"config": "no limit", "limit": None, "seconds": 0.5, "note": "", "streamed": 0, "need": 0},
        {"config": "b) vramshim cyclic", "limit": 10 << 30, "seconds": 1.1, "note": "", "streamed": 20 << 30,
         "need": 20 << 30, "loop": 1.0},
        {"config": "accelerate cpu_offload", "limit": None, "seconds": None, "note": "not installed",
         "streamed": None, "need": 0},
    ]
    table = format_table(rows, compute_s=0.5, h2d_bytes_per_s=(20 << 30) / 1.0)
    text = "\n".join(table)
    check(len(table) == 5, "table has %d lines" % len(table))
    check(re.search(r"no limit\s+-\s+0\.500\s+0 B\s+0\.500\s+1\.00\s+-$", text, re.M) is not None,
          "no-limit row:\n" + text)
    check(re.search(r"vramshim cyclic\s+10\.0 GiB\s+1\.100\s+20\.0 GiB\s+1\.000\s+1\.10\s+1\.10  MISSED", text)
          is not None, "vramshim row:\n" + text)
    check(goal_summary(rows, 0.5, (20 << 30) / 1.0).endswith("0 of 1, worst 1.10: MISSED"),
          "goal summary: " + goal_summary(rows, 0.5, (20 << 30) / 1.0))
    rows[1]["seconds"] = 1.04
    check(goal_summary(rows, 0.5, (20 << 30) / 1.0).endswith("1 of 1, worst 1.04: met"),
          "goal summary: " + goal_summary(rows, 0.5, (20 << 30) / 1.0))
    check("not installed" in text, "accelerate row:\n" + text)

    # A --baseline-shim that is not there is a command-line error, told
    # before anything runs (and before torch is looked for).
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["shim.so", "--baseline-shim", "/nonexistent/libvramshim.so"])
    check(rc == 2 and "--baseline-shim /nonexistent/libvramshim.so: no such file" in out.getvalue(),
          "bad --baseline-shim: exit %d, %r" % (rc, out.getvalue()))

    for f in failures:
        print("FAIL: " + f)
    print("dit_offload self-test: %s" % ("ok" if not failures else "%d failures" % len(failures)))
    return 1 if failures else 0


# ---- the children (torch from here on) -------------------------------------

def _torch_setup(spec):
    import torch

    torch.backends.cuda.matmul.allow_tf32 = True
    dtype = torch.bfloat16 if spec["dtype"] == "bf16" else torch.float16
    return torch, dtype


def _layout(spec):
    """Offsets of a block's tensors in its flat weight tensor."""
    h, r = spec["hidden"], spec["mlp_ratio"]
    shapes = [("mod_w", (6 * h, h)), ("mod_b", (6 * h,)), ("qkv_w", (3 * h, h)), ("qkv_b", (3 * h,)),
              ("out_w", (h, h)), ("out_b", (h,)), ("up_w", (r * h, h)), ("up_b", (r * h,)),
              ("down_w", (h, r * h)), ("down_b", (h,))]
    layout, at = [], 0
    for name, shape in shapes:
        n = 1
        for d in shape:
            n *= d
        layout.append((name, at, shape))
        at += n
    assert at == block_params(h, r)
    return layout


def _views(flat, layout):
    return {name: flat[at:at + _numel(shape)].view(shape) for name, at, shape in layout}


def _numel(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _block_forward(torch, x, temb, w, spec):
    F = torch.nn.functional
    h, heads = spec["hidden"], spec["heads"]
    b, t, _ = x.shape
    mod = F.linear(temb, w["mod_w"], w["mod_b"])
    shift1, scale1, gate1, shift2, scale2, gate2 = mod.chunk(6, dim=-1)
    y = F.layer_norm(x, (h,)) * (1 + scale1) + shift1
    qkv = F.linear(y, w["qkv_w"], w["qkv_b"]).view(b, t, 3, heads, h // heads).permute(2, 0, 3, 1, 4)
    if hasattr(F, "scaled_dot_product_attention"):
        a = F.scaled_dot_product_attention(qkv[0], qkv[1], qkv[2])
    else:  # torch before 2.0
        scores = torch.matmul(qkv[0], qkv[1].transpose(-1, -2)) * (h // heads) ** -0.5
        a = torch.matmul(scores.softmax(dim=-1), qkv[2])
    x = x + gate1 * F.linear(a.transpose(1, 2).reshape(b, t, h), w["out_w"], w["out_b"])
    y = F.layer_norm(x, (h,)) * (1 + scale2) + shift2
    return x + gate2 * F.linear(F.gelu(F.linear(y, w["up_w"], w["up_b"]), approximate="tanh"),
                                w["down_w"], w["down_b"])


def _template(torch, dtype, spec):
    """One block's weights, random with a fixed seed and scaled so that 60
    blocks keep the activations finite; every block starts as a copy."""
    g = torch.Generator().manual_seed(1234)
    n = block_params(spec["hidden"], spec["mlp_ratio"])
    flat = torch.empty(n, dtype=dtype)
    chunk = 1 << 26
    for at in range(0, n, chunk):
        m = min(chunk, n - at)
        flat[at:at + m].copy_(torch.randn(m, generator=g).mul_(0.02))
    return flat


def _inputs(torch, dtype, spec):
    g = torch.Generator().manual_seed(99)
    x = torch.randn(1, spec["tokens"], spec["hidden"], generator=g).to(dtype).cuda()
    temb = torch.randn(1, 1, spec["hidden"], generator=g).mul_(0.1).to(dtype).cuda()
    return x, temb


def _time_passes(torch, run_pass, spec):
    for _ in range(spec["warmup"]):
        run_pass()
    torch.cuda.synchronize()
    times = []
    for _ in range(spec["passes"]):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        run_pass()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times


def _shim_counters(tool):
    """The totals of this process's live snapshot: bytes_restored,
    bytes_evicted, and the engine's host time (restore_wait_ns,
    host_gpu_wait_ns, host_vmm_ns; 0 from a shim that predates them)."""
    if not tool:
        return None
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    time.sleep(0.5)  # the shim publishes every 200 ms
    out = subprocess.run([tool, "dump", str(os.getpid()), "--json"], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    if out.returncode != 0:
        sys.stderr.write("vramshim dump failed: %s\n" % out.stderr.strip())
        return None
    snap = json.loads(out.stdout)
    totals = snap["totals"]
    counters = {k: totals.get(k, 0) for k in HOST_TIME_KEYS + ("bytes_restored", "bytes_evicted")}
    counters["allocations"] = {a["id"]: {k: a.get(k, 0) for k in ("size", "evictions", "restores")}
                               for a in snap.get("allocations", [])}
    return counters


def traffic_by_kind(before, after, block_bytes, passes):
    """Per pass, from two snapshots' allocation rows: restores and evictions
    of the weight blocks (allocations of `block_bytes`, rounded up to 2 MiB
    as PyTorch's caching allocator rounds a large tensor's segment) and of everything
    else (the caching allocator's segments: activations, workspaces), each
    as (count, bytes at the allocation's size), and the bytes of the other
    allocations alive at the end. A restore that moved only a tail counts
    whole here; the snapshot's totals have the exact bytes."""
    out = {"weights": [0, 0, 0, 0], "others": [0, 0, 0, 0], "other_bytes": 0}
    for aid, a in after.items():
        b = before.get(aid, {"evictions": 0, "restores": 0})
        kind = "weights" if block_bytes <= a["size"] < block_bytes + (2 << 20) else "others"
        if kind == "others":
            out["other_bytes"] += a["size"]
        restores, evictions = a["restores"] - b["restores"], a["evictions"] - b["evictions"]
        row = out[kind]
        row[0] += restores
        row[1] += restores * a["size"]
        row[2] += evictions
        row[3] += evictions * a["size"]
    for kind in ("weights", "others"):
        out[kind] = [v / float(passes) for v in out[kind]]
    return out


def child_device(spec, result):
    """No limit, or vramshim when the parent preloaded it: every block on
    the device (the shim decides where the bytes really are)."""
    torch, dtype = _torch_setup(spec)
    layout = _layout(spec)
    template = _template(torch, dtype, spec)
    blocks = [template.to("cuda") for _ in range(spec["blocks"])]
    del template
    views = [_views(b, layout) for b in blocks]
    x, temb = _inputs(torch, dtype, spec)

    def run_pass():
        with torch.no_grad():
            y = x
            for w in views:
                y = _block_forward(torch, y, temb, w, spec)
        return y

    for _ in range(spec["warmup"]):
        run_pass()
    torch.cuda.synchronize()
    before = _shim_counters(spec.get("vramshim_tool"))
    spec_timed = dict(spec, warmup=0)
    result["times"] = _time_passes(torch, run_pass, spec_timed)
    after = _shim_counters(spec.get("vramshim_tool"))
    # One more pass with an event before and after each block on the compute
    # stream: the gaps between blocks are the GPU's idle time (waits for
    # restores, host work between launches).
    timed = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in views]
    torch.cuda.synchronize()
    with torch.no_grad():
        y = x
        for (start, end), w in zip(timed, views):
            start.record()
            y = _block_forward(torch, y, temb, w, spec)
            end.record()
    torch.cuda.synchronize()
    first = timed[0][0]
    spans = [(first.elapsed_time(start), first.elapsed_time(end)) for start, end in timed]
    result["gpu_idle"] = bubble_stats(spans)
    result["block_spans"] = spans
    if before and after:
        per_pass = {k: (after[k] - before[k]) / float(spec["passes"]) for k in HOST_TIME_KEYS + (
            "bytes_restored", "bytes_evicted")}
        result["traffic"] = traffic_by_kind(before["allocations"], after["allocations"], spec["block_bytes"],
                                            spec["passes"])
        result["streamed_per_pass"] = per_pass["bytes_restored"]
        result["written_back_per_pass"] = per_pass["bytes_evicted"]
        result["host_ns_per_pass"] = {k: per_pass[k] for k in HOST_TIME_KEYS}
    result["max_allocated"] = torch.cuda.max_memory_allocated()


def child_accelerate(spec, result):
    torch, dtype = _torch_setup(spec)
    try:
        from accelerate import cpu_offload
    except ImportError:
        result["skipped"] = "not installed"
        return
    layout = _layout(spec)

    class Block(torch.nn.Module):
        def __init__(self, flat):
            super().__init__()
            self.flat = torch.nn.Parameter(flat, requires_grad=False)

        def forward(self, x, temb):
            return _block_forward(torch, x, temb, _views(self.flat, layout), spec)

    class DiT(torch.nn.Module):
        def __init__(self, template):
            super().__init__()
            self.blocks = torch.nn.ModuleList(Block(template.clone()) for _ in range(spec["blocks"]))

        def forward(self, x, temb):
            for b in self.blocks:
                x = b(x, temb)
            return x

    template = _template(torch, dtype, spec)
    model = DiT(template).eval()
    del template
    cpu_offload(model, execution_device=torch.device("cuda:0"))
    x, temb = _inputs(torch, dtype, spec)

    def run_pass():
        with torch.no_grad():
            return model(x, temb)

    result["times"] = _time_passes(torch, run_pass, spec)
    result["streamed_per_pass"] = float(spec["weights"])
    result["max_allocated"] = torch.cuda.max_memory_allocated()


def _pinned(torch, t):
    """`t` page-locked, and whether in place: torch's pinned allocator
    rounds every allocation up to a power of two (a 680 MB block takes
    1 GiB), so the block's own pages are registered when the runtime lets
    us. Returns (tensor, registered in place)."""
    try:
        err = torch.cuda.cudart().cudaHostRegister(t.data_ptr(), t.numel() * t.element_size(), 0)
        if int(getattr(err, "value", err)) == 0:
            return t, True
    except Exception:  # no such call in this torch: pin a copy instead
        pass
    return t.pin_memory(), False


def child_stream(spec, result):
    """The practical bound: compute on resident weights, the pinned H2D
    bandwidth, then the streaming loop streaming every block, and at each
    limit keeping what fits resident."""
    torch, dtype = _torch_setup(spec)
    layout = _layout(spec)
    n, block_n = spec["blocks"], block_params(spec["hidden"], spec["mlp_ratio"])
    template = _template(torch, dtype, spec)
    host = [_pinned(torch, template.clone()) for _ in range(n)]
    result["pinned_in_place"] = all(registered for _, registered in host)
    host = [t for t, _ in host]
    del template
    bufs = [torch.empty(block_n, dtype=dtype, device="cuda") for _ in range(2)]
    buf_views = [_views(b, layout) for b in bufs]
    x, temb = _inputs(torch, dtype, spec)
    main = torch.cuda.current_stream()
    copy_stream = torch.cuda.Stream()

    # H2D bandwidth: one block, pinned, on the copy stream, nothing else running.
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    rates = []
    for _ in range(6):
        with torch.cuda.stream(copy_stream):
            start.record(copy_stream)
            bufs[0].copy_(host[0], non_blocking=True)
            end.record(copy_stream)
        end.synchronize()
        rates.append(block_n * bufs[0].element_size() / (start.elapsed_time(end) / 1e3))
    result["h2d_bytes_per_s"] = median(rates[1:])

    # Compute on resident weights: the two buffers in turn, no copies.
    bufs[1].copy_(host[1])
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()

    def compute_pass():
        with torch.no_grad():
            y = x
            for i in range(n):
                y = _block_forward(torch, y, temb, buf_views[i % 2], spec)
        return y

    result["compute_times"] = _time_passes(torch, compute_pass, spec)
    result["activations"] = torch.cuda.max_memory_allocated() - base

    # Resident blocks for the largest limit; smaller limits use a prefix.
    limits = spec["limits"]
    keep = [resident_blocks(L, spec["block_bytes"], n, max(result["activations"], spec["activations"]))
            for L in limits]
    resident = [host[i].to("cuda") for i in range(max(keep + [0]))]
    resident_views = [_views(r, layout) for r in resident]
    ready = [torch.cuda.Event() for _ in range(2)]
    free = [torch.cuda.Event() for _ in range(2)]
    for e in free:
        e.record(main)

    def stream_pass(k):
        streamed = list(range(k, n))

        def issue(j):
            slot = j % 2
            copy_stream.wait_event(free[slot])
            with torch.cuda.stream(copy_stream):
                bufs[slot].copy_(host[streamed[j]], non_blocking=True)
                ready[slot].record(copy_stream)

        for j in range(min(2, len(streamed))):
            issue(j)  # overlaps with the resident blocks' compute
        with torch.no_grad():
            y = x
            for i in range(k):
                y = _block_forward(torch, y, temb, resident_views[i], spec)
            for j in range(len(streamed)):
                slot = j % 2
                main.wait_event(ready[slot])
                y = _block_forward(torch, y, temb, buf_views[slot], spec)
                free[slot].record(main)
                if j + 2 < len(streamed):
                    issue(j + 2)
        return y

    result["loop"] = []
    for limit, k in [(None, 0)] + list(zip(limits, keep)):
        times = _time_passes(torch, lambda: stream_pass(k), spec)
        result["loop"].append({"limit": limit, "resident_blocks": k, "times": times,
                               "streamed_per_pass": (n - k) * spec["block_bytes"]})


CHILDREN = {"device": child_device, "accelerate": child_accelerate, "stream": child_stream}


def run_child_main(kind, spec_path, out_path):
    with open(spec_path) as f:
        spec = json.load(f)
    result = {}
    try:
        CHILDREN[kind](spec, result)
    finally:
        with open(out_path, "w") as f:
            json.dump(result, f)
    return 0


# ---- the parent ------------------------------------------------------------

def run_child(kind, spec, env_extra, timeout):
    """Runs one configuration; returns (result dict or None, stderr text)."""
    work = tempfile.mkdtemp(prefix="dit_offload.")
    spec_path, out_path = os.path.join(work, "spec.json"), os.path.join(work, "out.json")
    with open(spec_path, "w") as f:
        json.dump(spec, f)
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(env_extra)
    try:
        proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", kind, spec_path, out_path],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=timeout)
        log, status = proc.stdout + proc.stderr, proc.returncode
    except subprocess.TimeoutExpired as e:
        tail = e.stderr or b""
        if isinstance(tail, bytes):
            tail = tail.decode(errors="replace")
        log, status = "timed out after %d s\n%s" % (timeout, tail), -1
    result = None
    if status == 0 and os.path.exists(out_path):
        with open(out_path) as f:
            result = json.load(f)
    for p in (spec_path, out_path):
        if os.path.exists(p):
            os.unlink(p)
    os.rmdir(work)
    if status != 0:
        sys.stderr.write("child %s (%s) failed with status %d; the end of its output:\n%s\n"
                         % (kind, " ".join("%s=%s" % kv for kv in env_extra.items()), status, log[-4000:]))
    return result, log


def probe(timeout):
    code = ("import json, torch\n"
            "free, total = torch.cuda.mem_get_info()\n"
            "print(json.dumps({'name': torch.cuda.get_device_name(0), 'free': free, 'total': total,"
            " 'bf16': torch.cuda.is_bf16_supported(), 'torch': torch.__version__}))\n")
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    proc = subprocess.run([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError("GPU probe failed: %s" % proc.stderr.strip()[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shim", nargs="?", help="path to libvramshim.so")
    ap.add_argument("--self-test", action="store_true", help="check the parts that need no GPU, then exit")
    ap.add_argument("--shim-source", help="with --self-test: shim/offload.c, whose exit summary is parsed")
    ap.add_argument("--vramshim-tool", help="the vramshim command, to read bytes moved per pass")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=3, help="passes before timing (the policy learns the cycle)")
    ap.add_argument("--tokens", type=int, default=4096, help="tokens per pass (4096: a 1024x1024 image)")
    ap.add_argument("--limits", default=",".join(str(p) for p in DEFAULT_LIMITS),
                    help="vramshim limits, percent of the weights")
    ap.add_argument("--max-weights", help="cap on the weights' bytes (e.g. 8G)")
    ap.add_argument("--dtype", choices=("bf16", "fp16"), help="default bf16 where supported")
    ap.add_argument("--child-timeout", type=int, default=1800, help="seconds per configuration")
    ap.add_argument("--shim-log-dir", help="keep the shim's debug log of each limit there (vramshim_PCT.log)")
    ap.add_argument("--no-accelerate", action="store_true", help="leave accelerate's cpu_offload out")
    ap.add_argument("--baseline-shim", help="another libvramshim.so, run beside the shim at every limit in the "
                    "same invocation (rows e), not judged): a side-by-side comparison on one machine")
    ap.add_argument("--child", nargs=3, metavar=("KIND", "SPEC", "OUT"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.child:
        return run_child_main(*args.child)
    if args.self_test:
        return self_test(args.shim_source)
    if not args.shim:
        ap.print_usage()
        return 2
    try:
        limit_pcts = [int(p) for p in args.limits.split(",")]
        max_weights = parse_size(args.max_weights) if args.max_weights else None
    except ValueError as e:
        print("dit_offload: %s" % e)
        return 2
    if args.passes < 1 or args.warmup < 0:
        print("dit_offload: --passes must be at least 1 and --warmup at least 0")
        return 2
    if args.baseline_shim and not os.path.isfile(args.baseline_shim):
        print("dit_offload: --baseline-shim %s: no such file (expected a libvramshim.so to run beside the shim)"
              % args.baseline_shim)
        return 2

    try:
        import torch  # noqa: F401  (only whether it is there)
    except ImportError:
        print("torch is not installed: skipped")
        return SKIP
    import torch

    if not torch.cuda.is_available():
        print("no CUDA GPU: skipped")
        return SKIP
    shim = os.path.abspath(args.shim)
    if not os.path.exists(shim):
        print("dit_offload: no shim at %s" % shim)
        return 2

    gpu = probe(args.child_timeout)
    with open("/proc/meminfo") as f:
        host_available = parse_meminfo(f.read()) or 0
    dtype = args.dtype or ("bf16" if gpu["bf16"] else "fp16")
    try:
        spec = choose_size(gpu["free"], host_available, limit_pcts, 2, args.tokens, max_weights=max_weights)
    except ValueError as e:
        print("dit_offload: %s: skipped" % e)
        return SKIP
    spec.update(dtype=dtype, passes=args.passes, warmup=args.warmup,
                vramshim_tool=os.path.abspath(args.vramshim_tool) if args.vramshim_tool else None)
    print("GPU %s, %.1f of %.1f GiB free; host %.1f GiB available; torch %s" % (
        gpu["name"], gpu["free"] / GIB, gpu["total"] / GIB, host_available / GIB, gpu["torch"]))
    print("model: %d blocks, hidden %d, %d heads, MLP x%d, %s; weights W = %s (%s a block); %d tokens a pass; "
          "median of %d passes after %d warm-up" % (
              spec["blocks"], spec["hidden"], spec["heads"], spec["mlp_ratio"], dtype, format_bytes(spec["weights"]),
              format_bytes(spec["block_bytes"]), spec["tokens"], args.passes, args.warmup))
    sys.stdout.flush()

    failed = False
    rows = []
    idles = []  # (configuration, bubble_stats, block spans) of the runs with every block on the device
    resident_spans = None
    stream, _ = run_child("stream", spec, {}, args.child_timeout)
    if stream is None:
        print("the streaming loop failed: no bound to compare with")
        return 1
    activations = max(stream["activations"], spec["activations"])
    h2d = stream["h2d_bytes_per_s"]
    compute = median(stream["compute_times"])
    print("measured: pinned H2D %.1f GB/s (%s); compute %.3f s a pass on resident weights; activations %s" % (
        h2d / 1e9, "pages registered in place" if stream.get("pinned_in_place") else "pinned copies",
        compute, format_bytes(stream["activations"])))

    if spec["resident_fits"]:
        res, _ = run_child("device", spec, {}, args.child_timeout)
        failed |= res is None
        if res is not None:
            compute = median(res["times"])
            if "gpu_idle" in res:
                idles.append(("no limit", res["gpu_idle"], None))
                resident_spans = res.get("block_spans")
        rows.append({"config": "a) no limit (resident)", "limit": None, "need": 0, "streamed": 0,
                     "seconds": median(res["times"]) if res else None, "note": "failed (see above)"})
    else:
        rows.append({"config": "a) no limit (resident)", "limit": None, "need": 0, "streamed": None,
                     "seconds": None, "note": "skipped: W does not fit the GPU"})

    summaries = []  # (who, percent, the exit summary)
    host_times = []  # (who, percent, the engine's host ns a timed pass by kind, seconds a pass)
    traffic = []  # (who, percent, traffic_by_kind's, bytes copied out a pass)
    passes_run = args.warmup + args.passes + 1  # the timed passes and the one with events
    from_totals = False
    runs = [("vramshim", shim, VRAMSHIM_ROW + "vramshim")]
    if args.baseline_shim:
        runs.append(("baseline", os.path.abspath(args.baseline_shim), BASELINE_ROW + "baseline"))
    for (who, path, label), (pct, limit) in itertools.product(runs, list(zip(spec["limit_pcts"], spec["limits"]))):
        env = {"LD_PRELOAD": path, "VRAM_LIMIT": str(limit), "VRAMSHIM_POLICY": "cyclic", "VRAMSHIM_LOG": "info"}
        shim_log = None
        if args.shim_log_dir:
            os.makedirs(args.shim_log_dir, exist_ok=True)
            shim_log = os.path.join(args.shim_log_dir, "%s_%d.log" % (who, pct))
            env.update({"VRAMSHIM_LOG": "debug", "VRAMSHIM_LOG_FILE": shim_log})
        res, log = run_child("device", spec, env, args.child_timeout)
        if shim_log and os.path.exists(shim_log):
            with open(shim_log, errors="replace") as f:
                log += f.read()  # the exit summary is there
        failed |= res is None
        summary = parse_shim_summary(log)
        summaries.append((who, pct, summary))
        if res and res.get("host_ns_per_pass"):
            host_times.append((who, pct, res["host_ns_per_pass"], median(res["times"])))
        if res and res.get("traffic"):
            traffic.append((who, pct, res["traffic"], res.get("written_back_per_pass")))
        if res and "gpu_idle" in res:
            idles.append(("%s cyclic %d%%" % (who, pct), res["gpu_idle"], res.get("block_spans")))
        moved = res.get("streamed_per_pass") if res else None
        if moved is None and summary and res:
            # No live snapshot: the exit totals over every pass, loading included.
            moved = summary["to_device"] / float(spec["warmup"] + spec["passes"])
            from_totals = True
        rows.append({"config": "%s cyclic %d%%" % (label, pct), "limit": limit,
                     "need": streamed_bytes(limit, spec, activations), "streamed": moved,
                     "seconds": median(res["times"]) if res else None, "note": "failed (see above)"})

    acc = {"skipped": "not run (--no-accelerate)"} if args.no_accelerate else None
    if acc is None:
        acc, _ = run_child("accelerate", spec, {}, args.child_timeout)
        failed |= acc is None
    if acc is not None and "skipped" in acc:
        rows.append({"config": "c) accelerate cpu_offload", "limit": None, "need": spec["weights"],
                     "streamed": None, "seconds": None, "note": acc["skipped"]})
    else:
        rows.append({"config": "c) accelerate cpu_offload", "limit": None, "need": spec["weights"],
                     "streamed": spec["weights"], "seconds": median(acc["times"]) if acc else None,
                     "note": "failed (see above)"})

    loop_by_limit = {}
    for run in stream["loop"]:
        limit = run["limit"]
        seconds = median(run["times"])
        loop_by_limit[limit] = seconds
        pct = "" if limit is None else " %d%%" % spec["limit_pcts"][spec["limits"].index(limit)]
        rows.append({"config": ("d) streaming loop%s" % pct) if limit else "d) streaming loop, all",
                     "limit": limit, "need": run["streamed_per_pass"] if limit is None else
                     streamed_bytes(limit, spec, activations),
                     "streamed": run["streamed_per_pass"], "seconds": seconds, "note": ""})
    # Each vramshim row against the loop at its limit; accelerate, which
    # streams everything, against the loop streaming everything.
    for r in rows:
        if r["config"].startswith((VRAMSHIM_ROW, BASELINE_ROW, "c) ")):
            r["loop"] = loop_by_limit.get(r["limit"])
    print()
    for line in format_table(rows, compute, h2d):
        print(line)
    print()
    print("bound = max(C, S / B): C = %.3f s (%s), B = %.1f GB/s pinned H2D, S = the bytes that must stream "
          "at the limit (blocks that do not fit beside two buffers and %s of activations)" % (
              compute, "no-limit run" if spec["resident_fits"] and rows[0]["seconds"] else "resident weights",
              h2d / 1e9, format_bytes(activations)))
    print("x loop = s/pass over the streaming loop's at the same limit (accelerate: the loop streaming all)")
    if from_totals:
        print("vramshim moved/pass: its exit totals over warm-up and timed passes, loading included "
              "(give --vramshim-tool for the timed passes alone)")
    for config, idle, spans in idles:
        stall = stall_inside_blocks(spans, resident_spans)
        print("%s: GPU idle %.1f%% of a pass between blocks (CUDA events), %d bubbles over %.0f us, %.3f ms in "
              "them, the longest %.3f ms%s" % (
                  config, 100.0 * idle["idle"], idle["bubbles"], BUBBLE_MS * 1e3, idle["gap_ms"], idle["longest_ms"],
                  "; blocks longer than resident by %.1f%% of the pass (waits inside blocks)" % (100.0 * stall)
                  if stall is not None else ""))
    for who, pct, s in summaries:
        if s:
            print("%s %d%% exit summary: evictions %d, restores %d, to host %s, to device %s%s" % (
                who, pct, s["evictions"], s["restores"], format_bytes(s["to_host"]), format_bytes(s["to_device"]),
                ", host time making room and restoring %.1f ms (%.2f ms a pass over %d passes)" % (
                    s["restore_wait_ms"], s["restore_wait_ms"] / passes_run, passes_run)
                if s["restore_wait_ms"] is not None else "") + (
                "; plans built %d, learned cycle %d operations%s" % (
                    s["plans_built"], s["cycle_ops"],
                    " (built for %s)" % s["plan_causes"] if s["plan_causes"] else "")
                if s["plans_built"] is not None else ""))
        else:
            print("%s %d%%: no exit summary in its output" % (who, pct))
    for who, pct, ns, seconds in host_times:
        print("%s %d%% host time a timed pass: making room and restoring %.1f ms, waits for the GPU %.1f ms, "
              "VMM calls %.1f ms (of a %.1f ms pass; the launching thread's and any other's)" % (
                  who, pct, ns["restore_wait_ns"] / 1e6, ns["host_gpu_wait_ns"] / 1e6, ns["host_vmm_ns"] / 1e6,
                  seconds * 1e3))
    for who, pct, t, written in traffic:
        w, o = t["weights"], t["others"]
        print("%s %d%% a timed pass: weight blocks %.1f restores (%s), %.1f evictions; other allocations "
              "(%s alive) %.1f restores (%s), %.1f evictions (%s); copied out %s" % (
                  who, pct, w[0], format_bytes(w[1]), w[2], format_bytes(t["other_bytes"]), o[0], format_bytes(o[1]),
                  o[2], format_bytes(o[3]), format_bytes(written) if written is not None else "-"))
    print(goal_summary(rows, compute, h2d))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
