/* spill.h: the disk tier (`VRAMSHIM_SPILL_DIR`), where cold host copies go
 * when pinned host memory runs short.
 *
 * One spill file per process, with no name (nothing is left on disk after
 * exit or SIGKILL), created at the first spill. Its space is managed in
 * 2 MiB blocks; a spilled copy is a list of extents of the file, one
 * checksum per block. Space is reserved before any byte is written, so a
 * full disk shows as -ENOSPC when spilling, never later; every block is
 * verified when it is read back, so corruption on disk is an error, never
 * silent. All I/O goes through the seam in spill_io.h.
 *
 * Functions return 0 or a negative errno, never change `errno`, and are
 * thread-safe (I/O runs outside the store's lock).
 */
#ifndef VS_SPILL_H
#define VS_SPILL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "content_hash.h"
#include "host_pool.h"

/* The unit of space and of checksums. */
#define VS_SPILL_BLOCK_BYTES (2ull << 20)
/* The alignment O_DIRECT needs of buffers, offsets and sizes. */
#define VS_SPILL_ALIGN 4096u

/* A run of the spill file: byte offset and length, multiples of
 * VS_SPILL_BLOCK_BYTES. */
typedef struct vs_spill_extent_s {
    uint64_t offset, bytes;
} vs_spill_extent_t;

/* A spilled copy. */
typedef struct vs_spill_copy_s {
    vs_spill_extent_t *extents;
    uint32_t count;
    uint64_t bytes;               /* whole blocks */
    vs_content_hash_t *checksums; /* one per block, in order */
} vs_spill_copy_t;

/* Sets up the disk tier from `VRAMSHIM_SPILL_DIR` (NULL or "": no disk
 * tier). Checks that the directory exists, is a directory and that an
 * unlinked file can be created in it; warns (one line) when it is on tmpfs
 * or ramfs, where spilling to memory defeats the disk tier. Returns 0, or
 * -errno with one line in `err` naming VRAMSHIM_SPILL_DIR, the value and the
 * accepted form. A second call first shuts the previous tier down. */
int vs_spill_configure(const char *dir, char *err, size_t err_size);

bool vs_spill_enabled(void);

/* Writes `bytes` from the source extents (pinned host memory; each extent's
 * ptr and bytes are multiples of 4096, and its bytes of
 * VS_SPILL_BLOCK_BYTES except possibly the last one's; together at least
 * `bytes` rounded up to 4096) to newly reserved space: reserve first, then
 * write, one checksum per block over the whole block as stored (a last
 * partial block is padded with zeros). On failure nothing is kept and the
 * source is untouched. 0, -ENOSPC, -EIO, -ENOMEM, -ENODEV (no disk tier),
 * -EINVAL (misaligned or too small a source). `bytes` 0 gives an empty copy. */
int vs_spill_write(const vs_host_extent_t *src, uint32_t src_count, uint64_t bytes, vs_spill_copy_t *out);

/* Reads blocks [first_block, first_block + blocks) of a copy into `dst`
 * (blocks * VS_SPILL_BLOCK_BYTES bytes, 4096-aligned), verifying each
 * block's checksum. 0, -EIO (an I/O error, or a read that cannot complete),
 * -EBADMSG (a checksum mismatch: the data on disk is corrupt; logged),
 * -EINVAL (blocks outside the copy, misaligned `dst`), -ENODEV (the tier is
 * shut down). */
int vs_spill_read(const vs_spill_copy_t *copy, uint64_t first_block, uint64_t blocks, void *dst);

/* Gives the copy's space back (its disk blocks are punched out and reused)
 * and empties *copy. An empty copy is fine. */
void vs_spill_release(vs_spill_copy_t *copy);

typedef struct vs_spill_stats_s {
    uint64_t file_bytes;        /* the spill file's size */
    uint64_t used_bytes;        /* bytes of it held by copies */
    uint64_t writes, reads;     /* vs_spill_write / vs_spill_read calls that succeeded */
    uint64_t bytes_written, bytes_read;
    uint64_t checksum_failures; /* blocks that failed verification */
    uint64_t io_errors;         /* failed reserves, writes and reads (ENOSPC included) */
    bool direct_io;             /* O_DIRECT in use (or, before the first spill, available) */
} vs_spill_stats_t;

void vs_spill_stats(vs_spill_stats_t *out);

/* Closes the spill file (nothing is left on disk) and turns the tier off:
 * outstanding copies become unreadable (-ENODEV), later writes -ENODEV.
 * Releasing such a copy afterwards only frees its arrays; it must not be
 * released after a later `vs_spill_configure`, whose file it is not. */
void vs_spill_shutdown(void);

#endif /* VS_SPILL_H */
