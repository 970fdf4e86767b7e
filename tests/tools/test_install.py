#!/usr/bin/env python3
"""test_install.py: `meson install` into a fresh directory, then a workload
run through the installed `vramshim run`, with no environment variable
pointing anywhere.

usage: test_install.py MESON BUILD_DIR PREFIX CLIENT

Installs the build with `meson install --destdir TMP` and checks that the
tree holds the command, libvramshim.so in the library directory, the man
page (the same text as --help), the bash completion and the docs. Then, in
an environment with only PATH and HOME (no LD_PRELOAD, LD_LIBRARY_PATH or
VRAMSHIM_*), `TMP/PREFIX/bin/vramshim run --limit 128M` runs CLIENT (a
simcuda workload linked against simcuda's libcuda.so.1): the installed
library is the one preloaded, the workload passes its checksums, and the
shim's summary shows it evicted and restored under the limit.
Skips (77) in sanitized builds, where programs are not run under the shim.
"""
import glob
import os
import re
import subprocess
import sys
import tempfile

from vstest import check


def main():
    meson, build, prefix, client = sys.argv[1:5]
    if os.environ.get("VRAMSHIM_TEST_SANITIZE", "none") not in ("none", ""):
        print("sanitized build: programs are not run under the shim here")
        return 77
    with tempfile.TemporaryDirectory() as dest:
        r = subprocess.run([meson, "install", "-C", build, "--no-rebuild", "--quiet",
                            "--destdir", dest], capture_output=True, text=True, timeout=180)
        check(r.returncode == 0, f"meson install: {r.stdout[-1000:]} {r.stderr[-1000:]}")
        root = os.path.join(dest, prefix.lstrip("/"))
        exe = os.path.join(root, "bin", "vramshim")
        check(os.access(exe, os.X_OK), f"no {exe}")
        libs = glob.glob(os.path.join(root, "lib*", "**", "libvramshim.so"), recursive=True)
        check(len(libs) == 1, f"libvramshim.so installed as {libs}")
        man = os.path.join(root, "share", "man", "man1", "vramshim.1")
        check(os.path.exists(man), "no man page")
        with open(man) as f:
            page = f.read()
        check(page.startswith(".TH VRAMSHIM 1") and ".SS plot" in page and ".SS metrics" in page,
              page[:200])
        check(re.search(r"^\.SH EXIT STATUS\n0 success", page, re.M), "man page: no exit status")
        # The page is --help's text: every option of every command is in it.
        for cmd in ["run", "ps", "dump", "top", "plot", "metrics"]:
            text = subprocess.run([exe, cmd, "--help"], capture_output=True, text=True).stdout
            for opt in re.findall(r"^  (--[a-z-]+)", text, re.M):
                check(opt.replace("-", "\\-") in page, f"man page lacks {cmd} {opt}")
        check(os.path.exists(os.path.join(root, "share", "bash-completion", "completions",
                                          "vramshim")), "no bash completion")
        for doc in ["README.md", "docs/frameworks.md", "docs/tools.md"]:
            check(os.path.exists(os.path.join(root, "share", "doc", "vramshim", doc)),
                  f"no {doc}")

        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": dest}
        r = subprocess.run([exe, "--version"], capture_output=True, text=True, env=env)
        check(r.returncode == 0 and r.stdout.startswith("vramshim "), r.stdout)
        r = subprocess.run([exe, "run", "--", "sh", "-c", "echo $LD_PRELOAD"],
                           capture_output=True, text=True, env=env, timeout=60)
        check(r.returncode == 0, r.stderr)
        check(r.stdout.strip() == os.path.realpath(libs[0]),
              f"preloaded {r.stdout.strip()!r}, installed {libs[0]!r}")
        r = subprocess.run([exe, "run", "--limit", "128M", "--log", "info", "--", client,
                            "--buffers", "4", "--mib", "64", "--rounds", "2"],
                           capture_output=True, text=True, env=env, timeout=120)
        check(r.returncode == 0, f"workload status {r.returncode}: {r.stderr[-800:]}")
        check("checksums OK" in r.stdout, r.stdout)
        m = re.search(r"(?s)info:   evicted +(\d+) times, .*?info:   restored +(\d+) times", r.stderr)
        check(m and int(m.group(1)) > 0 and int(m.group(2)) > 0,
              f"no evictions under the installed shim: {r.stderr[-800:]}")
        print(f"installed to {root}; workload ran under {libs[0][len(dest):]} with "
              f"{m.group(1)} evictions, {m.group(2)} restores")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except AssertionError as e:
        print(f"FAILED: {e}")
        sys.exit(1)
