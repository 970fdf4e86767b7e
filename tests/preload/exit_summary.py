"""Reads the shim's exit summary from a program's stderr.

At VRAMSHIM_LOG=info the shim prints, at exit, a block of labelled lines
(shim/shim.c, shim/offload.c): "at exit:", then "peak tracked",
"operations" and, in offload mode, "evicted", "restored", "waited", "host
memory" and, with the disk tier, "disk". At VRAMSHIM_LOG=debug a line
"offload details:" follows with the engine's mechanisms.

`parse_all(text)` returns one dict per process that printed "at exit:", in
order, with the figures of each line it printed (integers; `wait_ms` a
float, `io` a string).
"""
import re

PREFIX = r"^vramshim\[(?P<pid>\d+)\] (?:info|debug): "
START = re.compile(PREFIX + r"at exit:$")
LINES = [
    re.compile(PREFIX + r"  peak tracked +\S+ \S+ \((?P<peak>\d+) bytes\) on the device; "
               r"(?P<allocations>\d+) allocations"),
    re.compile(PREFIX + r"  operations +(?P<launches>\d+) launches \((?P<unscanned>\d+) unscanned\), "
               r"(?P<graph_launches>\d+) graph launches, (?P<copies>\d+) copies, (?P<memsets>\d+) memsets; "
               r"(?P<refused>\d+) refused$"),
    re.compile(PREFIX + r"  evicted +(?P<evictions>\d+) times, \S+ \S+ to the host \((?P<to_host>\d+) bytes\); "
               r"(?P<clean>\d+) unchanged since their host copy \((?P<not_copied>\d+) bytes not copied\)$"),
    re.compile(PREFIX + r"  restored +(?P<restores>\d+) times, \S+ \S+ to the device \((?P<to_device>\d+) bytes\); "
               r"(?P<prefetches>\d+) brought in ahead of use \((?P<prefetch_unused>\d+) never used\)$"),
    re.compile(PREFIX + r"  waited +(?P<wait_ms>\d+(\.\d+)?) ms for restores; over the limit (?P<over>\d+) times$"),
    re.compile(PREFIX + r"  host memory +\S+ \S+ pinned of \S+ \S+ allowed \((?P<pinned>\d+) of "
               r"(?P<pool_limit>\d+) bytes\); (?P<placed_on_host>\d+) allocations placed there$"),
    re.compile(PREFIX + r"  disk +(?P<spills>\d+) spills \((?P<spill_bytes>\d+) bytes\), (?P<disk_restores>\d+) "
               r"restores \((?P<restore_bytes>\d+) bytes\); spill file (?P<file_bytes>\d+) bytes "
               r"\((?P<used_bytes>\d+) in use\); (?P<checksum_failures>\d+) checksum failures, "
               r"(?P<io_errors>\d+) I/O errors; (?P<io>direct|buffered) I/O$"),
    re.compile(PREFIX + r"offload details: .*kept host copies dropped (?P<dropped>\d+), "
               r"partial evictions (?P<partial>\d+), evictions ahead of need (?P<ahead>\d+), "
               r"partial restores (?P<partial_restores>\d+), restores mapped ahead (?P<mapped>\d+),"),
]


def _value(name, text):
    if name == "io":
        return text
    return float(text) if name == "wait_ms" else int(text)


def parse_all(text):
    """The exit summaries in `text`, one dict per process, in order."""
    by_pid, order = {}, []
    for line in text.splitlines():
        start = START.match(line)
        if start:
            by_pid[start.group("pid")] = {}
            order.append(by_pid[start.group("pid")])
            continue
        for pattern in LINES:
            m = pattern.match(line)
            if m and m.group("pid") in by_pid:
                by_pid[m.group("pid")].update(
                    {k: _value(k, v) for k, v in m.groupdict().items() if v is not None and k != "pid"
                     and not k.startswith("_")})
                break
    return order


def mentions(text):
    """The lines of `text` that look like the summary's, for a message."""
    return [line for line in text.splitlines()
            if re.match(r"^vramshim\[\d+\] (info|debug): (at exit|  \S|offload details)", line)]
