#!/usr/bin/env python3
"""Runs a program under the shim's disk tier and checks what it leaves.

    check_spill.py PARENT [--min-io-errors N] [--min-checksum-failures N]
                   [--sigkill VRAMSHIM_CLI] -- PROGRAM [ARGS...]

The environment must preload the shim in the offload mode with
VRAMSHIM_HOST_LIMIT and VRAMSHIM_LOG=info. Each run gets a fresh spill
directory (mkdtemp in PARENT, which must not be on tmpfs for O_DIRECT to be
tried) as VRAMSHIM_SPILL_DIR. The program must exit 0, and the shim's exit
summary (exit_summary.py) must be on stderr once, with its line

    vramshim[PID] info:   disk            N spills (B bytes), N restores
    (B bytes); spill file B bytes (B in use); N checksum failures, N I/O
    errors; direct|buffered I/O

with spills and restores from disk above 0, at least the given I/O errors
and checksum failures (none unless asked for); the directory must be empty
after the exit.

With --sigkill the program is killed (SIGKILL) while it spills: once the
shim logs "spill file created in", after `vramshim ps --bytes` has listed
it live with bytes on disk and `vramshim dump` has read it. Then the spill
directory must be empty, `vramshim ps` must exit 0, neither list the dead
process nor skip it as damaged, and remove its stale snapshot; and a second
run of the same program, in the same directory, must pass the checks
above.

Exit status: 0 when every check holds, 1 when one fails (one line each), 2
on a usage error.
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import exit_summary

SPILL_FILE_CREATED = "spill file created in"
KILL_DELAY_S = 1.0
RUN_TIMEOUT_S = 900

FAILURES = []


def fail(message):
    FAILURES.append(message)
    print("FAIL:", message, flush=True)


def env_for(spill_dir):
    env = dict(os.environ)
    env["VRAMSHIM_SPILL_DIR"] = spill_dir
    return env


def check_empty(spill_dir, when):
    left = os.listdir(spill_dir)
    if left:
        fail(f"{when}, the spill directory {spill_dir} holds {left!r}, expected nothing")


def check_summary(stderr, opts):
    lines = [s for s in exit_summary.parse_all(stderr) if "spills" in s]
    if len(lines) != 1:
        fail(f"{len(lines)} exit summaries with the disk tier's line, expected 1 (lines of the summary: "
             f"{exit_summary.mentions(stderr)!r})")
        return
    s = lines[0]
    for name in ("spills", "spill_bytes", "disk_restores", "restore_bytes"):
        if s[name] <= 0:
            fail(f"the summary reports {name.replace('_', ' ')} {s[name]}, expected more than 0")
    for name in ("io_errors", "checksum_failures"):
        least = opts[name]
        if least == 0 and s[name] != 0:
            fail(f"the summary reports {name.replace('_', ' ')} {s[name]} with no fault of that kind injected")
        elif s[name] < least:
            fail(f"the summary reports {name.replace('_', ' ')} {s[name]}, expected at least {least}: "
                 "the injected fault did not fire")
    print("disk tier summary:", {k: s[k] for k in ("spills", "spill_bytes", "disk_restores", "restore_bytes", "file_bytes", "used_bytes", "checksum_failures", "io_errors", "io")}, flush=True)


def run_checked(program, spill_dir, opts, what):
    run = subprocess.run(program, env=env_for(spill_dir), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, timeout=RUN_TIMEOUT_S)
    sys.stdout.write(run.stdout)
    sys.stdout.write(run.stderr)
    sys.stdout.flush()
    if run.returncode != 0:
        how = f"was killed by signal {-run.returncode}" if run.returncode < 0 else f"exited {run.returncode}"
        fail(f"{what}: {program[0]} {how}")
    check_summary(run.stderr, opts)
    check_empty(spill_dir, f"after {what}")


def listed_pids(ps_stdout):
    return {line.split()[0] for line in ps_stdout.splitlines() if line.split()}


def disk_bytes_of(ps_stdout, pid):
    """The DISK column of `vramshim ps --bytes` for `pid` (the next to last), or None."""
    for line in ps_stdout.splitlines():
        fields = line.split()
        if fields[:1] == [str(pid)] and len(fields) >= 3 and fields[-2].isdigit():
            return int(fields[-2])
    return None


def vramshim_cli(cli, *args):
    return subprocess.run([cli, *map(str, args)], capture_output=True, text=True, timeout=60)


def run_killed(program, spill_dir, cli):
    """Starts the program, kills it while it spills; True when it was killed there."""
    proc = subprocess.Popen(program, env=env_for(spill_dir), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    created = threading.Event()
    lines = []

    def drain():
        for line in proc.stderr:
            lines.append(line)
            if SPILL_FILE_CREATED in line:
                created.set()
        created.set()  # the program ended (or closed stderr) without spilling

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    created.wait(timeout=RUN_TIMEOUT_S)
    killed = False
    if proc.poll() is None and any(SPILL_FILE_CREATED in line for line in lines):
        time.sleep(KILL_DELAY_S)
        # The live process, spilling: the command lists it and reads its
        # allocations, some of them on disk.
        # The snapshot is published every 200 ms: a few tries until the
        # row shows bytes on disk.
        on_disk = None
        for _ in range(20):
            ps = vramshim_cli(cli, "ps", "--bytes")
            on_disk = disk_bytes_of(ps.stdout, proc.pid) if ps.returncode == 0 else None
            if on_disk:
                break
            time.sleep(0.2)
        if not on_disk:
            fail(f"vramshim ps --bytes never listed the spilling process {proc.pid} with bytes on disk "
                 f"(status {ps.returncode}): {ps.stdout!r} {ps.stderr!r}")
        dump = vramshim_cli(cli, "dump", proc.pid)
        if dump.returncode != 0:
            fail(f"vramshim dump {proc.pid} of the spilling process exited {dump.returncode}: {dump.stderr!r}")
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            killed = True
    proc.wait()
    reader.join(timeout=10)
    sys.stdout.write("".join(lines))
    if not killed:
        fail(f"the program was not killed while spilling (status {proc.returncode}; it never logged "
             f"{SPILL_FILE_CREATED!r} or ended within {KILL_DELAY_S} s of it): make the workload longer")
        return
    if proc.returncode != -signal.SIGKILL:
        fail(f"the program ended with status {proc.returncode}, expected SIGKILL")
    print(f"killed process {proc.pid} while it spilled", flush=True)
    check_empty(spill_dir, "after SIGKILL")

    snapshot = f"/dev/shm/vramshim-{os.geteuid()}-{os.stat('/proc/self/ns/pid').st_ino}-{proc.pid}"
    ps = vramshim_cli(cli, "ps")
    sys.stdout.write(ps.stdout + ps.stderr)
    if ps.returncode != 0:
        fail(f"vramshim ps after the kill exited {ps.returncode}: {ps.stderr!r}")
    if str(proc.pid) in listed_pids(ps.stdout):
        fail(f"vramshim ps lists the killed process {proc.pid}: {ps.stdout!r}")
    if f"skipping process {proc.pid}" in ps.stderr:
        fail(f"vramshim ps tripped over the killed process's snapshot: {ps.stderr!r}")
    if os.path.exists(snapshot):
        fail(f"the killed process's snapshot {snapshot} is still there after vramshim ps")


def main():
    args = sys.argv[1:]
    if "--" not in args or args.index("--") < 1:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        print("usage: check_spill.py PARENT [--min-io-errors N] [--min-checksum-failures N] "
              "[--sigkill VRAMSHIM_CLI] -- PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    split = args.index("--")
    options, program = args[:split], args[split + 1:]
    parent = options.pop(0)
    opts = {"io_errors": 0, "checksum_failures": 0}
    cli = None
    while options:
        name = options.pop(0)
        value = options.pop(0) if options else None
        if name == "--min-io-errors" and value is not None:
            opts["io_errors"] = int(value)
        elif name == "--min-checksum-failures" and value is not None:
            opts["checksum_failures"] = int(value)
        elif name == "--sigkill" and value is not None:
            cli = value
        else:
            print(f"check_spill.py: unknown option {name!r}", file=sys.stderr)
            return 2
    if not program:
        print("check_spill.py: no program", file=sys.stderr)
        return 2

    spill_dir = tempfile.mkdtemp(prefix="spill-", dir=parent)
    try:
        if cli is not None:
            run_killed(program, spill_dir, cli)
            run_checked(program, spill_dir, opts, "the run after the kill")
        else:
            run_checked(program, spill_dir, opts, "the run")
    finally:
        shutil.rmtree(spill_dir, ignore_errors=True)
    if not FAILURES:
        print("spill checks ok")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
