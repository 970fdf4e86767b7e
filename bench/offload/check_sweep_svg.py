#!/usr/bin/env python3
"""check_sweep_svg.py: the sweep's heat map is a well-formed SVG document.

usage: check_sweep_svg.py OFFLOAD_CYCLE SHIM WORK_DIR

Runs `OFFLOAD_CYCLE SHIM sweep --svg FILE --demo` (made-up cells, no child
process), parses the document as XML, and checks that it has a panel per
workload (cycle, dit, llm), 15 cells in each with their figures as
attributes and as text, and a legend. Also that `sweep --cell` refuses a
warm-up that is not a number of passes from 1 to 1000 (exit 2, one line
naming the value and the accepted forms) before running anything. Exit 0
when it holds, 1 otherwise.
"""
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

NS = "{http://www.w3.org/2000/svg}"


def main():
    program, shim, work = sys.argv[1:4]
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, "sweep_demo.svg")
    run = subprocess.run([program, shim, "sweep", "--svg", path, "--demo"], capture_output=True, text=True)
    failures = []
    if run.returncode != 0:
        failures.append(f"exit status {run.returncode}: {run.stderr.strip()}")
    else:
        try:
            root = ET.parse(path).getroot()
        except ET.ParseError as e:
            root = None
            failures.append(f"not well-formed XML: {e}")
        if root is not None:
            if root.tag != NS + "svg":
                failures.append(f"root element {root.tag}")
            panels = [g for g in root.iter(NS + "g") if g.get("class") == "panel"]
            names = [p.get("data-workload") for p in panels]
            if names != ["cycle", "dit", "llm"]:
                failures.append(f"panels {names}, expected cycle, dit, llm")
            for p in panels:
                cells = [g for g in p.iter(NS + "g") if g.get("class") == "cell"]
                if len(cells) != 15:
                    failures.append(f"{p.get('data-workload')}: {len(cells)} cells, expected 15")
                for c in cells:
                    texts = [t.text for t in c.iter(NS + "text")]
                    ratio = float(c.get("data-time-over-bound"))
                    if not texts or abs(float(texts[0]) - ratio) > 0.0006:
                        failures.append(f"cell text {texts} does not show {ratio}")
                        break
            legend = [t.text for t in root.iter(NS + "text") if t.text and "met (" in t.text]
            if legend != ["met (<= 1.05)"]:
                failures.append(f"legend {legend}")
    for bad in ("0", "abc", "1001", "10x"):
        run = subprocess.run([program, shim, "sweep", "--cell", "cycle", "25", "1", os.path.join(work, "cell.log"),
                              "--warmup", bad], capture_output=True, text=True)
        want = f"offload_sweep: --warmup {bad}: a number of passes from 1 to 1000"
        if run.returncode != 2 or run.stderr.strip() != want or run.stdout:
            failures.append(f"--warmup {bad}: exit {run.returncode}, stderr {run.stderr.strip()!r}")
    for f in failures:
        print("FAIL:", f)
    if not failures:
        print("sweep heat map ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
