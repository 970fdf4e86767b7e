#!/usr/bin/env python3
"""test_observe.py: `vramshim run --trace`, `plot`, `metrics`, `ps --json`,
`--version` and the bash completion, end to end.

usage: test_observe.py VRAMSHIM SHIM_LIBRARY CLIENT COMPLETION

CLIENT is a simcuda workload (tests/clients); the shim runs it for real
(LD_LIBRARY_PATH names simcuda's libcuda.so.1). Checks:
  - a trace recorded by `run --trace` under a limit plots to an SVG that
    parses as XML, with a legend for every series, labelled axes with units,
    a limit line, and transfer ticks that add up to the panel's totals; and
    to a Chrome trace-event JSON document with a track per stream and per
    copy direction, restore and evict slices, and byte counters per tier;
  - a hand-written trace plots to exactly the figures it implies;
  - `metrics` lists a live workload's vramshim_device_bytes with its pid
    label and vramshim_evictions_total, in the text format's grammar; with
    --listen it serves them over HTTP with the right Content-Type, answers
    404/405/400 and goes on serving;
  - `ps --json` lists the live workload;
  - every bad option value gives one error line and exit status 2.
Skips (77) in sanitized builds, where programs are not run under the shim.
"""
import decimal
import json
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET

import vstest
from vstest import check

VRAMSHIM = SHIM = CLIENT = COMPLETION = None
FAILURES = []
NS = "{http://www.w3.org/2000/svg}"
MIB = 1 << 20


def vramshim(*args, timeout=60, env=None):
    return subprocess.run([VRAMSHIM, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=env)


def expect_error(result, message, status=2):
    """`vstest.expect_error`, usage errors by default, the message on the first line."""
    vstest.expect_error(result, message, status)
    lines = result.stderr.splitlines()
    check(lines and lines[0].startswith("vramshim: "), f"first line {lines[:1]}")


def start_workload(*extra, limit="256M", hold_ms=3000):
    """The 8 x 64 MiB workload under a 256 MiB limit, held for a while."""
    return subprocess.Popen([VRAMSHIM, "run", "--shim", SHIM, "--limit", limit, *extra, "--",
                             CLIENT, "--buffers", "8", "--mib", "64", "--rounds", "2",
                             "--hold-ms", str(hold_ms)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


# --- the SVG and Chrome checks ---------------------------------------------

def write_trace(directory, name, lines):
    """A trace written by hand: `lines` into DIRECTORY/NAME; its path."""
    path = os.path.join(directory, name)
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    return path


def classes(el):
    return (el.get("class") or "").split()


def find_class(root, cls):
    return [el for el in root.iter() if cls in classes(el)]


def check_svg(path, limit=None):
    root = ET.parse(path).getroot()  # well-formed XML, or this raises
    check(root.tag == NS + "svg", f"root is {root.tag}")
    check(len((root.get("viewBox") or "").split()) == 4, "no viewBox")
    panels = find_class(root, "panel")
    check(len(panels) == 1, f"{len(panels)} panels")
    panel = panels[0]
    legend = find_class(panel, "legend")
    check(len(legend) == 1, "no legend")
    items = {c for el in find_class(legend[0], "legend-item") for c in classes(el)}
    wanted = {"device", "host", "disk", "h2d", "d2h"} | ({"limit"} if limit else set())
    check(wanted <= items, f"legend lists {sorted(items)}, lacks {sorted(wanted - items)}")
    for axis, unit in (("y-axis", r" (B|KiB|MiB|GiB)$"), ("x-axis", r"(s|ms|µs|ns)$|^\d+$")):
        groups = find_class(panel, axis)
        check(len(groups) == 1, f"no {axis}")
        ticks = ["".join(t.itertext()) for t in find_class(groups[0], "tick-label")]
        check(len(ticks) >= 2, f"{axis}: {ticks}")
        check(all(re.search(unit, t) for t in ticks), f"{axis} ticks without units: {ticks}")
        check(find_class(groups[0], "axis-label"), f"{axis} has no label")
    limits = [el for el in find_class(panel, "limit") if el.tag == NS + "line"]
    if limit:
        check(len(limits) == 1 and int(limits[0].get("data-bytes")) == limit, "limit line")
    else:
        check(not limits, "a limit line without --limit")
    for direction, attr in (("h2d", "data-h2d-bytes"), ("d2h", "data-d2h-bytes")):
        ticks = [el for el in find_class(panel, direction) if el.tag == NS + "line"]
        summed = sum(int(t.get("data-bytes")) for t in ticks)
        check(summed == int(panel.get(attr)), f"{direction} ticks sum to {summed}, panel says "
                                              f"{panel.get(attr)}")
    for series in ("device", "host", "disk"):
        check(any("area" in classes(el) for el in find_class(panel, series)), f"no {series} area")
    return panel


def check_chrome(path):
    with open(path) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    check(isinstance(events, list) and events, "no events")
    names = {e["args"]["name"] for e in events if e.get("ph") == "M" and e["name"] == "thread_name"}
    for track in ("copy engine H2D (restores)", "copy engine D2H (evictions)", "stream 0 (legacy)"):
        check(track in names, f"no track {track!r} in {sorted(names)}")
    slices = [e for e in events if e.get("ph") == "X"]
    for e in slices:
        check(e["ts"] >= 0 and e["dur"] >= 0 and isinstance(e["tid"], int), f"bad slice {e}")
    by_name = {}
    for e in slices:
        by_name.setdefault(e["name"], []).append(e)
    for name in ("kernel", "restore", "evict"):
        check(by_name.get(name), f"no {name} slice; slices: {sorted(by_name)}")
    for name in ("restore", "evict"):
        check(all(e["args"]["bytes"] > 0 for e in by_name[name]), f"{name} without bytes")
        tids = {e["tid"] for e in by_name[name]}
        check(len(tids) == 1, f"{name} slices on tracks {tids}")
        # one track per copy direction: its slices never overlap (plot writes
        # exact microseconds; the 1e-6 is only the sum of two parsed floats)
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in by_name[name])
        check(all(b[0] >= a[1] - 1e-6 for a, b in zip(spans, spans[1:])), f"{name} overlap")
    counters = [e for e in events if e.get("ph") == "C"]
    check(counters and all(set(e["args"]) == {"device", "host", "disk"} for e in counters),
          "byte counters")
    return by_name, counters


# --- tests ---------------------------------------------------------------

def test_version():
    r = vramshim("--version")
    check(r.returncode == 0 and re.fullmatch(r"vramshim \d+\.\d+\.\d+\n", r.stdout), r.stdout)


def test_help_for_new_commands():
    for cmd in ["plot", "metrics"]:
        r = vramshim(cmd, "--help")
        check(r.returncode == 0 and r.stdout.startswith(f"usage: vramshim {cmd}"), r.stdout)
    check("--trace FILE" in vramshim("run", "--help").stdout, "run --help lacks --trace")
    check("--json" in vramshim("ps", "--help").stdout, "ps --help lacks --json")


def test_bad_input_one_line_each():
    with tempfile.TemporaryDirectory() as tmp:
        trace = write_trace(tmp, "t.trace", ["# vramshim trace v1", "A 1 4096 e", "U 1 1 launch 0 10 u"])
        bad = write_trace(tmp, "bad.trace", ["# vramshim trace v1", "A 1 4096 e", "Q what"])
        out = os.path.join(tmp, "o.svg")
        for args, message in [
            (["plot"], "plot: no TRACE given"),
            (["plot", trace], "plot: no output given"),
            (["plot", trace, trace, "-o", out], "plot: expected one TRACE"),
            (["plot", trace, "-o", out, "--format", "png"], "--format png: expected svg or chrome"),
            (["plot", trace, "-o", out, "--limit", "12X"], "--limit 12X: expected a size"),
            (["plot", trace, "-o", out, "--limit", "50%"], "--limit 50%: expected a size"),
            (["plot", trace, "-o", out, "--x", "sideways"], "--x sideways: expected auto, op or time"),
            (["plot", trace, "-o", ""], "--output: expected a file name"),
            (["metrics", "--listen", "9400"], "--listen 9400: expected ADDR:PORT"),
            (["metrics", "--listen", "127.0.0.1:99999"], "--listen 127.0.0.1:99999: expected"),
            (["metrics", "--listen", "::1:9400"], "--listen ::1:9400: expected ADDR:PORT"),
            (["metrics", "--listen", "no.such.host.invalid:9400"], "cannot resolve"),
            (["metrics", "extra"], "metrics: unexpected argument 'extra'"),
            (["ps", "--json", "extra"], "ps: unexpected argument 'extra'"),
            (["run", "--trace", "", "--", "true"], "--trace '': expected a file name"),
            (["run", "--trace", "/nonexistent/dir/t.trace", "--", "true"],
             "--trace /nonexistent/dir/t.trace: no such directory /nonexistent/dir"),
        ]:
            r = vramshim(*args)
            expect_error(r, message)
            check(not os.path.exists(out), f"{args} left {out}")
        # Bad files are errors (1), not usage errors, and leave no output.
        expect_error(vramshim("plot", bad, "-o", out), f"{bad}: line 3 is not a vramshim trace line",
                     status=1)
        check(not os.path.exists(out), "half-written output left behind")
        expect_error(vramshim("plot", os.path.join(tmp, "missing"), "-o", out),
                     "cannot read the trace", status=1)
        expect_error(vramshim("plot", trace, "-o", os.path.join(tmp, "no", "dir.svg")),
                     "cannot write", status=1)
        # A port taken by another socket.
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            s.listen(1)
            port = s.getsockname()[1]
            expect_error(vramshim("metrics", "--listen", f"127.0.0.1:{port}"),
                         f"cannot listen on 127.0.0.1:{port}: Address already in use", status=1)


def test_plot_hand_written_trace_figures():
    """Two 64 MiB allocations under a 96 MiB limit, evicted and restored by
    turns: the figures in the SVG and the Chrome trace are the trace's."""
    lines = ["# vramshim trace v1", "A 1 67108864 e", "A 2 67108864 e", "R 2 0",
             "U 1 1 launch 0 1000000 u"]
    t = 1000000
    for seq in range(2, 8):
        t += 1000000
        lines += ["R %d 0" % (1 if seq % 2 == 0 else 2), "R %d 1" % (2 if seq % 2 == 0 else 1),
                  "U %d %d %s 0x%x %d u" % (seq, 2 if seq % 2 == 0 else 1,
                                            "launch" if seq % 3 else "copy", seq % 2, t)]
    lines.append("F 1")
    with tempfile.TemporaryDirectory() as tmp:
        trace = write_trace(tmp, "turns & <quotes>.trace", lines)
        svg = os.path.join(tmp, "t.svg")
        r = vramshim("plot", trace, "-o", svg, "--limit", "96M")
        check(r.returncode == 0, r.stderr)
        panel = check_svg(svg, limit=96 * MIB)
        check(int(panel.get("data-h2d-bytes")) == 6 * 64 * MIB, panel.get("data-h2d-bytes"))
        check(int(panel.get("data-d2h-bytes")) == 7 * 64 * MIB, panel.get("data-d2h-bytes"))
        check(panel.get("data-x") == "time" and int(panel.get("data-ops")) >= 7, panel.attrib)
        title = "".join(find_class(panel, "panel-title")[0].itertext())
        check("turns & <quotes>.trace" in title and "limit 96.0 MiB" in title, title)
        r = vramshim("plot", trace, "-o", svg, "--x", "op")
        check(r.returncode == 0, r.stderr)
        check(check_svg(svg).get("data-x") == "op", "--x op")
        chrome = os.path.join(tmp, "t.json")
        r = vramshim("plot", trace, "-o", chrome, "--format", "chrome")
        check(r.returncode == 0, r.stderr)
        by_name, counters = check_chrome(chrome)
        check(len(by_name["restore"]) == 6 and len(by_name["evict"]) == 7, "6 restores, 7 evictions")
        check(len(by_name["kernel"]) + len(by_name["copy"]) == 7, "seven operations")
        streams = {e["tid"] for e in by_name["kernel"] + by_name["copy"]}
        check(len(streams) == 2, f"operations on {streams}")
        # One allocation on the device at every operation; after `F 1` the
        # other one is left, on the host (seq 7 is odd: 1 resident, 2 out).
        check(all(c["args"]["device"] == 64 * MIB for c in counters[:-1]),
              f"counters {[c['args'] for c in counters]}")
        check(counters[-1]["args"] == {"device": 0, "host": 64 * MIB, "disk": 0},
              f"last counter {counters[-1]}")
        r = vramshim("plot", trace, "-o", "-", "--format", "chrome")
        check(r.returncode == 0 and json.loads(r.stdout)["traceEvents"], "chrome to stdout")


def test_plot_chrome_slices_abut_to_the_nanosecond():
    """Three restores of 2, 2 and 6 MiB between operations 3 ns apart take
    0.6, 0.6 and 1.8 ns of the copy track. Written as a start and a duration
    each rounded to the nanosecond on its own, the second one would end at
    0.002 us and the third begin at 0.001: they overlap. Cut at shared whole
    nanoseconds, each starts exactly where the one before it ends."""
    lines = ["# vramshim trace v1", "A 1 2097152 e", "A 2 2097152 e", "A 3 6291456 e",
             "U 1 1 launch 0 1000 u", "R 1 1", "R 2 1", "R 3 1", "U 2 3 launch 0 1003 u"]
    with tempfile.TemporaryDirectory() as tmp:
        trace = write_trace(tmp, "abut.trace", lines)
        chrome = os.path.join(tmp, "abut.json")
        r = vramshim("plot", trace, "-o", chrome, "--format", "chrome")
        check(r.returncode == 0, r.stderr)
        with open(chrome) as f:
            doc = json.load(f, parse_float=decimal.Decimal)
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in doc["traceEvents"]
                       if e.get("ph") == "X" and e["name"] == "restore")
        check(len(spans) == 3, f"restores {spans}")
        check(spans[0][0] == 0 and spans[-1][1] == decimal.Decimal("0.003"), f"restores {spans}")
        check(all(b[0] == a[1] for a, b in zip(spans, spans[1:])), f"restores do not abut: {spans}")


def test_run_trace_then_plot():
    """The issue's done-when: `run --trace` under a limit, then `plot` to a
    valid SVG and a Chrome trace with restore and eviction events."""
    with tempfile.TemporaryDirectory() as tmp:
        # A relative --trace path is made absolute: the program may chdir.
        proc = subprocess.run([VRAMSHIM, "run", "--shim", SHIM, "--limit", "256M", "--trace",
                               "run.trace", "--", CLIENT, "--buffers", "8", "--mib", "64",
                               "--rounds", "2"],
                              cwd=tmp, capture_output=True, text=True, timeout=120)
        check(proc.returncode == 0, f"workload: {proc.returncode} {proc.stderr[-500:]}")
        trace = os.path.join(tmp, "run.trace")
        with open(trace) as f:
            text = f.read()
        check(text.startswith("# vramshim trace v1"), text[:100])
        check(re.search(r"^R \d+ 0$", text, re.M) and re.search(r"^R \d+ 1$", text, re.M),
              "the trace holds no eviction and restore")
        svg = os.path.join(tmp, "run.svg")
        r = vramshim("plot", trace, "-o", svg, "--limit", "256M")
        check(r.returncode == 0, r.stderr)
        panel = check_svg(svg, limit=256 * MIB)
        check(int(panel.get("data-h2d-bytes")) > 0 and int(panel.get("data-d2h-bytes")) > 0,
              panel.attrib)
        chrome = os.path.join(tmp, "run.json")
        r = vramshim("plot", trace, "-o", chrome, "--format", "chrome")
        check(r.returncode == 0, r.stderr)
        by_name, counters = check_chrome(chrome)
        check(max(c["args"]["host"] for c in counters) >= 4 * 64 * MIB,
              "eight 64 MiB buffers under 256 MiB: at least four on the host")
        print(f"  run --trace: {len(by_name['restore'])} restores, {len(by_name['evict'])} "
              f"evictions, {len(by_name['kernel'])} kernels")


METRIC_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*"'
                         r'(,[a-zA-Z_][a-zA-Z0-9_]*="(\\.|[^"\\])*")*)?\})? (?P<value>-?[0-9.e+]+)$')


def parse_metrics(text):
    """The text format's grammar: HELP and TYPE once per metric, before its
    samples; samples of one metric together. {(name, labels): value}."""
    samples, typed, seen_done = {}, {}, set()
    current = None
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            name = line.split()[2]
            if line.startswith("# TYPE "):
                check(name not in typed, f"TYPE twice for {name}")
                typed[name] = line.split()[3]
                check(typed[name] in ("gauge", "counter"), line)
            if current and current != name:
                seen_done.add(current)
            check(name not in seen_done, f"{name} samples not together")
            current = name
            continue
        m = METRIC_LINE.match(line)
        check(m, f"not a sample line: {line!r}")
        name = m.group(1)
        check(name == current and name in typed, f"{name} sampled outside its block")
        labels = tuple(sorted(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:\\.|[^"\\])*)"',
                                         m.group(3) or "")))
        check((name, labels) not in samples, f"duplicate series {name}{labels}")
        samples[(name, labels)] = float(m.group("value"))
    return samples, typed


def series(samples, name, pid):
    return {dict(k[1]).get("device"): v for k, v in samples.items()
            if k[0] == name and dict(k[1]).get("pid") == str(pid)}


def http_get(url, method="GET"):
    req = urllib.request.Request(url, method=method)
    try:
        # Generous: a scrape reads every snapshot of the user's, and a loaded
        # machine makes busy writers' snapshots slow to copy consistently.
        with urllib.request.urlopen(req, timeout=90) as resp:
            return resp.status, resp.headers, resp.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def test_metrics_and_ps_json_live():
    """A live workload, seen from outside: `metrics` has its
    vramshim_device_bytes with pid and device labels and its evictions; the
    HTTP server gives the same; `ps --json` lists it."""
    proc = start_workload(hold_ms=4000)
    server = subprocess.Popen([VRAMSHIM, "metrics", "--listen", "127.0.0.1:0"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        line = server.stderr.readline()
        m = re.search(r"serving metrics at (http://127\.0\.0\.1:(\d+)/metrics)", line)
        check(m, f"server said {line!r}")
        url = m.group(1)
        best = None
        served = None
        listed = None
        while proc.poll() is None:
            r = vramshim("metrics")
            check(r.returncode == 0, r.stderr)
            samples, typed = parse_metrics(r.stdout)
            dev = series(samples, "vramshim_device_bytes", proc.pid)
            ev = series(samples, "vramshim_evictions_total", proc.pid)
            host = series(samples, "vramshim_host_bytes", proc.pid)
            # The scrape that saw the most evicted to the host: one taken
            # while the program frees its buffers at the end may count every
            # eviction with nothing left on the host (an eviction started
            # ahead of need is counted when it ends, which may be then).
            if dev and ev and (best is None or host.get(None, 0) > best[2].get(None, 0)):
                best = (dev, ev, host, series(samples, "vramshim_limit_bytes", proc.pid))
            # (a scrape may skip a snapshot that kept changing: try again)
            if not served and dev:
                status, headers, body = http_get(url)
                check(status == 200, f"status {status}")
                check(headers["Content-Type"] == "text/plain; version=0.0.4; charset=utf-8",
                      headers["Content-Type"])
                s2, _ = parse_metrics(body)
                served = series(s2, "vramshim_device_bytes", proc.pid)
            # (a process seen before its first device is up lists no
            # devices and no limit yet: look again until it has them)
            if listed is None or not listed["devices"]:
                r = vramshim("ps", "--json")
                check(r.returncode == 0, r.stderr)
                doc = json.loads(r.stdout)
                check(doc["schema"] == "vramshim-ps/1", doc.get("schema"))
                mine = [p for p in doc["processes"] if p["pid"] == proc.pid]
                if mine:
                    listed = mine[0]
            time.sleep(0.1)
        check(proc.returncode == 0, f"workload status {proc.returncode}: {proc.stderr.read()[-300:]}")
        check(best is not None, "metrics never listed the workload")
        dev, ev, host, limit = best
        check(set(dev) == {"0"} and dev["0"] > 0, f"device_bytes {dev}")
        check(ev[None] >= 1, f"evictions_total {ev}")
        check(limit == {"0": 256 * MIB}, f"limit_bytes {limit}")
        check(host[None] > 0, f"host_bytes {host}")
        check(typed["vramshim_evictions_total"] == "counter" and
              typed["vramshim_device_bytes"] == "gauge", typed)
        check(served and set(served) == {"0"}, f"served {served}")
        check(listed and listed["program"] and listed["limit_bytes"] == 256 * MIB and
              listed["devices"][0]["ordinal"] == 0, f"ps --json: {listed}")
        # The server answers errors and goes on serving, one request at a time.
        base = url.rsplit("/", 1)[0]
        check(http_get(base + "/nope")[0] == 404, "404")
        status, headers, _ = http_get(url, method="POST")
        check(status == 405 and "GET" in headers.get("Allow", ""), f"405 {status}")
        status, headers, body = http_get(url, method="HEAD")
        check(status == 200 and body == "", "HEAD")
        host_port = base[len("http://"):].split(":")
        with socket.create_connection((host_port[0], int(host_port[1])), timeout=90) as s:
            s.sendall(b"garbage\r\n\r\n")
            check(s.recv(100).startswith(b"HTTP/1.1 400"), "400 for garbage")
        # A client that connects and says nothing does not stop the next one
        # for longer than the server's 5 s timeout (and the scrape itself,
        # slow on a loaded machine).
        idle = socket.create_connection((host_port[0], int(host_port[1])), timeout=90)
        t0 = time.time()
        status, _, body = http_get(url + "?x=1")
        check(status == 200 and "vramshim_processes" in body, "after an idle client")
        check(time.time() - t0 < 60, f"the idle client held the server {time.time() - t0:.1f}s")
        idle.close()
        check(server.poll() is None, "the server exited")
        # After exit the process is gone from the metrics.
        samples, _ = parse_metrics(vramshim("metrics").stdout)
        check(not series(samples, "vramshim_device_bytes", proc.pid), "exited process listed")
        print(f"  metrics: device_bytes {dev}, evictions_total {ev[None]:.0f}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        server.terminate()
        server.wait(timeout=10)


def test_bash_completion():
    """Commands, options, and the pids of processes under the shim."""
    if subprocess.run(["bash", "-c", "true"]).returncode != 0:
        print("  (no bash)")
        return
    bindir = os.path.dirname(VRAMSHIM)

    def complete(words):
        script = (f'PATH={bindir}:$PATH; source {COMPLETION}; COMP_WORDS=({words}); '
                  f'COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); '
                  f'[ "${{COMP_WORDS[COMP_CWORD]}}" = __EMPTY__ ] && COMP_WORDS[COMP_CWORD]=""; '
                  f'_vramshim; printf "%s\\n" "${{COMPREPLY[@]}}"')
        r = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=30)
        check(r.returncode == 0, r.stderr)
        return set(r.stdout.split())

    check({"run", "ps", "dump", "top", "plot", "metrics"} <= complete("vramshim __EMPTY__"),
          "commands")
    check({"--limit", "--trace", "--mode"} <= complete("vramshim run --"), "run options")
    check(complete("vramshim run --mode __EMPTY__") == {"offload", "cap"}, "modes")
    check(complete("vramshim plot t --format __EMPTY__") == {"svg", "chrome"}, "formats")
    check({"--json", "--bytes"} <= complete("vramshim ps --"), "ps options")
    proc = start_workload(hold_ms=4000)
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            if str(proc.pid) in vramshim("ps").stdout.split():
                break
            time.sleep(0.1)
        pids = complete("vramshim dump __EMPTY__")
        check(str(proc.pid) in pids, f"dump completes {pids}, not {proc.pid}")
        check(all(p.isdigit() for p in pids), pids)
    finally:
        proc.kill()
        proc.wait()


def main():
    global VRAMSHIM, SHIM, CLIENT, COMPLETION
    VRAMSHIM, SHIM, CLIENT, COMPLETION = sys.argv[1:5]
    if os.environ.get("VRAMSHIM_TEST_SANITIZE", "none") not in ("none", ""):
        print("sanitized build: programs are not run under the shim here")
        return 77
    return vstest.run_tests(globals(), FAILURES)


if __name__ == "__main__":
    sys.exit(main())
