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
one plan: a plan of the shim's at 50% (kept layers 0, 2 and 5, the
head on 10) takes 1.082, with the head on 8 or 9 1.048 (docs/benchmarks.md,
"The pipeline model").

`--workload dit` asks the same of the sweep's DiT (16 blocks of 6, 2, 8 and
8 MiB tensors, 64 KiB ones and the activation resident), whole tensors
only, with the bytes in held to the goal (at most 1.02 x F). Its plans are
too many to try all: a seeded local search (annealing over which tensors
stream) looks for the fastest, in three families:

  free:     any tensor streams.
  no-2MiB:  the 2 MiB tensors stay resident (each costs a swap's host work
            for the least bytes).
  largest:  the shim's family: only the largest size streams while it can
            carry the stream alone (`plan_stream_floor`), the kept ones of it
            spread evenly; every count of kept ones is timed.

`--reserve MIB` holds that much of the room back, as the shim's departure
room does (the room for streaming is then the limit less the activation,
the kept bytes and the reserve). Seconds a ratio. At ratio 1 (2026-11-28):
with no reserve, free 1.028 / 1.035 / 1.008 at 25 / 50 / 75%, the largest
family none / 1.554 / 1.300; with 6 MiB held back, free 1.101 / 1.256 /
1.177 (docs/benchmarks.md, "The pipeline model"). A local search gives an
upper bound on the floor, not the floor: its seeds and steps are fixed, so
runs repeat.

`--workload dit --pieces MIB [--costs default|busy|free]` times the DiT
streamed in pieces of one size, each with physical memory of its own: a
tensor streams its tail-most whole pieces (an 8 MiB tensor in 4 MiB pieces
streams one or two, a 6 MiB one at most one, its first 2 MiB resident), so
that any departing piece's memory serves any restore, mapped and granted
ahead of its verdict. The host's calls come from simcuda's tables: the map
and the grant of each piece on one thread (the arrival thread), its copy
submitted after the verdict, its unmap on another (the retire thread); each
departing piece's content hash runs on the compute engine behind its kernel.
At ratio 1 (2026-11-29), 4 MiB pieces: 1.026 / 1.025 / 1.025 x the bound at
25 / 50 / 75%, in at most 1.020 x F, the arrival thread 52-54% busy, with
the default table; 1.45 with h200-busy.txt, where that thread is busy all
the time (docs/benchmarks.md, "The pipeline model").

`--workload dit --pieces 6 --classes` times the DiT at 25%, where the pieces
of 6 MiB alone cannot carry the stream, with 2 MiB tensors streamed whole
beside them and memory that any restore may take, each mapped ahead onto a
departure of its size (classes of the two sizes, which the shim does not
have). At ratios 0.75 / 1 / 1.33 (2026-11-30): 0.993 / 1.025 / 1.019 x the
bound, in 0.993 / 1.007 / 0.993 x F; the shim planned so took 1.241 x at
ratio 1, its swaps of unlike sizes creating and releasing memory after
their waits. With `--held` each size's memory is held by its class in
handles of its own, a restore mapping only onto a departure of its size
(the room split between the sizes as best it times), at 25%, 50% and 75%:
every DiT cell of the sweep within 1.025 x the bound and 1.013 x F, with
two or three 6 MiB handles and one of 2 MiB (among them 25% at ratios 0.75
/ 1 / 1.33, 0.993 / 1.025 / 1.019; 50% at ratio 1, 1.025 where pieces alone
reach 1.080; 2026-11-30). The shim meets the three at 25% with fillers,
their memory held between their uses (1.020 / 1.037 / 1.019 x, in 1.020 x
F, with a filler's room of slack the model does not need). The model's
plan at 50% (30 pieces, 14 fillers, no slack) took the shim 1.541 x, and
1.066 with 4 MiB of slack. The shim streams the DiT near the balance point
in `--pieces 4` (4 MiB pieces, one per tensor of 6 or 8 MiB, with 2 MiB
fillers) where they carry the stream: at 50%, ratio 1, 1.025 x in 1.019 x
F, the floor this model gives them.
"""
import argparse
import itertools
import math
import random

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


# ---- The DiT: mixed sizes, whole tensors ------------------------------------

DIT_BLOCK = [6 * MIB, 2 * MIB, 8 * MIB, 8 * MIB]  # offload_cycle.c's sweep DiT, 64 KiB ones aside
DIT_BLOCKS = 16
DIT_SMALL = DIT_BLOCKS * 64 * 1024                 # resident: under the 2 MiB eviction unit
DIT_SEQ = DIT_BLOCK * DIT_BLOCKS
MAX_IN_OVER_F = 1.02


def dit_pass_time(kept, room, compute_us_per_byte, passes=6):
    """Steady-state time per pass of the DiT whose tensor i stays resident
    when kept[i]; the others stream whole through `room` bytes, freed in
    the order taken as their kernels end (memory is fungible here: the
    shim's is not, see docs/benchmarks.md, "The pipeline model"). None when
    a streamed tensor does not fit in the room."""
    link = kernel = 0.0
    holders = []  # (kernel end, bytes), oldest first
    used = 0
    ends = []
    for _ in range(passes):
        for size, keep in zip(DIT_SEQ, kept):
            if not keep:
                if size > room:
                    return None
                start = link
                while holders and (holders[0][0] <= start or used + size > room):
                    start = max(start, holders[0][0])
                    used -= holders.pop(0)[1]
                link = start + size / LINK_BYTES_PER_US
                used += size
                kernel = max(kernel, link) + size * compute_us_per_byte
                holders.append((kernel, size))
            else:
                kernel += size * compute_us_per_byte
            ends.append(kernel)
    n = len(DIT_SEQ)
    return (ends[-1] - ends[-1 - 2 * n]) / 2


def dit_figures(percent, ratio):
    """The sweep's DiT cell: (limit, bytes always resident, F, compute in us
    per streamable byte, the bound in us)."""
    weights = sum(DIT_SEQ) + DIT_SMALL
    limit = weights * percent // 100 // MIB * MIB
    f_bytes = weights + ACTIVATION - limit + 2 * max(DIT_SEQ)
    transfer_us = f_bytes / LINK_BYTES_PER_US
    # The 64 KiB tensors' share of the compute goes with the block's others.
    per_byte = ratio * transfer_us / sum(DIT_SEQ)
    return limit, ACTIVATION + DIT_SMALL, f_bytes, per_byte, max(ratio * transfer_us, transfer_us)


def dit_cell(percent, ratio, family, reserve, seed=1, rounds=3, steps=3000):
    """(bound, best time, its bytes in / F, its plan as K/. per tensor) for
    a family; best time None when no plan of the family fits."""
    limit, resident, f_bytes, per_byte, bound = dit_figures(percent, ratio)
    most_in = MAX_IN_OVER_F * f_bytes
    n = len(DIT_SEQ)

    def judge(kept):
        kept_bytes = sum(s for s, k in zip(DIT_SEQ, kept) if k)
        streamed = sum(DIT_SEQ) - kept_bytes
        room = limit - resident - kept_bytes - reserve
        if streamed > most_in or room <= 0:
            return None
        t = dit_pass_time(kept, room, per_byte)
        return None if t is None else (t, streamed)

    best = None

    def offer(kept, judged):
        nonlocal best
        if judged is not None and (best is None or judged[0] < best[0]):
            best = (judged[0], judged[1], "".join("K" if k else "." for k in kept))

    if family == "largest":
        largest = max(DIT_SEQ)
        at = [i for i in range(n) if DIT_SEQ[i] == largest]
        for count in range(len(at) + 1):
            kept = [DIT_SEQ[i] != largest for i in range(n)]
            for j in range(count):
                kept[at[j * len(at) // count]] = True
            offer(kept, judge(kept))
    else:
        rng = random.Random(seed)
        fixed = [family == "no-2MiB" and s == 2 * MIB for s in DIT_SEQ]
        for _ in range(rounds):
            # Start from the smallest kept first until the bytes in fit.
            kept = [False] * n
            kept_bytes = 0
            for i in sorted(range(n), key=lambda i: (DIT_SEQ[i], rng.random())):
                if sum(DIT_SEQ) - kept_bytes <= most_in and not fixed[i]:
                    continue
                kept[i] = True
                kept_bytes += DIT_SEQ[i]
            current = judge(kept)
            temperature = 0.05 * bound
            for _ in range(steps):
                trial = kept[:]
                for i in {rng.randrange(n), rng.randrange(n)}:
                    trial[i] = not trial[i] or fixed[i]
                judged = judge(trial)
                if judged is None:
                    continue
                if (current is None or judged[0] <= current[0]
                        or rng.random() < math.exp(-(judged[0] - current[0]) / temperature)):
                    kept, current = trial, judged
                    offer(kept, current)
                temperature *= 0.999
    if best is None:
        return bound, None, None, None
    return bound, best[0], best[1] / f_bytes, best[2]


# ---- The DiT in pieces of one size, with the host's calls --------------------

# Host calls per piece, in microseconds, from tests/simcuda's tables: the
# default (an idle H100) and h200-busy.txt (an H200 with a kernel and a copy
# running, what a GPU that computes while the shim swaps charges). `ahead`:
# the map and the grant of a restore mapped ahead onto a departing piece's
# memory, made on the arrival thread before that piece's verdict; `submit`:
# the copy's submission after it; `unmap`: the departed piece's range, on
# the retire thread. A size part is per GiB.
PIECE_COSTS = {
    "free": {"ahead": (0.0, 0.0), "submit": 0.0, "wake": 0.0, "unmap": (0.0, 0.0)},
    "default": {"ahead": (1.04 + 41.9, 0.0), "submit": 2.69, "wake": 0.82, "unmap": (24.9, 0.0)},
    "busy": {"ahead": (10.3 + 109.3, 129.0), "submit": 2.69, "wake": 0.82, "unmap": (59.0, 58.0)},
}
HASH_BYTES_PER_US = 8 * MIB / 4.2  # the content hash of a departing piece on the compute engine (simcuda)


def dit_pieces_time(counts, piece, per_byte, slots, costs, passes=6):
    """Steady-state time per pass of the DiT when tensor i streams counts[i]
    pieces of `piece` bytes (its tail-most ones; the rest stays resident),
    through `slots` pieces of room. Every piece has its own physical memory
    of one size, so any departing piece's memory serves any restore: each
    restore is mapped and granted ahead onto the memory of the piece whose
    slot it takes (the arrival thread, one call after another), and its copy
    is submitted once that piece's kernel and hash are over. Returns (time
    per pass, the arrival thread's busy share, the retire thread's)."""
    ahead = costs["ahead"][0] + costs["ahead"][1] * piece / (1 << 30)
    unmap = costs["unmap"][0] + costs["unmap"][1] * piece / (1 << 30)
    hash_us = piece / HASH_BYTES_PER_US
    link = kernel = host = 0.0
    holders = []  # per held slot: [time it frees], oldest first
    ends = []
    for _ in range(passes):
        for size, count in zip(DIT_SEQ, counts):
            ready = 0.0
            mine = []
            for _ in range(count):
                free_at = 0.0
                while len(holders) >= slots:
                    free_at = max(free_at, holders.pop(0)[0])
                host += ahead
                submit = max(host, free_at + costs["wake"]) + costs["submit"]
                host = submit
                link = max(link, submit) + piece / LINK_BYTES_PER_US
                ready = link
                slot = [None]
                holders.append(slot)
                mine.append(slot)
            kernel = max(kernel, ready) + size * per_byte
            ends.append(kernel)
            for slot in mine:
                kernel += hash_us  # the departure's hash, behind the kernel
                slot[0] = kernel
    n = len(DIT_SEQ)
    per_pass = (ends[-1] - ends[-1 - 2 * n]) / 2
    pieces = sum(counts)
    return per_pass, pieces * (ahead + costs["submit"]) / per_pass, pieces * unmap / per_pass


def dit_pieces_cell(percent, ratio, piece, costs, seed=1, steps=2000):
    """(bound, best time, bytes in / F, slots, arrival share, retire share)
    over plans that stream as many pieces as the bytes goal allows (and a
    few fewer), spread evenly, then moved by a seeded local search."""
    limit, resident, f_bytes, per_byte, bound = dit_figures(percent, ratio)
    most = [size // piece for size in DIT_SEQ]
    rng = random.Random(seed)
    best = None
    top = int(MAX_IN_OVER_F * f_bytes // piece)
    for total in range(top - 2, top + 1):
        if total <= 0 or total > sum(most):
            continue
        streamed = total * piece
        slots = (limit - resident - (sum(DIT_SEQ) - streamed)) // piece
        if slots < 1 + max(most):
            continue
        # One piece each on tensors spread evenly, then second pieces.
        counts = [0] * len(DIT_SEQ)
        left = total
        for layer in range(1, max(most) + 1):
            able = [i for i in range(len(DIT_SEQ)) if most[i] >= layer]
            take = min(left, len(able))
            for j in range(take):
                counts[able[j * len(able) // take]] += 1
            left -= take
        judged = dit_pieces_time(counts, piece, per_byte, slots, costs)
        current = judged
        temperature = 0.02 * bound
        for _ in range(steps):
            a, b = rng.randrange(len(counts)), rng.randrange(len(counts))
            if a == b or counts[a] == 0 or counts[b] >= most[b]:
                continue
            trial = counts[:]
            trial[a] -= 1
            trial[b] += 1
            t = dit_pieces_time(trial, piece, per_byte, slots, costs)
            if t[0] <= current[0] or rng.random() < math.exp(-(t[0] - current[0]) / temperature):
                counts, current = trial, t
                judged = min(judged, t)
            temperature *= 0.998
        if best is None or judged[0] < best[1]:
            best = (bound, judged[0], streamed / f_bytes, slots, judged[1], judged[2])
    return best


def dit_classes_time(streamed, per_byte, room, costs, slots=None, passes=6):
    """Steady-state time per pass of the DiT whose tensor i streams
    streamed[i] bytes (0: kept; the tail-most piece, or all of a tensor
    smaller than a piece) through `room` bytes that any restore may take,
    whatever the size it frees: the memory of the shim's size classes, each
    restore mapped and granted ahead onto a departure of its class (the
    arrival thread), its copy submitted once the room is free and the
    departure's kernel and hash are over. With `slots` the memory is held
    by size instead: `slots` maps a streamed size to how many handles of
    that size the room holds, and a restore takes the handle of the oldest
    holder of its own size, never memory another size freed (what a shim
    whose device memory sits in classes of the stream's sizes can do without
    a create or a release in steady state)."""
    ahead = costs["ahead"][0]
    link = kernel = host = 0.0
    holders = []  # (free at, bytes), oldest first
    held = {size: [] for size in slots} if slots else None  # per size: [time it frees], oldest first
    used = 0
    ends = []
    for _ in range(passes):
        for size, part in zip(DIT_SEQ, streamed):
            ready = 0.0
            if part:
                free_at = 0.0
                if held is not None:
                    if len(held[part]) >= slots[part]:
                        free_at = held[part].pop(0)
                else:
                    while used + part > room:
                        at, b = holders.pop(0)
                        free_at, used = max(free_at, at), used - b
                host += ahead
                host = max(host, free_at + costs["wake"]) + costs["submit"]
                link = max(link, host) + part / LINK_BYTES_PER_US
                ready = link
            kernel = max(kernel, ready) + size * per_byte
            ends.append(kernel)
            if part:
                kernel += part / HASH_BYTES_PER_US  # the departure's hash, behind the kernel
                if held is not None:
                    held[part].append(kernel)
                else:
                    holders.append((kernel, part))
                    used += part
    n = len(DIT_SEQ)
    return (ends[-1] - ends[-1 - 2 * n]) / 2


def dit_class_slots_best(streamed, per_byte, room, costs):
    """The best split of `room` into handles of the streamed sizes (at least
    one of each, two of the largest), timed held by size (dit_classes_time
    with slots): (time, slots)."""
    sizes = sorted({part for part in streamed if part}, reverse=True)
    best = None

    def split(i, left, slots):
        nonlocal best
        if i == len(sizes):
            t = dit_classes_time(streamed, per_byte, room, costs, slots)
            if best is None or t < best[0]:
                best = (t, dict(slots))
            return
        least = 2 if i == 0 else 1
        for count in range(least, left // sizes[i] + 1):
            slots[sizes[i]] = count
            split(i + 1, left - count * sizes[i], slots)
        slots.pop(sizes[i], None)

    split(0, room, {})
    return best


def dit_classes_main(ratios, piece_mib, costs_name, held):
    """The DiT in pieces of `piece_mib` with the tensors smaller than a piece
    streamed whole beside them, each kind evenly spread, memory in classes of
    the two sizes. Fungible memory: every piece streams and the smaller
    tensors fill the rest (only at 25% do the pieces alone fall short of the
    stream). Held by size (`held`): at 25%, 50% and 75%, any count of pieces
    beside any count of smaller tensors, the room split into handles of the
    two sizes as best it times (dit_class_slots_best)."""
    costs = PIECE_COSTS[costs_name]
    piece = piece_mib * MIB
    memory = "handles held by size" if held else "memory any size may take"
    print(f"pipeline_floor: the sweep's DiT in pieces of {piece_mib} MiB, the tensors under a piece streamed whole "
          f"beside them, each restore mapped ahead onto a departure of its size ({memory}), host "
          f"costs {costs_name}, in <= {MAX_IN_OVER_F} x F; best time per pass / bound")
    print("limit  ratio  x bound  in / F  pieces  smaller  room MiB  handles (held: per size; any: fungible)")
    able = [i for i, size in enumerate(DIT_SEQ) if size >= piece]
    smaller = [i for i, size in enumerate(DIT_SEQ) if 0 < size < piece]
    for percent in (25, 50, 75) if held else (25,):
        for ratio in ratios:
            limit, resident, f_bytes, per_byte, bound = dit_figures(percent, ratio)
            best = None
            for pieces in range(1, len(able) + 1) if held else (len(able),):
                for count in range(len(smaller) + 1):
                    streamed = [0] * len(DIT_SEQ)
                    for j in range(pieces):
                        streamed[able[j * len(able) // pieces]] = piece
                    for j in range(count):
                        at = smaller[j * len(smaller) // count]
                        streamed[at] = DIT_SEQ[at]
                    total = sum(streamed)
                    room = limit - resident - (sum(DIT_SEQ) - total)
                    if total > MAX_IN_OVER_F * f_bytes or room < 2 * piece:
                        continue
                    if held:
                        found = dit_class_slots_best(streamed, per_byte, room, costs)
                        if found is None:
                            continue
                        t, slots = found
                        shape = " ".join(f"{n}x{size // MIB}" for size, n in sorted(slots.items(), reverse=True))
                    else:
                        t, shape = dit_classes_time(streamed, per_byte, room, costs), "any"
                    if best is None or t < best[0]:
                        best = (t, total / f_bytes, pieces, count, room / MIB, shape)
            if best is None:
                print(f"{percent:4d}%  {ratio:5.2f}        -       -  (no plan fits)")
                continue
            print(f"{percent:4d}%  {ratio:5.2f}  {best[0] / bound:7.3f}  {best[1]:6.3f}  {best[2]:6d}  {best[3]:7d}"
                  f"  {best[4]:8.1f}  {best[5]}", flush=True)


def dit_pieces_main(ratios, piece_mib, costs_name):
    costs = PIECE_COSTS[costs_name]
    print(f"pipeline_floor: the sweep's DiT in pieces of {piece_mib} MiB (each tensor streams its tail-most "
          f"whole pieces), host costs {costs_name}, in <= {MAX_IN_OVER_F} x F; best time per pass / bound, and "
          f"the busy share of the thread that maps and grants ahead and of the one that unmaps")
    print("limit  ratio  x bound  in / F  slots  arrival  retire")
    for percent in (25, 50, 75):
        for ratio in ratios:
            cell = dit_pieces_cell(percent, ratio, piece_mib * MIB, costs)
            if cell is None:
                print(f"{percent:4d}%  {ratio:5.2f}        -       -  (no plan fits)")
                continue
            bound, t, in_f, slots, arrival, retire = cell
            print(f"{percent:4d}%  {ratio:5.2f}  {t / bound:7.3f}  {in_f:6.3f}  {slots:5d}  {arrival:7.2f}  "
                  f"{retire:6.2f}", flush=True)


def dit_main(ratios, reserve_mib):
    print(f"pipeline_floor: the sweep's DiT (16 x 6/2/8/8 MiB), free host, whole tensors, "
          f"in <= {MAX_IN_OVER_F} x F, {reserve_mib} MiB of the room held back; best time per pass / bound")
    print("limit  ratio  family     x bound  in / F  plan (K kept, . streamed; a block of four per group)")
    for percent in (25, 50, 75):
        for ratio in ratios:
            for family in ("free", "no-2MiB", "largest"):
                bound, t, in_f, plan = dit_cell(percent, ratio, family, reserve_mib * MIB)
                if t is None:
                    print(f"{percent:4d}%  {ratio:5.2f}  {family:9s}      -       -  (no plan of the family fits)")
                    continue
                blocks = " ".join(plan[i:i + 4] for i in range(0, len(plan), 4))
                print(f"{percent:4d}%  {ratio:5.2f}  {family:9s}  {t / bound:6.3f}  {in_f:6.3f}  {blocks}",
                      flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ratio", type=float, action="append",
                        help="compute / transfer ratio (repeatable; default 1, the balance point, "
                             "where the sweep misses; each takes minutes: every plan is tried)")
    parser.add_argument("--workload", choices=("cycle", "dit"), default="cycle")
    parser.add_argument("--reserve", type=int, default=0, metavar="MIB",
                        help="dit: room held back from streaming (the shim's departure room: 6)")
    parser.add_argument("--pieces", type=int, default=0, metavar="MIB",
                        help="dit: stream pieces of this size, each with memory of its own, instead of whole "
                             "tensors (granules: 2, 4, 6 or 8)")
    parser.add_argument("--classes", action="store_true",
                        help="dit --pieces: the tensors under a piece stream whole beside the pieces, memory in "
                             "classes of the two sizes")
    parser.add_argument("--held", action="store_true",
                        help="dit --pieces --classes: each size's memory held by its class, in handles of its "
                             "own (a restore maps only onto a departure of its size), the room split between "
                             "the sizes as best it times; without it the room is fungible")
    parser.add_argument("--costs", choices=sorted(PIECE_COSTS), default="default",
                        help="dit --pieces: the host calls' costs (simcuda's default table, h200-busy.txt, or none)")
    args = parser.parse_args()
    ratios = args.ratio or [1.0]
    if args.workload == "dit" and args.pieces and args.classes:
        dit_classes_main(ratios, args.pieces, args.costs, args.held)
        return
    if args.workload == "dit" and args.pieces:
        dit_pieces_main(ratios, args.pieces, args.costs)
        return
    if args.workload == "dit":
        dit_main(ratios, args.reserve)
        return
    print("pipeline_floor: the sweep's cycle (12 x 32 MiB), free host; best time per pass / bound")
    print("limit  ratio   whole   heads")
    for percent in (25, 50, 75):
        for ratio in ratios:
            bound, whole, heads = cell(percent, ratio)
            fmt = lambda t: "   -  " if t is None else f"{t / bound:6.3f}"
            print(f"{percent:4d}%  {ratio:5.2f}  {fmt(whole)}  {fmt(heads)}")


if __name__ == "__main__":
    main()
