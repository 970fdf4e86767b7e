/* stamp_log.h: the uses of settled allocations (registered not evictable:
 * resident for good), stamped off the launching thread (stamp_log.c).
 *
 * Nothing in the shim decides on those stamps: no eviction waits for them
 * and no policy reads them; only the listings show them (the live snapshot
 * that `vramshim dump` and `top` read, VRAMSHIM_DEBUG_SNAPSHOT). Made at
 * the launch, their look-ups would be a quarter of the launch hook's cost
 * (27 of 100 ns with 10,000 live allocations). So a launch puts the words
 * that point into them, with its sequence number, in its thread's log
 * (`vs_stamp_log_put`), and the stamp thread looks them up and stamps them
 * later, in batches. A listing first stamps everything logged
 * (`vs_stamp_log_flush`), so that it shows every use made before it.
 *
 * Each use counts once per operation, as a stamp made at the launch does.
 * The logs are stamped one after another, out of order with one another:
 * a logged use always counts, and the latest sequence number stays
 * (`vs_registry_stamp_logged_registry_locked`). An address freed and
 * registered again before its logged use is stamped stamps the new
 * allocation: one use too many, in a figure for people.
 *
 * Where the log cannot take a use (it is full, no thread can be had, a
 * forked child, or it was never enabled: the unit tests of the registry),
 * `vs_stamp_log_put` says so and the caller stamps it at once.
 *
 * Locks: the log's drain lock is taken before the registry lock (a flush
 * takes the read lock under it), never under a shim lock; a thread puts in
 * its own log without a lock. Errors: none (a use not logged is stamped at
 * once).
 */
#ifndef VS_STAMP_LOG_H
#define VS_STAMP_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "registry.h"

/* From the shim's load: launches may log from now on. Without it, every
 * put says no. */
void vs_stamp_log_enable(void);

/* Logs the `count` settled uses of the operation numbered `seq` (the
 * words that point into them); with the registry's read lock held (the launch path). False: not
 * logged, stamp them now. */
bool vs_stamp_log_put(const uintptr_t *words, size_t count, uint64_t seq);

/* Stamps everything logged so far, on this thread. Without any shim lock. */
void vs_stamp_log_flush(void);

/* At exit: the stamp thread stamps what is logged and ends. */
void vs_stamp_log_stop(void);

/* For tests: uses logged and not stamped yet, over every log. */
uint64_t vs_stamp_log_pending(void);

#endif /* VS_STAMP_LOG_H */
