#!/usr/bin/env python3
"""The differential fuzzer: runs fuzz_program on the simulated driver alone and
under the shim, and compares every byte.

    fuzz_run.py --program FUZZ_PROGRAM --shim LIBVRAMSHIM --spill-parent DIR
                [--seeds A-B | --seeds N,M,...] [--default-seeds A-B]
                [--variants K | --env NAME=VALUE ...] [--fractions F,G,...]
                [--ops N] [--program-args ARGS] [--jobs J] [--progress] [--run-timeout S]

Without --seeds, the seeds are $FUZZ_SEEDS, else --default-seeds; the jobs
(seeds run at once) $FUZZ_JOBS, else 1.

For each seed the program runs once without the shim (the reference: its
`digest` lines and its `footprint`, the most bytes it had live), then under
LD_PRELOAD in K variants chosen from the seed: VRAM_LIMIT from 1/2 to 1/8 of
the footprint (--fractions 6,8: 1/6 and 1/8 only, the limits where each
operation cycles most); the cap mode (VRAMSHIM_MODE=cap at a fraction of the
footprint: the run must match or end with a clean `oom` line where the
reference went on, never crash); SIMCUDA_LAG; the disk tier with a host pool
(VRAMSHIM_HOST_LIMIT) smaller than the footprint; VRAMSHIM_POLICY,
VRAMSHIM_PARTIAL, VRAMSHIM_PREFETCH and VRAMSHIM_PIN_DEVICE_POINTERS. A run
whose output differs from the reference, that exits otherwise than 0, is
killed by a signal or runs past its time (--run-timeout, 300 s) is a finding; each is printed with
the command and environment that reproduce it.

The evictions and restores come from the shim's exit summary
(VRAMSHIM_LOG=info); a cycle is a restore (each follows an eviction). The last
line is

    fuzz: N seeds, R runs, F findings, E evictions, S restores, C cycles

Exit status: 0 without findings, 1 with some, 2 on a usage error.
"""
import argparse
import concurrent.futures
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile

SUMMARY = re.compile(r"(?s)info:   evicted +(\d+) times, .*?info:   restored +(\d+) times,")
RUN_TIMEOUT_S = 300
POLICIES = ["lru", "cyclic", "learned"]
PARTIAL = ["auto", "on", "off"]
FRACTIONS = [2, 3, 4, 6, 8]


def parse_seeds(text):
    seeds = []
    for part in text.split(","):
        if "-" in part:
            first, last = part.split("-", 1)
            seeds.extend(range(int(first), int(last) + 1))
        elif part:
            seeds.append(int(part))
    return seeds


def variants_for(seed, footprint, count, spill_parent, fractions=FRACTIONS):
    """The variants of one seed: a function of the seed and the fractions."""
    rng = random.Random(seed * 7919 + 17)
    variants = []
    for k in range(count):
        env = {"VRAMSHIM_LOG": "info"}
        fraction = fractions[k % len(fractions)] if k < len(fractions) else rng.choice(fractions)
        limit = max(footprint // fraction, 1 << 20)
        name = "1/%d" % fraction
        cap = k == count - 1 and count > 1
        if cap:
            env["VRAMSHIM_MODE"] = "cap"
            limit = max(footprint // rng.choice([1, 2, 4]), 1 << 20)
            name = "cap " + name
        env["VRAM_LIMIT"] = str(limit)
        if not cap:
            env["VRAMSHIM_POLICY"] = rng.choice(POLICIES)
            env["VRAMSHIM_PARTIAL"] = rng.choice(PARTIAL)
            env["VRAMSHIM_PREFETCH"] = rng.choice(["on", "off"])
            env["VRAMSHIM_PIN_DEVICE_POINTERS"] = rng.choice(["on", "off"])
            name += " %s partial=%s" % (env["VRAMSHIM_POLICY"], env["VRAMSHIM_PARTIAL"])
            if rng.random() < 0.35:
                # The disk tier: a host pool of a fraction of what the
                # device limit leaves out, at least the largest buffer.
                env["VRAMSHIM_SPILL_DIR"] = spill_parent  # replaced by a fresh directory per run
                host = max(footprint // rng.choice([2, 3, 4]), 10 << 20)
                env["VRAMSHIM_HOST_LIMIT"] = str(host)
                name += " disk host=%dM" % (host >> 20)
        if rng.random() < 0.3:
            env["SIMCUDA_LAG"] = str(rng.choice([50, 200, 1000]))
            name += " lag=%s" % env["SIMCUDA_LAG"]
        variants.append((name, env, cap))
    return variants


def run(program, args, env, timeout=RUN_TIMEOUT_S):
    try:
        p = subprocess.run([program] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           timeout=timeout, check=False)
        return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired as e:
        out = e.stdout.decode(errors="replace") if e.stdout else ""
        return None, out, "timed out after %d s" % timeout


def digest_lines(out):
    return [line for line in out.splitlines() if line.startswith("digest ")]


def compare(reference, out, cap):
    """None when `out` matches the reference, else why not."""
    ref, got = digest_lines(reference), digest_lines(out)
    lines = out.splitlines()
    oom = any(line.startswith("oom ") for line in lines)
    if oom and not cap:
        return "out of memory: " + next(line for line in lines if line.startswith("oom "))
    if oom:
        if got != ref[: len(got)]:
            return first_difference(ref, got)
        return None
    if got != ref:
        return first_difference(ref, got)
    if "done" not in lines:
        return "no `done` line"
    return None


def first_difference(ref, got):
    for i, (a, b) in enumerate(zip(ref, got)):
        if a != b:
            return "digest %d differs: expected %r, got %r" % (i, a, b)
    return "%d digest lines, expected %d" % (len(got), len(ref))


def one_seed(args, seed):
    """Runs one seed's reference and variants; returns (runs, findings,
    evictions, restores)."""
    base_env = dict(os.environ)
    base_env.pop("LD_PRELOAD", None)
    base_env.setdefault("SIMCUDA_DEVICE_MEM", "2G")
    prog_args = ["--seed", str(seed), "--ops", str(args.ops)] + args.program_args.split()
    rc, reference, err = run(args.program, prog_args, base_env)
    findings = []
    if rc != 0 or "done" not in reference.splitlines():
        findings.append("seed %d: the reference run failed (status %s): %s %s" %
                        (seed, rc, reference.strip()[-300:], err.strip()[-300:]))
        return 1, findings, 0, 0
    footprint = int(re.search(r"^footprint (\d+)$", reference, re.M).group(1))
    runs, evictions, restores = 1, 0, 0
    variants = variants_for(seed, footprint, args.variants, args.spill_parent, args.fractions)
    if args.env:
        # One variant, as given (a finding's regression test).
        extra = dict(kv.split("=", 1) for kv in args.env)
        extra.setdefault("VRAMSHIM_LOG", "info")
        variants = [("given", extra, extra.get("VRAMSHIM_MODE") == "cap")]
    for name, extra, cap in variants:
        env = dict(base_env)
        env.update(extra)
        env["LD_PRELOAD"] = args.shim
        spill_dir = None
        if "VRAMSHIM_SPILL_DIR" in extra:
            spill_dir = tempfile.mkdtemp(prefix="fuzz-spill-", dir=args.spill_parent)
            env["VRAMSHIM_SPILL_DIR"] = spill_dir
        rc, out, err = run(args.program, prog_args, env, args.run_timeout)
        runs += 1
        m = SUMMARY.search(err)
        if m:
            evictions += int(m.group(1))
            restores += int(m.group(2))
        why = None
        if rc is None:
            why = err
        elif rc < 0:
            why = "killed by signal %d" % -rc
        elif rc != 0:
            why = "exit status %d: %s" % (rc, (out.strip().splitlines() or [""])[-1])
        else:
            why = compare(reference, out, cap)
        if spill_dir is not None:
            if why is None and os.listdir(spill_dir):
                why = "the spill directory is not empty after the exit"
            shutil.rmtree(spill_dir, ignore_errors=True)
        if why is not None:
            shown = " ".join("%s=%s" % (k, v) for k, v in sorted(extra.items()))
            tail = "\n    ".join(err.strip().splitlines()[-6:])
            findings.append("seed %d, variant %s: %s\n  reproduce: %s LD_PRELOAD=%s %s %s\n    %s" %
                            (seed, name, why, shown, args.shim, args.program, " ".join(prog_args), tail))
    return runs, findings, evictions, restores


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--program", required=True)
    parser.add_argument("--shim", required=True)
    parser.add_argument("--spill-parent", required=True)
    parser.add_argument("--seeds", help="A-B or N,M,...; default: $FUZZ_SEEDS, else --default-seeds")
    parser.add_argument("--default-seeds", default="1-8")
    parser.add_argument("--variants", type=int, default=6)
    parser.add_argument("--fractions", default=",".join(map(str, FRACTIONS)),
                        help="the limits of the offload variants, as fractions of the footprint: "
                             "2,3,4 stands for 1/2, 1/3 and 1/4 (default %(default)s)")
    parser.add_argument("--ops", type=int, default=160)
    parser.add_argument("--program-args", default="", help="more arguments of fuzz_program (--min-kib, --max-mib)")
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help="run this one variant instead of the seed's (repeatable)")
    parser.add_argument("--progress", action="store_true", help="a running total after each seed")
    parser.add_argument("--run-timeout", type=int, default=RUN_TIMEOUT_S, metavar="S",
                        help="seconds a run under the shim may take before it is a finding (default %(default)s; "
                             "the disk tier's variants on a loaded machine may need more)")
    parser.add_argument("--jobs", type=int, default=int(os.environ.get("FUZZ_JOBS", "1")))
    args = parser.parse_args()
    seeds = parse_seeds(args.seeds or os.environ.get("FUZZ_SEEDS") or args.default_seeds)
    try:
        args.fractions = [int(f) for f in args.fractions.split(",")]
    except ValueError:
        args.fractions = []
    if not seeds or args.variants < 1 or args.jobs < 1 or not args.fractions or min(args.fractions) < 2:
        parser.print_usage(sys.stderr)
        return 2
    os.makedirs(args.spill_parent, exist_ok=True)
    total_runs = total_evictions = total_restores = 0
    findings = []
    with concurrent.futures.ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for seed, (runs, found, evictions, restores) in zip(seeds, pool.map(lambda s: one_seed(args, s), seeds)):
            total_runs += runs
            total_evictions += evictions
            total_restores += restores
            for f in found:
                print("FINDING:", f, flush=True)
            findings.extend(found)
            if args.progress:
                print("progress: seed %d, %d runs, %d findings, %d evictions, %d restores" %
                      (seed, total_runs, len(findings), total_evictions, total_restores), flush=True)
    cycles = min(total_evictions, total_restores)
    print("fuzz: %d seeds, %d runs, %d findings, %d evictions, %d restores, %d cycles" %
          (len(seeds), total_runs, len(findings), total_evictions, total_restores, cycles), flush=True)
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
