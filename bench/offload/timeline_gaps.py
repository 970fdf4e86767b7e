#!/usr/bin/env python3
"""timeline_gaps.py: where the GPU idled in a simcuda timeline, and why.

Usage: timeline_gaps.py TIMELINE [--kernel NAME] [--last-us US] [--min-us US] [--link]

TIMELINE is the file `SIMCUDA_TIMELINE` wrote with the host-cost model on
(tests/simcuda/README.md, "Host costs"): one line per scheduled operation
(device, engine, modeled start and end, host clock at submission, what)
and one per host call or host wait (`host tTHREAD start end - name`).

The window is the last US microseconds before the end of the last kernel
named NAME (default: the whole timeline, every kernel). Each gap of at least
--min-us (default 1) between two kernels on the compute engine is one of:

- host-late: the next kernel was submitted after the one before had ended,
  so the GPU waited for the host; the line lists what the host spent that
  gap on (its calls and waits, by total time, largest first);
- waits: it was submitted in time and waited for something else (a copy it
  depends on, an event).

With --link, the host-to-device engine's idle stretches of at least
--min-us are listed too, each of the same two kinds: host-late when the copy
after it was submitted once the engine was idle (the host's calls and waits
meanwhile follow), waits when it was submitted before and waited for
something else (room, an event).

A summary follows: the gaps' total of each kind, the time the
host-to-device engine was idle in the window, and the compute engine's
busy time by kernel, largest first. The shim's own kernels (its content
hash, `vramshim_content_hash`, behind each departure that may have been
written) take compute time no bound counts: a floor under the pass before
any wait.
"""
import argparse
import collections
import sys


def parse(path):
    device, host = [], []
    with open(path) as f:
        for line in f:
            if line.startswith('#') or not line.strip():
                continue
            p = line.split()
            if p[0] == 'host':
                host.append((int(p[2]), int(p[3]), p[5]))
            elif len(p) >= 6:
                device.append((p[1], int(p[2]), int(p[3]), int(p[4]), p[5]))
    return device, host


def host_time_between(host, start, end):
    """Host calls and waits overlapping [start, end): name -> ns."""
    spent = collections.Counter()
    for h_start, h_end, name in host:
        overlap = min(h_end, end) - max(h_start, start)
        if overlap > 0:
            spent[name] += overlap
    return spent


def idle_stretch(host, at, idle, after):
    """One idle stretch of an engine from `at`, ended by operation `after`."""
    late = after[3] >= at
    spent = host_time_between(host, at, after[3]) if late else collections.Counter()
    return {'at': at, 'gap': idle, 'next': after[4], 'host_late': late, 'host': spent.most_common(6)}


def analyse(device, host, kernel=None, last_us=None, min_us=1.0):
    """The compute engine's gaps, the totals, and the host-to-device
    engine's idle stretches, in the window."""
    kernels = [d for d in device if d[0] == 'compute']
    named = [d for d in kernels if kernel is None or d[4] == kernel]
    if not named:
        return [], {'gap': 0, 'host_late': 0, 'waits': 0, 'h2d_idle': 0, 'window': (0, 0),
                    'busy': collections.Counter()}, []
    end = max(d[2] for d in named)
    start = end - last_us * 1000 if last_us is not None else min(d[1] for d in kernels)
    window = sorted((d for d in kernels if start <= d[1] and d[2] <= end), key=lambda d: d[1])
    gaps = []
    totals = {'gap': 0, 'host_late': 0, 'waits': 0, 'h2d_idle': 0, 'window': (start, end),
              'busy': collections.Counter()}
    for d in window:
        totals['busy'][d[4]] += d[2] - d[1]
    for before, after in zip(window, window[1:]):
        gap = after[1] - before[2]
        if gap < min_us * 1000:
            continue
        gaps.append(idle_stretch(host, before[2], gap, after))
        totals['gap'] += gap
        totals['host_late' if gaps[-1]['host_late'] else 'waits'] += gap
    copies = sorted((d for d in device if d[0] == 'h2d' and start <= d[1] and d[2] <= end), key=lambda d: d[1])
    busy_until = copies[0][2] if copies else end
    link_gaps = []
    for copy in copies[1:]:
        if copy[1] > busy_until:
            totals['h2d_idle'] += copy[1] - busy_until
            if copy[1] - busy_until >= min_us * 1000:
                link_gaps.append(idle_stretch(host, busy_until, copy[1] - busy_until, copy))
        busy_until = max(busy_until, copy[2])
    return gaps, totals, link_gaps


def print_stretch(g, engine):
    kind = 'host-late' if g['host_late'] else 'waits'
    spent = ', '.join('%s %.1f' % (name, ns / 1000) for name, ns in g['host'])
    print('%12.1f us: %s %8.1f us before %-24s %-9s %s' % (g['at'] / 1000, engine, g['gap'] / 1000, g['next'], kind,
                                                          spent))


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('timeline')
    parser.add_argument('--kernel', help='the window ends with the last kernel of this name')
    parser.add_argument('--last-us', type=float, help='the window: this many us before that end')
    parser.add_argument('--min-us', type=float, default=1.0, help='shortest gap listed (us)')
    parser.add_argument('--link', action='store_true', help="list the host-to-device engine's idle stretches too")
    args = parser.parse_args(argv)
    device, host = parse(args.timeline)
    gaps, totals, link_gaps = analyse(device, host, args.kernel, args.last_us, args.min_us)
    stretches = [(g, 'gap') for g in gaps] + ([(g, 'link idle') for g in link_gaps] if args.link else [])
    for g, engine in sorted(stretches, key=lambda s: s[0]['at']):
        print_stretch(g, engine)
    start, end = totals['window']
    print('window %.1f-%.1f us: GPU gaps %.1f us (host-late %.1f, waits %.1f), host-to-device engine idle %.1f us'
          % (start / 1000, end / 1000, totals['gap'] / 1000, totals['host_late'] / 1000, totals['waits'] / 1000,
             totals['h2d_idle'] / 1000))
    print('compute engine busy: ' + ', '.join('%s %.1f us' % (name, ns / 1000)
                                              for name, ns in totals['busy'].most_common()))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
