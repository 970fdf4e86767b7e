#!/usr/bin/env python3
"""check_timeline_gaps.py: timeline_gaps.py on a timeline written by hand,
whose gaps and causes are known (and the compute engine's busy time by
kernel): a kernel submitted late behind the host's
map and grant (host-late, attributed to those calls), one submitted in time
that waits for its copy (waits), and the host-to-device engine idle
between copies: once waiting for its room (the copy was submitted before),
once for the host (an unmap before the copy's submission). Exits 1 on a
wrong figure."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timeline_gaps  # noqa: E402

TIMELINE = """\
# device engine start_ns end_ns host_ns what
# host tTHREAD start_ns end_ns - call|wait (SIMCUDA_HOST_COSTS=default)
0 compute 0 100000 0 layer
host t1 100000 142000 - cuMemSetAccess
host t1 142000 145000 - cuMemcpyHtoDAsync_v2
host t1 145000 150000 - cuLaunchKernel
0 h2d 145000 245000 145000 copy
0 compute 150000 250000 150000 layer
0 compute 250000 260000 151000 hash
0 h2d 300000 400000 200000 copy
0 compute 400000 500000 200000 layer
host t1 400000 430000 - cuMemUnmap
host t1 430000 433000 - cuMemcpyHtoDAsync_v2
0 h2d 433000 483000 433000 copy
"""


def main():
    failures = []

    def expect(what, got, want):
        if got != want:
            failures.append('%s: %r, expected %r' % (what, got, want))

    with tempfile.NamedTemporaryFile('w', suffix='.txt', delete=False) as f:
        f.write(TIMELINE)
        path = f.name
    try:
        device, host = timeline_gaps.parse(path)
        gaps, totals, link_gaps = timeline_gaps.analyse(device, host)
        expect('gaps', len(gaps), 2)
        if len(gaps) == 2:
            expect('first gap', (gaps[0]['gap'], gaps[0]['host_late'], gaps[0]['next']), (50000, True, 'layer'))
            expect('what the host did', gaps[0]['host'], [('cuMemSetAccess', 42000), ('cuLaunchKernel', 5000),
                                                          ('cuMemcpyHtoDAsync_v2', 3000)])
            expect('second gap', (gaps[1]['gap'], gaps[1]['host_late'], gaps[1]['host']), (140000, False, []))
        expect('totals', (totals['gap'], totals['host_late'], totals['waits']), (190000, 50000, 140000))
        expect('copy engine idle', totals['h2d_idle'], 88000)
        expect('compute engine busy', totals['busy'].most_common(), [('layer', 300000), ('hash', 10000)])
        expect('copy engine idle stretches', [(g['at'], g['gap'], g['host_late'], g['host']) for g in link_gaps],
               [(245000, 55000, False, []),
                (400000, 33000, True, [('cuMemUnmap', 30000), ('cuMemcpyHtoDAsync_v2', 3000)])])
        # A window of the last 300 us ending with the last `layer`: the
        # first kernel is outside it, and so is the first gap.
        gaps, totals, link_gaps = timeline_gaps.analyse(device, host, 'layer', 300.0)
        expect('gaps in the window', [(g['gap'], g['host_late']) for g in gaps], [(140000, False)])
        expect('window', totals['window'], (200000, 500000))
        expect('compute engine busy in the window', totals['busy'].most_common(), [('layer', 100000),
                                                                                   ('hash', 10000)])
        expect('copy engine idle in the window', (totals['h2d_idle'], [(g['at'], g['host_late']) for g in link_gaps]),
               (33000, [(400000, True)]))
    finally:
        os.unlink(path)
    for failure in failures:
        print('check_timeline_gaps: ' + failure)
    return 1 if failures else 0


if __name__ == '__main__':
    sys.exit(main())
