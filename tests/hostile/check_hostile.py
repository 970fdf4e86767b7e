#!/usr/bin/env python3
"""check_hostile.py CASE: one hostile condition (issue 16) set up around a
program under the shim, and what must hold.

The program (hostile_client) keeps running and loses nothing: exit status
0, every byte read back. The shim may say so in one warning line. Cases
that need a private mount or PID namespace re-run themselves under
`unshare` and exit 77 where the machine refuses it.

Environment (from tests/hostile/meson.build): HOSTILE_SHIM, HOSTILE_CLIENT,
HOSTILE_VRAMSHIM, and LD_LIBRARY_PATH naming the simulated driver.
"""
import os
import signal
import stat
import subprocess
import sys
import tempfile
import time

SKIP = 77
SHIM = os.environ["HOSTILE_SHIM"]
CLIENT = os.environ["HOSTILE_CLIENT"]
VRAMSHIM = os.environ["HOSTILE_VRAMSHIM"]
MODES = {
    "track": {},
    "cap": {"VRAMSHIM_MODE": "cap", "VRAM_LIMIT": "256M"},
    "offload": {"VRAM_LIMIT": "8M", "SIMCUDA_DEVICE_MEM": "256M"},
}


class Failure(Exception):
    pass


def check(cond, what):
    if not cond:
        raise Failure(what)


def shim_env(mode="track", **extra):
    env = dict(os.environ)
    for name in list(env):
        if name.startswith("VRAMSHIM_") or name == "VRAM_LIMIT":
            del env[name]
    env["LD_PRELOAD"] = SHIM
    env.update(MODES[mode])
    env.update({k: str(v) for k, v in extra.items()})
    return env


def run_client(args, env, timeout=60, **kw):
    proc = subprocess.run([CLIENT] + args, env=env, capture_output=True, text=True,
                          timeout=timeout, **kw)
    return proc


def expect_ok(proc, what, max_warnings=1):
    out = proc.stdout + proc.stderr
    check(proc.returncode == 0,
          f"{what}: exit status {proc.returncode} (signal {-proc.returncode if proc.returncode < 0 else 0});"
          f" output:\n{out}")
    warnings = [l for l in proc.stderr.splitlines() if l.startswith("vramshim[")]
    check(len(warnings) <= max_warnings,
          f"{what}: {len(warnings)} shim lines, at most {max_warnings} expected:\n{proc.stderr}")


def snapshot_names():
    try:
        return sorted(n for n in os.listdir("/dev/shm") if n.startswith(f"vramshim-{os.geteuid()}-"))
    except FileNotFoundError:
        return []


def in_namespace(flags, case):
    """Re-runs this case under `unshare FLAGS`; returns the exit status, or
    None when already inside."""
    if os.environ.get("HOSTILE_IN_NAMESPACE") == case:
        return None
    probe = subprocess.run(["unshare"] + flags + ["true"], capture_output=True)
    if probe.returncode != 0:
        print(f"skipped: unshare {' '.join(flags)} is not allowed here: {probe.stderr.decode().strip()}")
        sys.exit(SKIP)
    env = dict(os.environ, HOSTILE_IN_NAMESPACE=case)
    return subprocess.run(["unshare"] + flags + [sys.executable, __file__, case], env=env).returncode


# Row 1: fork, then exit in the child.
def case_fork_exit(mode):
    start = time.monotonic()
    try:
        proc = run_client(["fork-exit"], shim_env(mode), timeout=30)
    except subprocess.TimeoutExpired:
        raise Failure(f"{mode}: the program hung (fork-then-exit child)")
    expect_ok(proc, f"{mode}: fork-then-exit", max_warnings=0)
    print(f"{mode}: {proc.stdout.strip()} ({time.monotonic() - start:.2f} s in all)")


CASES = {
    "fork_exit_track": lambda: case_fork_exit("track"),
    "fork_exit_cap": lambda: case_fork_exit("cap"),
    "fork_exit_offload": lambda: case_fork_exit("offload"),
}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in CASES:
        print(f"usage: {sys.argv[0]} {'|'.join(sorted(CASES))}", file=sys.stderr)
        return 2
    try:
        rc = CASES[sys.argv[1]]()
    except Failure as e:
        print(f"FAIL ({sys.argv[1]}): {e}")
        return 1
    return rc or 0


if __name__ == "__main__":
    sys.exit(main())
