#!/usr/bin/env python3
"""check_svg.py: checks the SVG timeline that `policy_replay --svg` writes.

Usage: check_svg.py /path/to/policy_replay WORK_DIR

Renders two documents and checks each one:
  - the synthetic DiT trace, learned (cyclic) policy, limit 25%, x = time;
  - the synthetic VAE trace dumped to a file whose name needs escaping in
    XML (&, <, >, quotes), read back, all three orders, x = operations.
A document passes when it parses as XML, its root is an SVG element, the
titles name the trace, the policy and the limit, the legend lists every
series, both axes carry labelled ticks with units, every area stays inside
its plot, the device area never rises above the limit line, and the
transfer ticks add up to the panel's H2D and D2H totals, which in turn match
the table policy_replay printed.

Then it proves that these checks can fail: a truncated document, one whose
device area crosses the limit, and one whose tick bytes do not add up must
each be rejected. Exit status 0 when all holds, 1 otherwise.
"""
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"
MIB = 1024 * 1024
LEGEND = ("device", "host", "disk", "host-copies", "limit", "h2d", "d2h")
UNIT_LABEL = re.compile(r"^-?[0-9.]+(e[+-]?[0-9]+)? (B|KiB|MiB|GiB)$")


class Invalid(Exception):
    pass


def expect(cond, what):
    if not cond:
        raise Invalid(what)


def classes(el):
    return (el.get("class") or "").split()


def find_class(root, cls):
    return [el for el in root.iter() if cls in classes(el)]


def path_points(d):
    """The points of a path made of M, L and Z commands only."""
    points = []
    for cmd, x, y in re.findall(r"([ML])\s*(-?[0-9.]+),(-?[0-9.]+)", d):
        points.append((float(x), float(y)))
    expect(points and d.strip().startswith("M") and d.strip().endswith("Z"),
           "area path is not a closed M/L outline: %.60s" % d)
    return points


def text_of(el):
    return "".join(el.itertext())


def check_panel(panel, trace, policy, pct, x_kind):
    name = panel.get("data-policy")
    expect(name == policy, "panel for %r, expected %r" % (name, policy))
    titles = find_class(panel, "panel-title")
    expect(len(titles) == 1, "panel %s: no title" % policy)
    title = text_of(titles[0])
    for part in (trace, "policy " + policy, "limit %d%%" % pct):
        expect(part in title, "panel title %r lacks %r" % (title, part))
    expect(panel.get("data-x") == x_kind, "panel %s: x axis %r, expected %r" % (policy, panel.get("data-x"), x_kind))

    legends = find_class(panel, "legend")
    expect(len(legends) == 1, "panel %s: no legend" % policy)
    items = [c for el in find_class(legends[0], "legend-item") for c in classes(el) if c != "legend-item"]
    for series in LEGEND:
        expect(series in items, "legend lacks %s" % series)
        label = [text_of(el) for el in find_class(legends[0], series) if "legend-item" in classes(el)]
        expect(label and label[0].strip(), "legend item %s has no label" % series)

    y_axis = find_class(panel, "y-axis")
    expect(len(y_axis) == 1, "no y axis")
    y_ticks = [text_of(t) for t in find_class(y_axis[0], "tick-label")]
    expect(len(y_ticks) >= 3, "y axis has %d tick labels" % len(y_ticks))
    for t in y_ticks:
        expect(UNIT_LABEL.match(t), "y tick label %r has no byte unit" % t)
    x_axis = find_class(panel, "x-axis")
    expect(len(x_axis) == 1, "no x axis")
    x_ticks = [text_of(t) for t in find_class(x_axis[0], "tick-label")]
    expect(len(x_ticks) >= 3, "x axis has %d tick labels" % len(x_ticks))
    axis_label = " ".join(text_of(t) for t in find_class(x_axis[0], "axis-label"))
    if x_kind == "time":
        expect(all(re.search(r" (ns|\u00b5s|ms|s)$", t) for t in x_ticks), "time ticks without units: %r" % x_ticks)
        expect("time" in axis_label, "x axis label %r" % axis_label)
    else:
        expect(all(re.match(r"^[0-9.]+$", t) for t in x_ticks), "operation ticks: %r" % x_ticks)
        expect("operation" in axis_label, "x axis label %r" % axis_label)

    frames = find_class(panel, "plot-frame")
    expect(len(frames) == 1, "no plot frame")
    fx, fy = float(frames[0].get("x")), float(frames[0].get("y"))
    fw, fh = float(frames[0].get("width")), float(frames[0].get("height"))
    limits = [el for el in find_class(panel, "limit") if el.tag == NS + "line"]
    expect(len(limits) == 1, "no limit line")
    limit_y = float(limits[0].get("y1"))
    expect(fy <= limit_y <= fy + fh, "limit line outside the plot")
    areas = {}
    for series in ("device", "host", "disk"):
        found = [el for el in find_class(panel, series) if "area" in classes(el)]
        expect(len(found) == 1, "panel %s: %d areas for %s" % (policy, len(found), series))
        areas[series] = path_points(found[0].get("d"))
        for x, y in areas[series]:
            expect(fx - 0.01 <= x <= fx + fw + 0.01 and fy - 0.01 <= y <= fy + fh + 0.01,
                   "%s area point (%g, %g) outside the plot" % (series, x, y))
    # Device bytes never exceed the limit: no point of the device area
    # above the limit line (smaller y is higher).
    top = min(y for _, y in areas["device"])
    expect(top >= limit_y - 0.01, "device area reaches y=%g, above the limit line at %g" % (top, limit_y))

    strips = find_class(panel, "transfers")
    expect(len(strips) == 1, "no transfer strip")
    for direction, total_attr in (("h2d", "data-h2d-bytes"), ("d2h", "data-d2h-bytes")):
        ticks = [el for el in find_class(strips[0], direction) if el.tag == NS + "line"]
        total = int(panel.get(total_attr))
        summed = sum(int(t.get("data-bytes")) for t in ticks)
        expect(summed == total, "%s ticks add up to %d bytes, the panel says %d" % (direction, summed, total))
        for t in ticks:
            expect(t.find(NS + "title") is not None and "B" in text_of(t.find(NS + "title")),
                   "%s tick without its bytes in a title" % direction)
    expect(int(panel.get("data-h2d-bytes")) > 0, "panel %s: no H2D at %d%%" % (policy, pct))
    return int(panel.get("data-h2d-bytes")), int(panel.get("data-d2h-bytes")), int(panel.get("data-passes"))


def check_document(path, trace, policies, pct, x_kind):
    """Returns {policy: (h2d, d2h, passes)}; raises Invalid."""
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as e:
        raise Invalid("not well-formed XML: %s" % e)
    expect(root.tag == NS + "svg", "root element is %s" % root.tag)
    for attr in ("width", "height"):
        expect(float(root.get(attr, "0")) > 0, "svg %s missing" % attr)
    expect(len((root.get("viewBox") or "").split()) == 4, "no viewBox")
    title = root.find(NS + "title")
    expect(title is not None, "no document title")
    for part in [trace, "limit %d%%" % pct] + policies:
        expect(part in title.text, "document title %r lacks %r" % (title.text, part))
    panels = [el for el in root if el.tag == NS + "g" and "panel" in classes(el)]
    expect(len(panels) == len(policies), "%d panels, expected %d" % (len(panels), len(policies)))
    return {p: check_panel(el, trace, p, pct, x_kind) for el, p in zip(panels, policies)}


def table_row(stdout, trace, pct):
    """The per-pass MiB figures the table printed: {policy: (h2d, d2h)}."""
    for line in stdout.splitlines():
        cells = line.split("|")
        head = cells[0].split()
        if len(head) == 3 and head[0] == trace and head[1] == "%d%%" % pct:
            figures = [tuple(float(v) for v in c.split()) for c in cells[1:5]]
            return dict(zip(("lru", "learned", "planned", "belady"), figures))
    raise Invalid("no table row for %s at %d%%" % (trace, pct))


def check_against_table(totals, row):
    for policy, (h2d, d2h, passes) in totals.items():
        shown = row[policy]
        for moved, figure, what in ((h2d, shown[0], "H2D"), (d2h, shown[1], "D2H")):
            # The table rounds MiB per pass to the unit.
            expect(abs(moved / MIB / passes - figure) <= 0.5 + 1e-9,
                   "%s %s: the SVG says %.2f MiB per pass, the table %g" % (policy, what, moved / MIB / passes, figure))


def run(cmd):
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # A missed goal exits 0 too (the summary says MISSED): anything else is broken.
    if proc.returncode != 0:
        raise Invalid("%s exited %d: %s" % (" ".join(cmd), proc.returncode, proc.stderr.strip()))
    return proc.stdout


def must_reject(label, path, *args):
    try:
        check_document(path, *args)
    except Invalid:
        return None
    return "the check accepted %s" % label


def mutants(good, work, args):
    """Documents the checks must reject; returns the failures."""
    failures = []
    with open(good) as f:
        text = f.read()
    cut = os.path.join(work, "mutant_truncated.svg")
    with open(cut, "w") as f:
        f.write(text[: len(text) // 2])
    failures.append(must_reject("a truncated document", cut, *args))

    # Lift one point of the device area just above the limit line.
    root = ET.parse(good).getroot()
    panel = [el for el in root if "panel" in classes(el)][0]
    limit_y = float([el for el in find_class(panel, "limit") if el.tag == NS + "line"][0].get("y1"))
    area = [el for el in find_class(panel, "device") if "area" in classes(el)][0]
    d = area.get("d")
    first = re.search(r"L\s*(-?[0-9.]+),(-?[0-9.]+)", d)
    lifted = d[: first.start()] + "L%s,%.2f" % (first.group(1), limit_y - 5) + d[first.end():]
    over = os.path.join(work, "mutant_over_limit.svg")
    with open(over, "w") as f:
        f.write(text.replace('d="%s"' % d, 'd="%s"' % lifted, 1))
    failures.append(must_reject("a device area above the limit", over, *args))

    tick = re.search(r'class="h2d" data-bytes="(\d+)"', text)
    wrong = os.path.join(work, "mutant_tick_bytes.svg")
    with open(wrong, "w") as f:
        f.write(text[: tick.start(1)] + str(int(tick.group(1)) + 1) + text[tick.end(1):])
    failures.append(must_reject("ticks that do not add up", wrong, *args))
    return [f for f in failures if f]


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    replay, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    failures = []

    dit = os.path.join(work, "timeline_dit_learned_25.svg")
    try:
        out = run([replay, "--svg", dit, "--svg-trace", "dit", "--svg-limit", "25", "--svg-policy", "cyclic"])
        totals = check_document(dit, "dit", ["learned"], 25, "time")
        check_against_table(totals, table_row(out, "dit", 25))
        print("%s: ok (%d bytes)" % (dit, os.path.getsize(dit)))
        failures += mutants(dit, work, ("dit", ["learned"], 25, "time"))
    except Invalid as e:
        failures.append("%s: %s" % (dit, e))

    trace = os.path.join(work, "vae & <\"odd\" 'name'>.trace")
    vae = os.path.join(work, "timeline_vae_all_10.svg")
    try:
        run([replay, "--dump-trace", "vae", trace])
        out = run([replay, "--passes", "3", "--svg", vae, "--svg-limit", "10", "--svg-x", "op", trace])
        # Titles name a trace read from a file by the file's name.
        totals = check_document(vae, os.path.basename(trace), ["lru", "learned", "planned", "belady"], 10, "op")
        check_against_table(totals, table_row_file(out, 10))
        print("%s: ok (%d bytes)" % (vae, os.path.getsize(vae)))
    except Invalid as e:
        failures.append("%s: %s" % (vae, e))

    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


def table_row_file(stdout, pct):
    """The row of a trace read from a file: its name is the path, which may
    hold spaces, so the row is found by its limit column."""
    for line in stdout.splitlines():
        cells = line.split("|")
        m = re.search(r" (\d+)% +[0-9.]+ *$", cells[0])
        if len(cells) >= 4 and m and int(m.group(1)) == pct:
            figures = [tuple(float(v) for v in c.split()) for c in cells[1:5]]
            return dict(zip(("lru", "learned", "planned", "belady"), figures))
    raise Invalid("no table row at %d%%" % pct)


if __name__ == "__main__":
    sys.exit(main())
