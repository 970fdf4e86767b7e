#!/usr/bin/env python3
"""gen_manpage.py: writes vramshim.1 from the command's own --help texts.

usage: gen_manpage.py VRAMSHIM VERSION OUTPUT

The page is `vramshim --help` (name, synopsis, description, exit status)
and, for each command it lists, `vramshim COMMAND --help` (its usage line,
its description and its options as tagged paragraphs), so the manual and
--help cannot drift apart: both come from the strings in tools/*.c.
"""
import re
import subprocess
import sys


def roff(text):
    text = text.replace("\\", "\\e").replace("-", "\\-")
    return re.sub(r"^([.'])", r"\\&\1", text, flags=re.M)


def help_of(exe, *args):
    r = subprocess.run([exe, *args, "--help"], capture_output=True, text=True, check=True)
    return r.stdout.rstrip("\n").split("\n")


def paragraphs(lines):
    """Blank-line separated blocks."""
    block = []
    for line in lines:
        if line.strip():
            block.append(line)
        elif block:
            yield block
            block = []
    if block:
        yield block


def options(block, out):
    """'  -x, --long ARG   text' lines, continuations indented further."""
    for line in block:
        m = re.match(r"^  (\S.*?)(?:\s{2,}(.*))?$", line)
        if m and line.startswith("  ") and not line.startswith("   "):
            out.append(".TP")
            out.append("\\fB" + roff(m.group(1)) + "\\fR")
            if m.group(2):
                out.append(roff(m.group(2)))
        else:
            out.append(roff(line.strip()))


def command_section(exe, name, out):
    lines = help_of(exe, name)
    usage = lines[0][len("usage: "):]
    out.append(".SS " + roff(name))
    out.append(".B " + roff(usage))
    out.append(".PP")
    for block in list(paragraphs(lines[1:])):
        if all(l.startswith("  ") for l in block) and block[0].lstrip().startswith("-"):
            options(block, out)
        else:
            out.append(roff(" ".join(l.strip() for l in block)))
            out.append(".PP")


def main():
    exe, version, output = sys.argv[1:4]
    main_help = help_of(exe)
    blocks = list(paragraphs(main_help[1:]))
    description = " ".join(l.strip() for l in blocks[0])
    commands = []
    exit_status = []
    for block in blocks[1:]:
        if block[0] == "commands:":
            for line in block[1:]:
                commands.append(line.split()[0])
        else:
            for i, line in enumerate(block):
                if line.startswith("exit status"):
                    exit_status = block[i:]
                    break
    out = [
        '.TH VRAMSHIM 1 "" "vramshim %s" "User Commands"' % version,
        ".SH NAME",
        "vramshim \\- " + roff(description[0].lower() + description[1:].split(".")[0]),
        ".SH SYNOPSIS",
    ]
    for c in commands:
        out.append(".B vramshim " + roff(help_of(exe, c)[0][len("usage: vramshim "):]))
        out.append(".br")
    out += [".B vramshim \\-\\-version", ".SH DESCRIPTION", roff(description), ".SH COMMANDS"]
    for c in commands:
        command_section(exe, c, out)
    if not exit_status:
        sys.exit("gen_manpage.py: no 'exit status' paragraph in vramshim --help")
    status_text = " ".join(l.strip() for l in exit_status)
    out += [".SH EXIT STATUS", roff(status_text[len("exit status:"):].strip())]
    out += [".SH FILES",
            ".TP", ".I /dev/shm/vramshim\\-UID\\-PID",
            roff("the live snapshot each process under the shim publishes; ps, dump, top and "
                 "metrics read it, and remove those of processes that have exited."),
            ".SH SEE ALSO",
            roff("The documentation installed with vramshim (share/doc/vramshim): README.md, "
                 "docs/tools.md (the commands, traces, metrics and a Prometheus scrape "
                 "configuration) and docs/frameworks.md (PyTorch, diffusers, accelerate, vLLM, "
                 "ComfyUI under the shim).")]
    with open(output, "w") as f:
        f.write("\n".join(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
