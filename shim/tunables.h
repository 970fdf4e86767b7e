/* tunables.h: the shim's tunables, in one table.
 *
 * A tunable is a value chosen as a trade-off of time, memory, bytes moved or
 * waiting, measured where its line gives a figure; not a size that follows
 * from a data layout, an ABI or the driver (those stay where they are used).
 * Each entry is one line, what the value bounds or trades and why this
 * value, then its definition; how the mechanism works is told where the
 * tunable is used. Grouped by the part of the shim that uses it: the
 * engine's room and waits, eviction, prefetch and departures, the regime
 * meter, the engine's threads, copies and hashes, the registry, stamps and
 * publication, pools.
 *
 * Plain C, no CUDA and nothing of the shim: every layer may include it.
 */
#ifndef VS_TUNABLES_H
#define VS_TUNABLES_H

/* ---- The engine: room and waits (offload.c, offload_ops.c) ------------------------------------------------------ */

/* An operation that finds no room waits this long at a time for others to submit and let go of what they hold. */
#define VS_ROOM_WAIT_MS 20
/* Such waits before it passes the limit instead (a second at most): bounded, so two operations never wait on each other long. */
#define VS_ROOM_WAITS 50
/* Spills to disk (and head releases) a charge makes, the device's use at no new low, before it waits: others may take the room. */
#define VS_SPILL_ROUNDS 4
/* Host pool full, nothing to spill: a charge waits this long in all for others, then fails (they may take all its spills free). */
#define VS_HOST_WAIT_MS 10000
/* Times an operation may find its memory missing again after a restore before the engine gives up on it (out of memory). */
#define VS_OP_MAX_ATTEMPTS 8

/* ---- Eviction (offload_evict.c, offload_streams.c) -------------------------------------------------------------- */

/* Clean-eviction verdicts in a row that find a region changed before its evictions copy blind: no hash kernel, no wait for it. */
#define VS_BLIND_AFTER 1
/* Blind evictions before the region is judged again: one turned read-only (weights after loading) is found clean within them. */
#define VS_BLIND_RECHECK 8
/* Markers a stream keeps, the oldest dropped past it: more let an eviction wait for an older one, not the stream's latest work. */
#define VS_MARKERS 16

/* ---- Prefetch and departures (offload_prefetch.c) --------------------------------------------------------------- */

/* The prefetch window, in largest allocations restored ahead and not used yet: double buffering, one arrives while one is used. */
#define VS_PREFETCH_WINDOW 2
/* Under this a copy (50 GB/s) takes under 10 x a swap's host work (~70 us on an H100): such restores get room of their own. */
#define VS_SMALL_STREAM_BYTES (32ull << 20)
/* Restores a step makes before its launch among small allocations: four left the GPU idle 237 us a pass (LLM at 50%, ratio 1). */
#define VS_PREFETCH_STEP_RESTORES 1
/* Departures under way at once on a device: a step waits for the oldest only with a younger one queued (copies back to back). */
#define VS_DEPARTURES 2
/* Rounds a prefetch step makes room in (departures ended, started, waited for) before it gives the fetch up for now. */
#define VS_PREFETCH_ROOM_ROUNDS 8

/* ---- The regime meter (offload_meter.c) ------------------------------------------------------------------------- */

/* A window is a whole cycle, at least this many intervals: 32-copy windows read 0.77-0.91 busy as they moved, cycles 0.79-0.85. */
#define VS_METER_MIN_INTERVALS 8
/* The window of a cycle longer than this many copy intervals is this many of it. */
#define VS_METER_MAX_INTERVALS 256
/* Cycles a plan runs before it is measured: in its first passes what it keeps comes in and what the last plan kept leaves. */
#define VS_METER_SETTLE_CYCLES 2
/* The link's busy share under which two windows in a row make the cycle compute-bound. */
#define VS_METER_IDLE_ENTER 0.82
/* The busy share over which a compute-bound cycle goes back to the balance point: apart from VS_METER_IDLE_ENTER, not to flap. */
#define VS_METER_IDLE_LEAVE 0.90
/* The application's stall share over which two windows in a row make the cycle link-bound. */
#define VS_METER_STALL_ENTER 0.10
/* The stall share under which a link-bound cycle goes back to the balance point: apart from VS_METER_STALL_ENTER, not to flap. */
#define VS_METER_STALL_LEAVE 0.05
/* A lean plan this much slower an operation goes back for good: at 2% the LLM at 25%, ratio 2 stayed lean, 1.046 x, not 1.013. */
#define VS_METER_LEAN_TOLERANCE 0.015
/* A trial's first timed cycle this much slower ends it at once: the 60-block DiT at 360M took 186 us an operation lean, not 82. */
#define VS_METER_LEAN_ABORT 0.25
/* Copy timings pending, read half at a time (the meter: 28 -> 15 us a pass, 60-block DiT at 360M); past them a copy joins the next. */
#define VS_METER_SLOTS 8
/* Application stalls measured at once, read with the copies' timings once half are pending; past them a stall goes unmeasured. */
#define VS_METER_WAITS 8
/* Cycle marks not read yet, one a cycle; a cycle past them goes untimed. */
#define VS_METER_MARKS 4

/* ---- The engine's threads (offload_arrive.c, offload_retire.c) -------------------------------------------------- */

/* Arrival jobs handed over and not joined: a hand-over past it joins the oldest (long over by then), so the list stays short. */
#define VS_ARRIVE_KEEP 8
/* Ranges one retire batch holds: it gathers the unmaps of one hold of the engine lock, a few; a full batch is handed over. */
#define VS_RETIRE_BATCH 8
/* Retire batches kept after the thread ended them, before the engine takes the oldest back (its `done` long past by then). */
#define VS_RETIRE_KEEP 4

/* ---- Copies and hashes (offload_tier.c, offload_ops.c, spill.c, device_hash.c) ---------------------------------- */

/* Copies are issued in chunks of this size, so that the two directions interleave on the copy engines. */
#define VS_COPY_CHUNK_BYTES (32ull << 20)
/* Pinned staging buffers for restores from disk: the read of one chunk overlaps the host-to-device copy of the one before. */
#define VS_STAGING_BUFFERS 2
/* The largest single pwrite or pread of the spill file, and so the size of each staging buffer. */
#define VS_SPILL_CHUNK_BYTES (32ull << 20)
/* Host-to-device copies up to this size are scanned for pointers to pin: pointer tables are small, bulk data is not scanned. */
#define VS_PIN_SCAN_MAX_BYTES (64u << 10)
/* Threads per block of the device hash (a multiple of 32, up to 1024): with the blocks, enough to fill any GPU's bandwidth. */
#define VS_DEVICE_HASH_THREADS 256u
/* Words each thread of the device hash is given at least: a small range takes few blocks, and so few atomic adds. */
#define VS_DEVICE_HASH_WORDS_PER_THREAD 8u
/* Blocks of the device hash at most: enough to fill any current GPU's memory bandwidth, few enough atomic adds to cost nothing. */
#define VS_DEVICE_HASH_BLOCKS 1024u

/* ---- The registry, stamps and publication (registry_lock.c, stamp_log.c, publish.c) ----------------------------- */

/* A writer waits this long for one old read, then steps back and lets the readers it kept out in (that read may wait on one). */
#define VS_WRITER_PATIENCE_NS 2000000ull
/* A writer's first nap after it stepped back; it doubles at each attempt. */
#define VS_WRITER_NAP_FIRST_NS 50000ull
/* The longest nap between a writer's attempts; the nap doubles up to it. */
#define VS_WRITER_NAP_MAX_NS 2000000ull
/* A writer spins this many times on a read's end (a launch's submission lasts about a microsecond) before it yields. */
#define VS_WRITER_SPINS 64u
/* Then it yields this many times, then naps VS_WRITER_DRAIN_NAP_NS at a time, leaving the core to the reader. */
#define VS_WRITER_YIELDS 16u
/* A writer's nap while a read spans a synchronous copy. */
#define VS_WRITER_DRAIN_NAP_NS 20000ull
/* Words in one thread's stamp log (a power of two): 256 KiB, about 4,600 launches of 6 settled words each. */
#define VS_STAMP_LOG_WORDS (1u << 15)
/* The stamp thread is woken each time a log's head crosses a multiple of this: at each quarter of the log. */
#define VS_STAMP_LOG_WAKE (VS_STAMP_LOG_WORDS / 4)
/* The stamp thread drains every log at least this often. */
#define VS_STAMP_LOG_PERIOD_NS 100000000ull
/* Words one hold of the registry's read lock stamps at most: a writer waits for no more than that. */
#define VS_STAMP_LOG_HOLD_WORDS 1024
/* Publication period: what `vramshim ps/dump/top` read is at most this old, and a use's time is known to within it. */
#define VS_PUBLISH_PERIOD_MS 200
/* Publications whose (sequence, time) is kept: about 7 minutes at 200 ms; an older use reads as the oldest sample's time. */
#define VS_PUBLISH_SAMPLES 2048

/* ---- Pools (host_pool.c, pool_async.c) -------------------------------------------------------------------------- */

/* What the host pool pins at once as it grows: pinning is slow (about half a second a GB), so a few large pins, not one a copy. */
#define VS_HOST_SLAB_BYTES (256ull << 20)
/* Completed frees one poll of the stream-ordered pools (a reap, a trim) notes at most, in an array on the stack; the rest wait. */
#define VS_POOL_ASYNC_POLL 64

#endif /* VS_TUNABLES_H */
