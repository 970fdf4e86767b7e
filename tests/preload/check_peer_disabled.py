#!/usr/bin/env python3
"""A read across devices after cuCtxDisablePeerAccess must fault under the shim.

Runs PROGRAM (a client with --peer-then-disable) and checks that it died of
SIGSEGV after the simulated driver's line naming the illegal access: the
shim revoked the peer's grant on the evictable allocations (or never gave it
again on a later map), so the kernel meets what it would meet without the
shim.

    check_peer_disabled.py PROGRAM [ARGS...]

Exit status: 0 when it faulted so, 1 otherwise (one line saying how it ended).
"""
import signal
import subprocess
import sys


def main():
    if len(sys.argv) < 2:
        print("usage: check_peer_disabled.py PROGRAM [ARGS...]", file=sys.stderr)
        return 2
    run = subprocess.run(sys.argv[1:], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, timeout=280)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    if "checksums OK" not in run.stdout:
        print("FAIL: the workload before the disable did not finish byte-exact")
        return 1
    # Under a sanitizer the fault is its report of a SEGV (it handles the
    # signal simcuda raises) and its own exit status.
    sanitized_segv = run.returncode != 0 and "Sanitizer: SEGV" in run.stderr
    if run.returncode != -signal.SIGSEGV and not sanitized_segv:
        print(f"FAIL: exit status {run.returncode}, not death by SIGSEGV: the read after the disable went through")
        return 1
    if "illegal address" not in run.stderr:
        print("FAIL: SIGSEGV without the simulated driver's illegal-access line: something else crashed")
        return 1
    print("ok: the read after cuCtxDisablePeerAccess faulted")
    return 0


if __name__ == "__main__":
    sys.exit(main())
