/* registry_lock.h: the registry's reader-writer lock (registry_lock.c).
 *
 * Read on every operation's fast path, from its scan to its submission;
 * written for adds, removes and residency changes, which are rare next to
 * launches. A read costs a locked store to the thread's own cache line and
 * a load of a line only writers write; its release, a plain store. A
 * pthread rwlock costs two locked instructions on one line every reader
 * writes, and a call into libc each way (5-8 ns of the launch hook).
 *
 * Semantics are those of the pthread rwlock it replaces (glibc's default,
 * which prefers readers): reads nest, a reader never becomes a writer, and a
 * writer waiting for a long read never makes new readers wait for that
 * read's end (a read that waits on another thread's read would deadlock).
 * Locks: internal.h (the registry lock); errors: none (waits, never fails).
 */
#ifndef VS_REGISTRY_LOCK_H
#define VS_REGISTRY_LOCK_H

#include <stdbool.h>

/* Takes the lock for reading; nests. */
void vs_registry_lock_read(void);
/* Takes the lock for writing. Not while this thread reads. */
void vs_registry_lock_write(void);
/* Lets go of this thread's innermost read, or of its write. */
void vs_registry_lock_release(void);

/* Whether this thread holds a read, or the write (for assertions). */
bool vs_registry_lock_reading(void);
bool vs_registry_lock_writing(void);

/* For tests: how many per-thread reader records exist (threads that ever
 * read and are alive, plus records kept for reuse after a thread's exit),
 * and how many times a writer let new readers in while an old read went on
 * (`vs_registry_lock_write` stepping back, see registry_lock.c). */
unsigned vs_registry_lock_reader_records(void);
unsigned long vs_registry_lock_write_retreats(void);

#endif /* VS_REGISTRY_LOCK_H */
