#!/usr/bin/env python3
"""test_cli.py: the `vramshim` command end to end.

usage: test_cli.py VRAMSHIM SNAPSHOT_FIXTURE SCHEMA [SHIM_LIBRARY]
       test_cli.py --attach VRAMSHIM SHIM_LIBRARY CLIENT

Runs `run`, `ps`, `dump` (text, and JSON checked against tools/dump.schema.json),
`top`, and every error message, against processes that publish snapshots with
the real writer (tests/tools/snapshot_fixture.c). `--attach` watches a simcuda
workload running under the real shim instead (needs the shim to publish; skips
with 77 until it does).
"""
import json
import os
import pty
import re
import select
import signal
import subprocess
import sys
import tempfile
import time

from vstest import check, expect_error, run_tests

VRAMSHIM = FIXTURE = SCHEMA = SHIM = None
UID = os.geteuid()
FAILURES = []


def vramshim(*args, timeout=30, env=None):
    return subprocess.run([VRAMSHIM, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


class Fixture:
    """A snapshot_fixture process; `cmd` sends one command and waits for it to be published."""

    def __init__(self, *args):
        self.proc = subprocess.Popen([FIXTURE, *args], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        assert line.startswith("ready "), f"fixture said {line!r}"
        self.pid = int(line.split()[1])
        assert self.pid == self.proc.pid

    def cmd(self, line):
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        reply = self.proc.stdout.readline().strip()
        assert reply == "ok", f"{line!r}: fixture replied {reply!r}"

    def close(self):
        if self.proc.poll() is None:
            try:
                self.proc.stdin.write("quit\n")
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
            self.proc.wait(timeout=10)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# The snapshot's name carries the PID namespace's inode (snapshot_abi.h).
PIDNS = os.stat("/proc/self/ns/pid").st_ino


def shm_path(pid):
    return f"/dev/shm/vramshim-{UID}-{PIDNS}-{pid}"


# --- a small JSON-schema checker (the subset tools/dump.schema.json uses) ----

def validate(value, schema, path="$"):
    types = schema.get("type")
    if types is not None:
        names = types if isinstance(types, list) else [types]
        ok = {
            "object": lambda v: isinstance(v, dict),
            "array": lambda v: isinstance(v, list),
            "string": lambda v: isinstance(v, str),
            "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
            "null": lambda v: v is None,
        }
        check(any(ok[n](value) for n in names), f"{path}: {value!r} is not {types}")
    if "const" in schema:
        check(value == schema["const"], f"{path}: {value!r} != {schema['const']!r}")
    if "enum" in schema:
        check(value in schema["enum"], f"{path}: {value!r} not in {schema['enum']}")
    if isinstance(value, int) and not isinstance(value, bool):
        if "minimum" in schema:
            check(value >= schema["minimum"], f"{path}: {value} < {schema['minimum']}")
        if "maximum" in schema:
            check(value <= schema["maximum"], f"{path}: {value} > {schema['maximum']}")
    if isinstance(value, str) and "pattern" in schema:
        check(re.search(schema["pattern"], value), f"{path}: {value!r} !~ {schema['pattern']}")
    if isinstance(value, dict):
        for key in schema.get("required", []):
            check(key in value, f"{path}: missing {key!r}")
        props = schema.get("properties", {})
        for key, item in value.items():
            if key in props:
                validate(item, props[key], f"{path}.{key}")
            else:
                check(schema.get("additionalProperties", True) is not False,
                      f"{path}: unexpected {key!r}")
    if isinstance(value, list):
        check(len(value) <= schema.get("maxItems", len(value)), f"{path}: too many items")
        for i, item in enumerate(value):
            validate(item, schema.get("items", {}), f"{path}[{i}]")


def dump_json(pid, *args):
    r = vramshim("dump", pid, "--json", *args)
    check(r.returncode == 0, f"dump --json failed: {r.stderr}")
    doc = json.loads(r.stdout)
    with open(SCHEMA) as f:
        schema = json.load(f)
    validate(doc, schema)
    try:
        import jsonschema  # a second opinion where it is installed
        jsonschema.validate(doc, schema)
    except ImportError:
        pass
    return doc


def place_of(doc, alloc_id):
    rows = [a for a in doc["allocations"] if a["id"] == alloc_id]
    check(len(rows) == 1, f"allocation {alloc_id} appears {len(rows)} times")
    return rows[0]


# --- tests ---------------------------------------------------------------

def test_help_for_every_command():
    r = vramshim("--help")
    check(r.returncode == 0 and "usage: vramshim COMMAND" in r.stdout, r.stdout)
    for cmd in ["run", "ps", "dump", "top"]:
        r = vramshim(cmd, "--help")
        check(r.returncode == 0, f"{cmd} --help: {r.returncode}")
        check(r.stdout.startswith(f"usage: vramshim {cmd}"), f"{cmd} --help: {r.stdout!r}")


def test_usage_errors_exit_2():
    for args, message in [
        (["frobnicate"], "unknown command 'frobnicate'"),
        (["dump"], "dump: no PID given"),
        (["dump", "abc"], "'abc' is not a process id"),
        (["dump", "1", "--sort", "colour"], "--sort colour"),
        (["dump", "1", "--state", "moon"], "--state moon"),
        (["top"], "top: no PID given"),
        (["top", "1", "--interval", "0"], "--interval 0"),
        (["ps", "extra"], "unexpected argument"),
        (["run", "--limit", "12X", "--", "true"], "--limit 12X"),
        (["run", "--limit", "G", "--", "true"], "--limit G"),
        (["run", "--host-limit", "1.G", "--", "true"], "--host-limit 1.G"),
        (["run", "--mode", "fast", "--", "true"], "--mode fast"),
        (["run", "--log", "loud", "--", "true"], "--log loud"),
        (["run"], "run: no program given"),
    ]:
        expect_error(vramshim(*args), message, status=2)
    for good in ["1073741824", "10G", "10GiB", "10GB", "1.5G", "75%", "0", "0:10G,1:20g"]:
        r = vramshim("run", "--limit", good, "--shim", "/nonexistent/libvramshim.so", "--", "true")
        expect_error(r, "cannot use the shim library /nonexistent/libvramshim.so", status=1)


def test_run_passes_environment_and_exit_status():
    names = ["VRAM_LIMIT", "VRAMSHIM_HOST_LIMIT", "VRAMSHIM_SPILL_DIR", "VRAMSHIM_MODE",
             "VRAMSHIM_LOG", "LD_PRELOAD"]
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "VRAMSHIM_LIBRARY")}
    if not SHIM:
        # No shim built beside the command: the error says where it looked.
        expect_error(vramshim("run", "--", "true", env=env), "cannot find libvramshim.so")
        print("  (no libvramshim.so built: environment and status not checked)")
        return
    shim = os.path.realpath(SHIM)
    # VRAMSHIM_LIBRARY names the library when --shim does not.
    expect_error(vramshim("run", "--", "true", env=dict(env, VRAMSHIM_LIBRARY="/nonexistent.so")),
                 "cannot use the shim library /nonexistent.so (given by VRAMSHIM_LIBRARY)")
    if os.environ.get("VRAMSHIM_TEST_SANITIZE", "none") not in ("none", ""):
        # A sanitized libvramshim.so preloaded into a program crashes at start-up
        # (the preload suite's concern): here only the paths that exec nothing.
        print("  (sanitizer build: programs are not run under the shim here)")
        return
    with tempfile.TemporaryDirectory() as spill:
        # The library is found beside the command (no --shim): build-tree layout.
        r = vramshim("run", "--limit", "1G", "--host-limit", "4G", "--spill-dir", spill,
                     "--mode", "cap", "--log", "error", "--", FIXTURE, "env", "7", *names, env=env)
        check(r.returncode == 7, f"status {r.returncode}, stderr {r.stderr!r}")
        expected = [f"VRAM_LIMIT=1G", "VRAMSHIM_HOST_LIMIT=4G", f"VRAMSHIM_SPILL_DIR={spill}",
                    "VRAMSHIM_MODE=cap", "VRAMSHIM_LOG=error", f"LD_PRELOAD={shim}"]
        check(r.stdout.splitlines() == expected, f"stdout {r.stdout!r}")
    # The example.
    r = vramshim("run", "--limit", "1G", "--", "sh", "-c", "echo $VRAM_LIMIT; exit 7", env=env)
    check((r.returncode, r.stdout) == (7, "1G\n"), f"{r.returncode} {r.stdout!r} {r.stderr!r}")
    # An existing LD_PRELOAD is kept, after the shim; --shim overrides the search.
    r = vramshim("run", "--shim", SHIM, "--", FIXTURE, "env", "0", "LD_PRELOAD",
                 env=dict(env, LD_PRELOAD="libm.so.6"))
    check(r.returncode == 0, r.stderr)
    check(r.stdout.strip() == f"LD_PRELOAD={shim}:libm.so.6", r.stdout)
    # exec, not fork: the program's death by signal is seen as such.
    r = vramshim("run", "--", FIXTURE, "raise", str(int(signal.SIGTERM)), env=env)
    check(r.returncode == -signal.SIGTERM, f"status {r.returncode}")
    expect_error(vramshim("run", "--", "/nonexistent/program", env=env),
                 "cannot run /nonexistent/program", status=127)


def test_ps_lists_processes_with_totals():
    with Fixture("script") as fx:
        fx.cmd("limit 2147483648")
        fx.cmd("add 1 1048576")
        fx.cmd("add 2 2097152")
        fx.cmd("place 2 host")
        r = vramshim("ps", "--bytes")
        check(r.returncode == 0, r.stderr)
        rows = [l.split() for l in r.stdout.splitlines() if l.split()[:1] == [str(fx.pid)]]
        check(len(rows) == 1, r.stdout)
        pid, program, mode, limit, device, host, disk, allocs = rows[0]
        check((program, mode, limit, device, host, disk, allocs) ==
              ("fixture", "offload", "2147483648", "1048576", "2097152", "0", "2"), rows[0])


def test_dump_text_rows_and_totals():
    with Fixture("script") as fx:
        fx.cmd("add 1 1048576")
        fx.cmd("add 2 4096 pitch")
        fx.cmd("keep 2 small")
        fx.cmd("touch 1")
        r = vramshim("dump", fx.pid)
        check(r.returncode == 0, r.stderr)
        lines = r.stdout.splitlines()
        check(lines[0].startswith(f"pid {fx.pid} (fixture)  mode offload"), lines[0])
        check(re.search(r"^\s+1\s+0x[0-9a-f]{16}\s+1\.00 MiB\s+0\s+device\s+device\s", lines[2]),
              lines[2])
        check("device, kept: small" in lines[3] and "4.00 KiB" in lines[3], lines[3])
        check(lines[-1].startswith("total: 2 allocations (2 shown); device 1.00 MiB"), lines[-1])
        r = vramshim("dump", fx.pid, "--bytes")
        check(" 1048576 " in r.stdout and "device 1052672," in r.stdout, r.stdout)


def test_dump_sees_allocations_move_between_places():
    with Fixture("script") as fx:
        fx.cmd("add 1 67108864")
        fx.cmd("add 2 33554432")
        check(place_of(dump_json(fx.pid), 1)["place"] == "device", "starts on the device")
        fx.cmd("place 1 host")
        doc = dump_json(fx.pid)
        a = place_of(doc, 1)
        check(a["place"] == "host" and a["evictions"] == 1, a)
        check(doc["totals"]["host_bytes"] == 67108864 and doc["totals"]["evictions"] == 1,
              doc["totals"])
        fx.cmd("place 1 disk")
        check(place_of(dump_json(fx.pid), 1)["place"] == "disk", "spilled to disk")
        r = vramshim("dump", fx.pid, "--json", "--state", "disk")
        check([a["id"] for a in json.loads(r.stdout)["allocations"]] == [1], r.stdout)
        fx.cmd("place 1 device")
        a = place_of(dump_json(fx.pid), 1)
        check(a["place"] == "device" and a["restores"] == 1 and a["evictions"] == 1, a)
        fx.cmd("free 2")
        check([a["id"] for a in dump_json(fx.pid)["allocations"]] == [1], "freed row gone")


def test_dump_json_schema_and_sorts():
    with Fixture("script") as fx:
        fx.cmd("limit 1073741824")
        for i, size in enumerate([4096, 1 << 30, 1 << 20, 65536], start=1):
            fx.cmd(f"add {i} {size} {['device', 'vmm', 'managed', 'async'][i - 1]}")
        fx.cmd("keep 3 managed")
        fx.cmd("place 2 host")
        fx.cmd("touch 4")
        fx.cmd("touch 1")
        doc = dump_json(fx.pid, "--sort", "size")
        check([a["id"] for a in doc["allocations"]] == [2, 3, 4, 1], doc["allocations"])
        check(place_of(doc, 3)["keep_resident"] == "managed", "keep reason")
        check(place_of(doc, 2)["keep_resident"] is None, "no keep reason")
        check(doc["limit_bytes"] == 1073741824 and doc["devices"][0]["limit_bytes"] == 1073741824,
              doc["devices"])
        doc = dump_json(fx.pid, "--sort", "last-use")
        check([a["id"] for a in doc["allocations"]][:2] == [1, 4], doc["allocations"])
        doc = dump_json(fx.pid, "--sort", "state")
        check([a["place"] for a in doc["allocations"]] == ["device"] * 3 + ["host"], "state order")
        doc = dump_json(fx.pid, "--sort", "age")
        check([a["id"] for a in doc["allocations"]] == [1, 2, 3, 4], "age order")


def test_top_frames_and_exit_when_process_exits():
    with Fixture("script") as fx:
        fx.cmd("limit 1073741824")
        fx.cmd("add 1 268435456")
        r = vramshim("top", fx.pid, "--iterations", "2", "--interval", "0.1")
        check(r.returncode == 0, r.stderr)
        for text in ["vramshim top - pid", "device 256 MiB of 1.00 GiB", "hottest", "largest",
                     "grew in the last"]:
            check(text in r.stdout, f"top lacks {text!r}: {r.stdout}")
        top = subprocess.Popen([VRAMSHIM, "top", str(fx.pid), "--interval", "0.1"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        time.sleep(0.5)
        fx.close()
        out, err = top.communicate(timeout=20)
        check(top.returncode == 0, f"top: {top.returncode} {err}")
        check(f"process {fx.pid} exited" in out, out[-300:])


def test_top_quits_on_q():
    with Fixture("script") as fx:
        pid, fd = pty.fork()
        if pid == 0:
            os.execv(VRAMSHIM, [VRAMSHIM, "top", str(fx.pid)])
        out = b""
        deadline = time.time() + 10
        while b"q: quit" not in out and time.time() < deadline:
            if select.select([fd], [], [], 0.2)[0]:
                out += os.read(fd, 65536)
        check(b"q: quit" in out, out[-300:])
        os.write(fd, b"q")
        deadline = time.time() + 10
        status = None
        while time.time() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if select.select([fd], [], [], 0.1)[0]:
                try:
                    os.read(fd, 65536)
                except OSError:
                    pass
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError("top did not quit on q")
        check(os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"status {status}")
        os.close(fd)


def test_stale_snapshot_removed_by_ps():
    fx = Fixture("script")
    fx.cmd("add 1 4096")
    fx.proc.stdin.write("crash\n")
    fx.proc.stdin.flush()
    # Waited for but not reaped: while the fixture is a zombie its /proc
    # entry stays, so no reader beside this test (the suites run in
    # parallel) may take its snapshot for stale yet.
    deadline = time.time() + 10
    while os.waitid(os.P_PID, fx.pid, os.WEXITED | os.WNOWAIT | os.WNOHANG) is None:
        check(time.time() < deadline, "the fixture did not crash")
        time.sleep(0.01)
    check(os.path.exists(shm_path(fx.pid)), "the crashed fixture left its snapshot")
    fx.proc.wait(timeout=10)
    r = vramshim("ps")
    check(r.returncode == 0, r.stderr)
    # Any reader of this user removes a stale snapshot it finds: another
    # test's `vramshim ps` running beside this one (the suites run in
    # parallel) may get there first, and then this one has nothing to say.
    # Either way it must be gone.
    check(not os.path.exists(shm_path(fx.pid)), "stale snapshot still there")
    if f"removed the stale snapshot of exited process {fx.pid}" not in r.stderr:
        print(f"  (another reader removed the stale snapshot of {fx.pid} first)")
    check(str(fx.pid) not in r.stdout.split(), r.stdout)


def test_error_no_such_process():
    p = subprocess.Popen(["true"])
    p.wait()
    for cmd in ["dump", "top"]:
        r = vramshim(cmd, p.pid)
        expect_error(r, f"vramshim: no process {p.pid}")


def test_error_not_under_shim():
    p = subprocess.Popen(["sleep", "30"])
    try:
        r = vramshim("dump", p.pid)
        expect_error(r, f"vramshim: process {p.pid} is not running under vramshim "
                        f"(no snapshot {shm_path(p.pid)})")
    finally:
        p.kill()
        p.wait()


def test_error_other_users_process():
    if UID == 0:
        p = subprocess.Popen(["sleep", "30"], user=65534)
        other = p.pid
    else:
        p = None
        other = next((int(d) for d in sorted(os.listdir("/proc"), key=lambda d: (len(d), d))
                      if d.isdigit() and os.stat(f"/proc/{d}").st_uid != UID), None)
        if other is None:
            print("  (no process of another user to try)")
            return
    try:
        time.sleep(0.1)  # let the child's setuid happen before we look
        r = vramshim("dump", other)
        expect_error(r, f"process {other} belongs to another user")
        check("reads only your own processes" in r.stderr, r.stderr)
    finally:
        if p:
            p.kill()
            p.wait()


def test_error_damaged_snapshots():
    for how, message in [
        ("bad-version", "incompatible snapshot version 99 (this vramshim reads 1)"),
        ("truncated", "truncated snapshot"),
        ("corrupt-place", "corrupt snapshot: row 1"),
        ("corrupt-count", "corrupt snapshot: 65 rows in a capacity of 64"),
        ("bad-magic", "corrupt snapshot: bad magic number"),
        ("mode-0644", "mode 0644, expected a file of mode 0600"),
        ("mid-update", "left mid-update"),
    ]:
        with Fixture("damage", how) as fx:
            for cmd in ["dump", "top"]:
                expect_error(vramshim(cmd, fx.pid), message)
            # ps reports the damaged snapshot and goes on listing the rest.
            r = vramshim("ps")
            check(r.returncode == 0 and f"skipping process {fx.pid}: " in r.stderr and message in r.stderr
                  and str(fx.pid) not in r.stdout.split(), f"ps with {how}: {r.stderr!r}")


def attach_live(client):
    """The issue's scenario: a program holding 8 x 64 MiB under `vramshim run
    --limit 256M`, read from outside while it runs. `ps` lists it; `dump
    --json` (schema-checked) shows the eight 64 MiB allocations, at least four
    of them on the host, and allocations seen moving between places."""
    env = dict(os.environ)
    proc = subprocess.Popen([VRAMSHIM, "run", "--shim", SHIM, "--limit", "256M", "--", client,
                             "--buffers", "8", "--mib", "64", "--rounds", "2", "--hold-ms", "1500"],
                            env=env, stdout=subprocess.DEVNULL)
    places = {}
    best_on_host = -1
    listed = False
    seen = False
    while proc.poll() is None:
        r = vramshim("dump", proc.pid, "--json")
        if r.returncode == 0:
            seen = True
            doc = json.loads(r.stdout)
            with open(SCHEMA) as f:
                validate(doc, json.load(f))
            big = [a for a in doc["allocations"] if a["size"] == 64 << 20]
            for a in big:
                places.setdefault(a["id"], set()).add(a["place"])
            if len(big) == 8:
                best_on_host = max(best_on_host, sum(1 for a in big if a["place"] == "host"))
            ps = vramshim("ps", "--bytes")
            listed = listed or any(line.split()[:1] == [str(proc.pid)] for line in ps.stdout.splitlines())
        time.sleep(0.05)
    check(proc.returncode == 0, f"workload status {proc.returncode}")
    check(seen, "no snapshot was ever published by the shim")
    check(listed, "vramshim ps never listed the workload")
    check(best_on_host >= 4, f"never saw 8 x 64 MiB with at least four on the host (best {best_on_host})")
    moved = [i for i, p in places.items() if len(p) > 1]
    check(moved, f"no allocation seen in two places: {places}")
    print(f"attach: 8 x 64 MiB seen with {best_on_host} on the host; {len(moved)} allocations seen moving")
    return 0


def attach_cap(client):
    """A simcuda workload under the real shim in cap mode: `ps` lists it,
    `dump --json` (schema-checked) shows its 64 MiB buffers on the device and
    the totals against the limit, and the snapshot is gone after exit."""
    proc = subprocess.Popen([VRAMSHIM, "run", "--shim", SHIM, "--mode", "cap", "--limit", "256M", "--",
                             client, "--buffers", "3", "--mib", "64", "--rounds", "60"],
                            stdout=subprocess.DEVNULL)
    best = None
    listed = False
    while proc.poll() is None:
        r = vramshim("dump", proc.pid, "--json")
        if r.returncode == 0:
            doc = json.loads(r.stdout)
            with open(SCHEMA) as f:
                validate(doc, json.load(f))
            big = [a for a in doc["allocations"] if a["size"] == 64 << 20]
            if best is None or len(big) > len(best["big"]):
                best = {"doc": doc, "big": big}
            ps = vramshim("ps", "--bytes")
            listed = listed or any(line.split()[:1] == [str(proc.pid)] for line in ps.stdout.splitlines())
        time.sleep(0.05)
    check(proc.returncode == 0, f"workload status {proc.returncode}")
    check(best is not None, "no snapshot was ever published by the shim")
    if best is None:
        return 1
    doc = best["doc"]
    check(len(best["big"]) == 3, f"expected three 64 MiB allocations, saw {len(best['big'])}")
    check(all(a["place"] == "device" for a in best["big"]), "cap mode keeps everything on the device")
    check(doc["mode"] == "cap", f"mode {doc['mode']!r}")
    check(doc["devices"] and doc["devices"][0]["limit_bytes"] == 256 << 20,
          f"device limit {doc['devices'][:1]}")
    check(doc["totals"]["device_bytes"] >= 3 * (64 << 20), f"totals {doc['totals']}")
    check(listed, "vramshim ps never listed the workload")
    name = shm_path(proc.pid)
    check(not os.path.exists(name), f"{name} left behind after exit")
    print(f"attach-cap: saw {len(best['big'])} x 64 MiB on the device; snapshot removed at exit")
    return 1 if FAILURES else 0


def main():
    global VRAMSHIM, FIXTURE, SCHEMA, SHIM
    if sys.argv[1] == "--attach-cap":
        VRAMSHIM, SHIM, client = sys.argv[2], sys.argv[3], sys.argv[4]
        SCHEMA = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "dump.schema.json")
        return attach_cap(client)
    if sys.argv[1] == "--attach":
        VRAMSHIM, SHIM, client = sys.argv[2], sys.argv[3], sys.argv[4]
        SCHEMA = os.path.join(os.path.dirname(__file__), "..", "..", "tools", "dump.schema.json")
        return attach_live(client)
    VRAMSHIM, FIXTURE, SCHEMA = sys.argv[1:4]
    SHIM = sys.argv[4] if len(sys.argv) > 4 and os.path.exists(sys.argv[4]) else None
    return run_tests(globals(), FAILURES)


if __name__ == "__main__":
    sys.exit(main())
