#!/usr/bin/env python3
"""pipeline_floor.py: the best time per pass any plan of a family can reach
on the sweep's cycle workload, with a free host, as a multiple of the
sweep's bound max(C, F / B).

The sweep (offload_cycle.c) asks for at most 1.05 x the bound in every
cell. This model asks what the plan's shape alone allows, before any host
cost: a layer's kernel runs once all of it is resident; a copy in takes
its bytes of the streaming room until its layer's kernel ends; copies go
one at a time over the link, kernels one at a time, both in cycle order; a
tail streams a granule (2 MiB) at a time, each as soon as the room has a
granule free (the finest the shim could stream). Two families of plans:

  whole:  every allocation kept whole or streamed whole, at most one of
          them keeping a head of whole granules (what the shim plans today:
          VRAMSHIM_PARTIAL, one head). Every choice of kept layers and of the
          one head is tried.
  heads:  every layer keeps the same head of whole granules and streams
          the rest (a head per streamed allocation).

The room for streaming is what the limit leaves after the activation and
the kept bytes. Run: python3 bench/offload/pipeline_floor.py [--ratio R]
(about 2 minutes a ratio). At ratio 1 (2026-11-25): whole 1.037, 1.007 and
1.000 at 25, 50 and 75%; heads 1.020, 1.000, 1.000. `pass_time` also times
one plan: the shim's at 50% before stop 32 (kept layers 0, 2 and 5, the
head on 10) takes 1.082, with the head on 8 or 9 1.048 (docs/benchmarks.md,
"Where the head goes").
"""
import argparse
import itertools

MIB = 1 << 20
GRANULE = 2 * MIB
ACTIVATION = 1 * MIB          # offload_cycle.c's ACTIVATION_BYTES, resident all pass
LINK_BYTES_PER_US = 50e9 / 1e6  # offload_cycle.c's DEFAULT_GBPS
LAYERS, LAYER = 12, 32 * MIB  # the sweep's cycle: 12 x 32 MiB
PASSES = 12                   # simulated; the last 4 are measured


def pass_time(heads, room, compute_us):
    """Steady-state time per pass of the cycle whose layer i keeps heads[i]
    bytes resident, streaming through `room` bytes; None when a tail does
    not fit in the room. Kernels end in order, so the room frees in the
    order it was taken: a copy starts once the link is free and the oldest
    holders have ended, as many as it needs."""
    tails = [LAYER - h for h in heads]
    if max(tails) > room:
        return None
    n = LAYERS * PASSES
    kernel_end = []
    holders = []  # (kernel end, bytes) of the tails in the room, oldest first
    used = 0
    link = kernel = 0.0
    for k in range(n):
        need = tails[k % LAYERS]
        ready = 0.0
        # The tail streams a granule at a time, each as soon as the link
        # is free and the room has a granule for it.
        for _ in range(need // GRANULE):
            start = link
            while holders and (holders[0][0] <= start or used + GRANULE > room):
                start = max(start, holders[0][0])
                used -= holders.pop(0)[1]
            link = ready = start + GRANULE / LINK_BYTES_PER_US
            holders.append((float("inf"), GRANULE))  # until its kernel ends
            used += GRANULE
        kernel = max(kernel, ready) + compute_us
        kernel_end.append(kernel)
        for i in range(len(holders) - need // GRANULE, len(holders)):
            holders[i] = (kernel, GRANULE)
    measured = 4 * LAYERS
    return (kernel_end[n - 1] - kernel_end[n - 1 - measured]) / 4


def cell(percent, ratio):
    weights = LAYERS * LAYER
    limit = weights * percent // 100
    budget = limit - ACTIVATION
    f_bytes = weights + ACTIVATION - limit + 2 * LAYER
    transfer_us = f_bytes / LINK_BYTES_PER_US
    compute_us = ratio * transfer_us / LAYERS
    bound = max(ratio * transfer_us, transfer_us)
    best_whole = None
    for kept in range(LAYERS):
        for kept_set in itertools.combinations(range(LAYERS), kept):
            for head_layer in [None] + [i for i in range(LAYERS) if i not in kept_set]:
                for head in ([0] if head_layer is None else range(GRANULE, LAYER, GRANULE)):
                    heads = [LAYER if i in kept_set else 0 for i in range(LAYERS)]
                    if head_layer is not None:
                        heads[head_layer] = head
                    room = budget - sum(heads)
                    if room < LAYER - max(h for h in heads if h < LAYER):
                        continue
                    t = pass_time(heads, room, compute_us)
                    if t is not None and (best_whole is None or t < best_whole):
                        best_whole = t
            if kept > 0 and kept_set[0] != 0:
                break  # a cycle: rotations of a kept set are the same plan
    best_heads = None
    for head in range(0, LAYER, GRANULE):
        heads = [head] * LAYERS
        room = budget - sum(heads)
        t = pass_time(heads, room, compute_us) if room > 0 else None
        if t is not None and (best_heads is None or t < best_heads):
            best_heads = t
    return bound, best_whole, best_heads


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ratio", type=float, action="append",
                        help="compute / transfer ratio (repeatable; default 1, the balance point, "
                             "where the sweep misses; each takes minutes: every plan is tried)")
    args = parser.parse_args()
    ratios = args.ratio or [1.0]
    print("pipeline_floor: the sweep's cycle (12 x 32 MiB), free host; best time per pass / bound")
    print("limit  ratio   whole   heads")
    for percent in (25, 50, 75):
        for ratio in ratios:
            bound, whole, heads = cell(percent, ratio)
            fmt = lambda t: "   -  " if t is None else f"{t / bound:6.3f}"
            print(f"{percent:4d}%  {ratio:5.2f}  {fmt(whole)}  {fmt(heads)}")


if __name__ == "__main__":
    main()
