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
import re
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

SKIP = 77
SHIM = os.environ["HOSTILE_SHIM"]
CLIENT = os.environ["HOSTILE_CLIENT"]
VRAMSHIM = os.environ["HOSTILE_VRAMSHIM"]
FIXTURE = os.environ.get("HOSTILE_FIXTURE", "")
SPILL_PROGRAM = os.environ.get("HOSTILE_SPILL_PROGRAM", "")
SCRATCH = os.environ.get("HOSTILE_SCRATCH", tempfile.gettempdir())
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


def wait_for_snapshot(pid, timeout=10.0):
    """The path of `pid`'s snapshot (vramshim-UID-PIDNS-PID; the name
    before issue 16, vramshim-UID-PID, is found too)."""
    names = [f"vramshim-{os.geteuid()}-{os.stat('/proc/self/ns/pid').st_ino}-{pid}",
             f"vramshim-{os.geteuid()}-{pid}"]
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        for name in names:
            if os.path.exists("/dev/shm/" + name):
                return "/dev/shm/" + name
        time.sleep(0.02)
    raise Failure(f"no snapshot {names[0]} after {timeout} s")


def start_client(args, env, **kw):
    proc = subprocess.Popen([CLIENT] + args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, **kw)
    line = proc.stdout.readline()
    if line.strip() != "ready":
        out, err = proc.communicate(timeout=30)
        raise Failure(f"the program did not start: {line}{out}{err}")
    return proc


def finish(proc, what, timeout=60, max_warnings=1):
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        raise Failure(f"{what}: the program hung:\n{out}{err}")
    expect_ok(subprocess.CompletedProcess(proc.args, proc.returncode, out, err), what, max_warnings)
    return out, err


# Row 2: /dev/shm full (another user filled it; Docker gives 64 MiB).
def case_shm_full():
    rc = in_namespace(["-m", "--propagation", "private"] if os.geteuid() == 0
                      else ["-r", "-m", "--propagation", "private"], "shm_full")
    if rc is not None:
        return rc
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m,mode=1777", "tmpfs", "/dev/shm"], check=True)
    fd = os.open("/dev/shm/filler", os.O_CREAT | os.O_WRONLY, 0o600)
    try:
        while os.write(fd, b"\xff" * 4096) > 0:
            pass
    except OSError:
        pass
    os.close(fd)
    for mode in MODES:
        proc = run_client(["work", "600"], shim_env(mode))
        expect_ok(proc, f"{mode}, /dev/shm full")
        check(not snapshot_names(), f"{mode}: a snapshot was left behind: {snapshot_names()}")
        print(f"{mode}: {proc.stdout.splitlines()[-1]}; {proc.stderr.strip() or 'no warning'}")


# Row 3: `truncate -s 0` on the live snapshot, again and again.
def case_snapshot_truncated():
    for mode in MODES:
        # Stopped by SIGUSR1 once observed: however slow the machine, it
        # still runs when `vramshim dump` looks.
        proc = start_client(["work", "60000"], shim_env(mode))
        path = wait_for_snapshot(proc.pid)
        # Readers run meanwhile, truncated under: they may report the
        # snapshot truncated, never die of SIGBUS.
        stop_truncating = threading.Event()

        def truncate_often():
            while not stop_truncating.is_set():
                try:
                    os.truncate(path, 0)
                except FileNotFoundError:
                    pass
                time.sleep(0.002)
        truncator = threading.Thread(target=truncate_often)
        truncator.start()
        end = time.monotonic() + 1.0
        readers = 0
        try:
            while time.monotonic() < end:
                for reader in (["ps"], ["metrics"], ["dump", str(proc.pid)]):
                    r = subprocess.run([VRAMSHIM, *reader], capture_output=True, timeout=60)
                    readers += 1
                    check(r.returncode >= 0, f"{mode}: vramshim {reader[0]} died of signal {-r.returncode} "
                                             f"while the snapshot was truncated")
        finally:
            stop_truncating.set()
            truncator.join()
        # The live view comes back with the next publications.
        time.sleep(0.6)
        if proc.poll() is not None:
            finish(proc, f"{mode}, snapshot truncated")
        dump = subprocess.run([VRAMSHIM, "dump", str(proc.pid), "--json"], capture_output=True, text=True)
        alive = proc.poll() is None
        if alive:
            proc.send_signal(signal.SIGUSR1)
        check(dump.returncode == 0, f"{mode}: the live view did not recover after the truncation: {dump.stderr}")
        check(alive, f"{mode}: the program ended before it was told to")
        finish(proc, f"{mode}, snapshot truncated")
        print(f"{mode}: survived a second of truncations, {readers} reads among them; the live view recovered")


# Row 5: another user pre-creates our snapshot names.
def case_squatted_names():
    if os.geteuid() != 0:
        print("skipped: needs root to act as two other users")
        return SKIP
    me, other = 65534, 65533
    pidns = os.stat("/proc/self/ns/pid").st_ino
    dead = 2147483000  # above any pid_max: never alive
    squat = f"/dev/shm/vramshim-{me}-{pidns}-{dead}"
    fd = os.open(squat, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    os.fchown(fd, other, other)
    os.close(fd)
    try:
        as_me = lambda: (os.setgid(me), os.setuid(me))
        ps = subprocess.run([VRAMSHIM, "ps"], capture_output=True, text=True, preexec_fn=as_me)
        check(ps.returncode == 0, f"ps exited {ps.returncode}: {ps.stderr}")
        check("removed" not in ps.stdout + ps.stderr,
              f"ps claims to have removed a file it cannot remove:\n{ps.stdout}{ps.stderr}")
        check(os.path.exists(squat), "the other user's file is gone")

        # The program whose name is squatted runs on, without a live view.
        def squat_then_become_me():
            name = f"/dev/shm/vramshim-{me}-{pidns}-{os.getpid()}"
            fd = os.open(name, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            os.write(fd, b"not a snapshot")
            os.fchown(fd, other, other)
            os.close(fd)
            as_me()
        proc = subprocess.Popen([CLIENT, "work", "300"], env=shim_env("offload"), stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, preexec_fn=squat_then_become_me)
        name = f"/dev/shm/vramshim-{me}-{pidns}-{proc.pid}"
        try:
            finish(proc, "squatted snapshot name")
            with open(name, "rb") as f:
                check(f.read() == b"not a snapshot", "the other user's file was changed")
            check(os.stat(name).st_uid == other, "the other user's file was replaced")
        finally:
            if os.path.exists(name):
                os.unlink(name)
        print(f"ps left {squat} alone and said nothing false; the program ran without its live view")
    finally:
        os.unlink(squat)


# Row 14: two containers with PID namespaces of their own, one /dev/shm.
def case_pid_namespaces():
    probe = subprocess.run(["unshare", "-p", "-f", "--mount-proc", "true"], capture_output=True)
    if probe.returncode != 0:
        print(f"skipped: PID namespaces are not allowed here: {probe.stderr.decode().strip()}")
        return SKIP
    before = set(snapshot_names())
    env = shim_env("offload")
    # In each: the program (pid 2 there, after the shell) and `vramshim dump` of it.
    script = f'"{CLIENT}" work 2500 >/dev/null & sleep 1; "{VRAMSHIM}" dump $! --json >/dev/null && echo dumped; wait $!'
    containers = [subprocess.Popen(["unshare", "-p", "-f", "--mount-proc", "sh", "-c", script], env=env,
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for _ in range(2)]
    time.sleep(1.5)
    # Only names from other PID namespaces: other programs of this machine
    # may come and go in ours meanwhile.
    own_ns = str(os.stat("/proc/self/ns/pid").st_ino)
    foreign = lambda: {n for n in snapshot_names() if n.count("-") == 3 and n.split("-")[2] != own_ns} - before
    names = foreign()
    ps = subprocess.run([VRAMSHIM, "ps"], capture_output=True, text=True)
    still = foreign()
    outs = [c.communicate(timeout=60) for c in containers]
    for c, (out, err) in zip(containers, outs):
        check(c.returncode == 0, f"a container's program failed ({c.returncode}):\n{out}{err}")
        check("dumped" in out, f"vramshim dump inside a container failed:\n{out}{err}")
    check(len(names) == 2, f"two containers, snapshots {sorted(names)}: one replaced the other")
    check(still == names, f"vramshim ps on the host removed {sorted(names - still)}:\n{ps.stderr}")
    print(f"two containers, two snapshots {sorted(names)}; ps on the host left them alone")


OUTPUTS = {"VRAMSHIM_TRACE": "trace", "VRAMSHIM_DEBUG_SNAPSHOT": "debug", "VRAMSHIM_LOG_FILE": "log"}


# Row 4: symlinks planted at the output paths (and the debug snapshot's
# predictable temporary name) in a shared directory; another user's file.
def case_planted_symlinks():
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o1777)
        target = os.path.join(d, "precious")
        with open(target, "w") as f:
            f.write("precious\n")
        env = shim_env("offload", VRAMSHIM_LOG="info")
        for var, name in OUTPUTS.items():
            os.symlink(target, os.path.join(d, name))
            env[var] = os.path.join(d, name)
        debug_tmp = lambda: os.symlink(target, os.path.join(d, f"debug.{os.getpid()}.tmp"))
        proc = subprocess.Popen([CLIENT, "work", "300"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, preexec_fn=debug_tmp)
        _, err = finish(proc, "planted symlinks", max_warnings=100)
        with open(target) as f:
            check(f.read() == "precious\n", "the symlinks' target was overwritten")
        for var in OUTPUTS:
            check(var in err, f"no warning names {var}:\n{err}")
        if os.geteuid() == 0:
            other = os.path.join(d, "others")
            with open(other, "w") as f:
                f.write("theirs\n")
            os.chown(other, 65533, 65533)
            env = shim_env("offload", VRAMSHIM_TRACE=other)
            finish(subprocess.Popen([CLIENT, "work", "200"], env=env, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True), "another user's file as the trace")
            with open(other) as f:
                check(f.read() == "theirs\n", "another user's file was overwritten by the trace")
        print("the planted symlinks' target and another user's file are untouched; each output warned")


# Row 4: files the shim creates are 0600 whatever the umask.
def case_fresh_files_private():
    with tempfile.TemporaryDirectory() as d:
        env = shim_env("offload", VRAMSHIM_LOG="info")
        for var, name in OUTPUTS.items():
            env[var] = os.path.join(d, name)
        old = os.umask(0o022)
        try:
            proc = run_client(["work", "300"], env)
        finally:
            os.umask(old)
        expect_ok(proc, "fresh output files", max_warnings=100)
        for var, name in OUTPUTS.items():
            path = os.path.join(d, name)
            check(os.path.exists(path), f"{var}: {path} was not written")
            mode = stat.S_IMODE(os.stat(path).st_mode)
            check(mode == 0o600, f"{var}: {path} has mode {mode:04o}, expected 0600")
        # A second run replaces its own earlier trace.
        proc = run_client(["work", "100"], env)
        expect_ok(proc, "second run", max_warnings=100)
        check("VRAMSHIM_TRACE" not in proc.stderr, f"the second run refused its own trace:\n{proc.stderr}")
        print("trace, debug snapshot and log created 0600 under umask 022; a second run reuses them")


# Row 6: a FIFO at VRAMSHIM_LOG_FILE or VRAMSHIM_TRACE, with no reader or a
# reader that goes away.
def case_fifo(reader):
    for var in ("VRAMSHIM_LOG_FILE", "VRAMSHIM_TRACE"):
        with tempfile.TemporaryDirectory() as d:
            fifo = os.path.join(d, "fifo")
            os.mkfifo(fifo, 0o600)
            env = shim_env("offload", VRAMSHIM_LOG="debug")
            env[var] = fifo
            rfd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK) if reader else None
            try:
                proc = subprocess.Popen([CLIENT, "work", "800"], env=env, stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
                if rfd is not None:
                    time.sleep(0.3)
                    os.close(rfd)  # the reader goes away while the program logs
                    rfd = None
                finish(proc, f"{var} is a FIFO ({'reader leaves' if reader else 'no reader'})",
                       timeout=30, max_warnings=100000)
            finally:
                if rfd is not None:
                    os.close(rfd)
        print(f"{var}: a FIFO {'whose reader leaves' if reader else 'without a reader'} neither blocked nor killed the program")


# Row 12: `vramshim run --host-limit 50%`, as its help offers.
def case_run_host_limit_percent():
    env = shim_env("track")
    del env["LD_PRELOAD"]
    env.update({"VRAMSHIM_LIBRARY": SHIM, "SIMCUDA_DEVICE_MEM": "256M"})
    proc = subprocess.run([VRAMSHIM, "run", "--limit", "8M", "--host-limit", "50%", "--", CLIENT, "work", "200"],
                          env=env, capture_output=True, text=True, timeout=60)
    expect_ok(proc, "vramshim run --host-limit 50%", max_warnings=0)
    print(f"run --host-limit 50%: {proc.stdout.splitlines()[-1]}")


def start_fixture(rows, program):
    proc = subprocess.Popen([FIXTURE, "many", str(rows), program], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    line = proc.stdout.readline().decode()
    if not line.startswith("ready "):
        proc.kill()
        raise Failure(f"the snapshot fixture did not start: {line!r} {proc.stderr.read()!r}")
    return proc, int(line.split()[1])


# Row 8: `vramshim top` on 65,536 allocations whose ids change every frame.
def case_top_many_changing_ids():
    proc, pid = start_fixture(65536, "many")
    try:
        start = time.monotonic()
        top = subprocess.run([VRAMSHIM, "top", str(pid), "--iterations", "3", "--interval", "0.2"],
                             capture_output=True, timeout=120)
        took = time.monotonic() - start
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    check(top.returncode == 0, f"top exited {top.returncode}: {top.stderr.decode()}")
    # Three frames 0.2 s apart; a quadratic lookup took 15 s per frame.
    check(took < 5.0, f"three frames of 65,536 changing allocations took {took:.1f} s")
    print(f"top: three frames of 65,536 allocations with changing ids in {took:.2f} s")


# Row 13: a program name that holds terminal escape sequences.
def case_escapes_in_program_name():
    name = "evil\x1b]0;owned\x07\x1b[2J\x9b31m\r"
    proc, pid = start_fixture(4, name)
    try:
        outputs = {
            "ps": subprocess.run([VRAMSHIM, "ps"], capture_output=True, timeout=60),
            "dump": subprocess.run([VRAMSHIM, "dump", str(pid)], capture_output=True, timeout=60),
            "top": subprocess.run([VRAMSHIM, "top", str(pid), "--iterations", "1"], capture_output=True,
                                  timeout=60),
            # Every process of the user, this one among them: a raw carriage
            # return or a byte that is not UTF-8 in a label would break the
            # scrape of all of them.
            "metrics": subprocess.run([VRAMSHIM, "metrics"], capture_output=True, timeout=60),
        }
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)
    for command, result in outputs.items():
        check(result.returncode == 0, f"{command} exited {result.returncode}: {result.stderr!r}")
        raw = result.stdout + result.stderr
        bad = sorted({b for b in raw if (b < 0x20 and b not in (0x0a,)) or b == 0x7f or b >= 0x80})
        check(not bad, f"{command} printed control bytes {[hex(b) for b in bad]}: {raw!r}")
        check(b"evil?]0;owned" in result.stdout or command == "ps" and b"evil?]0;owned"[:16] in result.stdout,
              f"{command} does not show the name with its control bytes replaced: {result.stdout!r}")
    print("ps, dump, top and metrics print the name with its control bytes replaced")


# Row 9: `vramshim dump` while the disk tier is busy (spill I/O holds the
# engine's lock for as long as a disk write takes).
def case_dump_while_spilling():
    with tempfile.TemporaryDirectory(dir=SCRATCH) as spill:
        env = shim_env("offload", VRAM_LIMIT="32M", VRAMSHIM_HOST_LIMIT="16M", VRAMSHIM_SPILL_DIR=spill,
                       SIMCUDA_DEVICE_MEM="1G", VRAMSHIM_LOG="info")
        shape = ["--buffers", "24", "--rounds", "2"]
        proc = subprocess.Popen([SPILL_PROGRAM, *shape, "--mib", "16", "--watchdog", "340"], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            wait_for_snapshot(proc.pid)
            failures, tries = [], 0
            while tries < 40 and proc.poll() is None:
                dump = subprocess.run([VRAMSHIM, "dump", str(proc.pid), "--json"], capture_output=True,
                                      text=True, timeout=60)
                if proc.poll() is not None:
                    break  # the dump may have raced the exit
                tries += 1
                if dump.returncode != 0:
                    failures.append(dump.stderr.strip())
                time.sleep(0.05)
            out, err = proc.communicate(timeout=360)  # the statistics come at exit
        finally:
            if proc.poll() is None:
                proc.kill()
                out, err = proc.communicate()
        check(proc.returncode == 0, f"the program failed ({proc.returncode}):\n{err}")
        check(tries >= 10, f"only {tries} dumps while the program ran: make it run longer\n{err}")
        check(not failures, f"{len(failures)} of {tries} dumps failed while the disk tier was busy: {failures[:3]}")
        stats = re.search(r"info:   disk +(\d+) spills \(\d+ bytes\), (\d+) restores", err)
        check(stats is not None and int(stats.group(1)) > 0 and int(stats.group(2)) > 0,
              f"the program never used the disk tier:\n{err}")
        print(f"{tries} dumps while the program spilled ({stats.group(1)} spills, {stats.group(2)} reads), none failed")


CASES = {
    "dump_while_spilling": case_dump_while_spilling,
    "top_many_changing_ids": case_top_many_changing_ids,
    "escapes_in_program_name": case_escapes_in_program_name,
    "run_host_limit_percent": case_run_host_limit_percent,
    "planted_symlinks": case_planted_symlinks,
    "fresh_files_private": case_fresh_files_private,
    "fifo_no_reader": lambda: case_fifo(False),
    "fifo_reader_leaves": lambda: case_fifo(True),
    "shm_full": case_shm_full,
    "snapshot_truncated": case_snapshot_truncated,
    "squatted_names": case_squatted_names,
    "pid_namespaces": case_pid_namespaces,
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
