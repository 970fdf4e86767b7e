/* spill.c: the disk tier's store (`vs_spill_write`, `vs_spill_read`).
 *
 * The spill file is one array of 2 MiB blocks with a bitmap of the ones in
 * use. A write takes the first free run long enough for the whole copy;
 * failing that it gathers the free runs in file order and grows the file
 * only by what is still missing, so the file never grows while holes could
 * hold the copy. Freed blocks are punched out (their disk space goes back at
 * once) and the file is cut after its last used block. Because punched and
 * new blocks alike have no disk space behind them, every write reserves all
 * its extents before writing a byte: a full disk fails the spill, not a
 * later write.
 *
 * I/O runs without the lock: blocks belong to their copy from the moment
 * they are taken, so two spills never touch the same bytes. A copy's blocks
 * are punched before they are marked free, never after, so a punch cannot
 * hit blocks another spill has already taken.
 */
#include "spill.h"

#include "internal.h"

#include "config.h"
#include "log.h"
#include "spill_io.h"
#include "tunables.h"

#include <errno.h>
#include <limits.h>
#include <linux/magic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>

_Static_assert(VS_SPILL_CHUNK_BYTES % VS_SPILL_ALIGN == 0, "a run cut at a chunk keeps O_DIRECT's alignment");

/* The store. `lock` guards every field but the counters; lock order
 * (internal.h): a leaf (vs_log takes none); `_spill_locked` functions
 * expect it held. Invariant: the last block
 * of the file (`file_blocks` - 1) is in use, or the file is empty. */
static struct {
    vs_mutex_t lock;
    bool enabled;
    char dir[PATH_MAX];
    int fd;              /* -1 until the first spill */
    bool direct_io;
    uint64_t *used;      /* bitmap, one bit per block of the file */
    uint64_t capacity;   /* bits `used` has room for */
    uint64_t file_blocks;
    uint64_t used_blocks;
    void *zeros;         /* one block of zeros: the padding of a last partial block */
} vs_spill = {.lock = VS_MUTEX_INITIALIZER, .fd = -1};

static _Atomic uint64_t vs_spill_writes, vs_spill_reads, vs_spill_bytes_written, vs_spill_bytes_read;
static _Atomic uint64_t vs_spill_checksum_failures, vs_spill_io_errors;

static bool vs_spill_block_used(uint64_t block)
{
    return (vs_spill.used[block / 64] >> (block % 64)) & 1u;
}

static void vs_spill_mark(uint64_t first, uint64_t count, bool used)
{
    for (uint64_t b = first; b < first + count; b++) {
        if (used)
            vs_spill.used[b / 64] |= 1ull << (b % 64);
        else
            vs_spill.used[b / 64] &= ~(1ull << (b % 64));
    }
}

/* The next free run at or after `from` inside the file: its start (or
 * `file_blocks` when none) and length. */
static uint64_t vs_spill_next_free(uint64_t from, uint64_t *length)
{
    uint64_t b = from;
    while (b < vs_spill.file_blocks) {
        if (b % 64 == 0 && vs_spill.used[b / 64] == UINT64_MAX) {
            b += 64;
            continue;
        }
        if (!vs_spill_block_used(b))
            break;
        b++;
    }
    if (b >= vs_spill.file_blocks) {
        *length = 0;
        return vs_spill.file_blocks;
    }
    uint64_t end = b;
    while (end < vs_spill.file_blocks && !vs_spill_block_used(end))
        end++;
    *length = end - b;
    return b;
}

static int vs_spill_grow_bitmap(uint64_t blocks)
{
    if (blocks <= vs_spill.capacity)
        return 0;
    uint64_t capacity = vs_spill.capacity != 0 ? vs_spill.capacity : 512;
    while (capacity < blocks)
        capacity *= 2;
    uint64_t *used = realloc(vs_spill.used, capacity / 64 * sizeof *used);
    if (used == NULL)
        return -ENOMEM;
    memset(used + vs_spill.capacity / 64, 0, (capacity - vs_spill.capacity) / 64 * sizeof *used);
    vs_spill.used = used;
    vs_spill.capacity = capacity;
    return 0;
}

/* Takes `blocks` blocks (see the top of the file for the order of
 * preference) and returns them as extents in bytes. Lock held. */
static int vs_spill_take(uint64_t blocks, vs_spill_extent_t **out, uint32_t *count)
{
    uint64_t length, start, found = 0, runs = 0;

    /* One run long enough: first fit. */
    for (start = vs_spill_next_free(0, &length); length != 0; start = vs_spill_next_free(start + length, &length)) {
        if (length >= blocks) {
            vs_spill_extent_t *one = malloc(sizeof *one);
            if (one == NULL)
                return -ENOMEM;
            vs_spill_mark(start, blocks, true);
            vs_spill.used_blocks += blocks;
            *one = (vs_spill_extent_t){start * VS_SPILL_BLOCK_BYTES, blocks * VS_SPILL_BLOCK_BYTES};
            *out = one;
            *count = 1;
            return 0;
        }
        found += length;
        runs++;
    }
    /* The holes in file order, then the end of the file for the rest. */
    uint64_t grow = found < blocks ? blocks - found : 0;
    if (runs >= UINT32_MAX)
        return -ENOMEM;
    if (vs_spill_grow_bitmap(vs_spill.file_blocks + grow) != 0)
        return -ENOMEM;
    vs_spill_extent_t *extents = malloc((runs + 1) * sizeof *extents);
    if (extents == NULL)
        return -ENOMEM;
    uint64_t missing = blocks;
    uint32_t n = 0;
    for (start = vs_spill_next_free(0, &length); length != 0 && missing != 0;
         start = vs_spill_next_free(start + length, &length)) {
        uint64_t part = length < missing ? length : missing;
        vs_spill_mark(start, part, true);
        extents[n++] = (vs_spill_extent_t){start * VS_SPILL_BLOCK_BYTES, part * VS_SPILL_BLOCK_BYTES};
        missing -= part;
    }
    if (missing != 0) {
        vs_spill_mark(vs_spill.file_blocks, missing, true);
        extents[n++] = (vs_spill_extent_t){vs_spill.file_blocks * VS_SPILL_BLOCK_BYTES,
                                           missing * VS_SPILL_BLOCK_BYTES};
        vs_spill.file_blocks += missing;
    }
    vs_spill.used_blocks += blocks;
    *out = extents;
    *count = n;
    return 0;
}

/* Marks a copy's blocks free and cuts the file after its last used block.
 * Extents that are not this file's in-use blocks (a copy from before a
 * shutdown) are skipped. Lock held. */
static void vs_spill_give_back(const vs_spill_extent_t *extents, uint32_t count)
{
    for (uint32_t i = 0; i < count; i++) {
        uint64_t first = extents[i].offset / VS_SPILL_BLOCK_BYTES;
        uint64_t n = extents[i].bytes / VS_SPILL_BLOCK_BYTES;
        if (first + n > vs_spill.file_blocks || first + n < first)
            continue;
        for (uint64_t b = first; b < first + n; b++) {
            if (vs_spill_block_used(b)) {
                vs_spill_mark(b, 1, false);
                vs_spill.used_blocks--;
            }
        }
    }
    uint64_t before = vs_spill.file_blocks;
    while (vs_spill.file_blocks > 0 && !vs_spill_block_used(vs_spill.file_blocks - 1))
        vs_spill.file_blocks--;
    if (vs_spill.file_blocks != before && vs_spill.fd >= 0)
        (void)vs_spill_io()->truncate(vs_spill.fd, vs_spill.file_blocks * VS_SPILL_BLOCK_BYTES);
}

/* The store's error for a failed I/O call's errno. */
static int vs_spill_error_of(int err)
{
    switch (err) {
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
        return -ENOSPC;
    case ENOMEM:
        return -ENOMEM;
    default:
        return -EIO;
    }
}

/* Opens the spill file at the first spill. Lock held. */
static int vs_spill_open_spill_locked(void)
{
    VS_ASSERT_HELD(&vs_spill.lock);
    bool direct_io = false;

    if (vs_spill.fd >= 0)
        return 0;
    int fd = vs_spill_io()->open_temp(vs_spill.dir, &direct_io);
    if (fd < 0) {
        int err = errno;
        vs_log(VS_LOG_WARN, "cannot create the spill file in VRAMSHIM_SPILL_DIR=%s: %s", vs_spill.dir,
               strerror(err));
        return vs_spill_error_of(err);
    }
    vs_spill.fd = fd;
    vs_spill.direct_io = direct_io;
    vs_log(VS_LOG_INFO, "spill file created in %s (%s I/O)", vs_spill.dir, direct_io ? "direct" : "buffered");
    return 0;
}

/* Moves all of [buf, buf + bytes) to the file, looping over short writes
 * and retrying interrupted ones. */
static int vs_spill_write_all(int fd, const unsigned char *buf, uint64_t bytes, uint64_t offset)
{
    const vs_spill_io_t *io = vs_spill_io();
    while (bytes != 0) {
        ssize_t done = io->write_at(fd, buf, bytes, offset);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0) {
            atomic_fetch_add(&vs_spill_io_errors, 1);
            return done < 0 ? vs_spill_error_of(errno) : -EIO;
        }
        buf += done;
        offset += (uint64_t)done;
        bytes -= (uint64_t)done;
    }
    return 0;
}

static int vs_spill_read_all(int fd, unsigned char *buf, uint64_t bytes, uint64_t offset)
{
    const vs_spill_io_t *io = vs_spill_io();
    while (bytes != 0) {
        ssize_t done = io->read_at(fd, buf, bytes, offset);
        if (done < 0 && errno == EINTR)
            continue;
        if (done <= 0) {
            /* 0: the end of the file inside a copy, which cannot complete. */
            atomic_fetch_add(&vs_spill_io_errors, 1);
            return -EIO;
        }
        buf += done;
        offset += (uint64_t)done;
        bytes -= (uint64_t)done;
    }
    return 0;
}

static int vs_spill_reserve(int fd, const vs_spill_extent_t *extents, uint32_t count)
{
    const vs_spill_io_t *io = vs_spill_io();
    for (uint32_t i = 0; i < count; i++) {
        if (io->reserve(fd, extents[i].offset, extents[i].bytes) != 0) {
            int err = errno;
            atomic_fetch_add(&vs_spill_io_errors, 1);
            vs_log(err == ENOSPC ? VS_LOG_DEBUG : VS_LOG_WARN, "spill: reserving %llu bytes failed: %s",
                   (unsigned long long)extents[i].bytes, strerror(err));
            return vs_spill_error_of(err);
        }
    }
    return 0;
}

/* Source and destination of a write, walked block by block. */
typedef struct vs_spill_cursor_s {
    const vs_host_extent_t *src;
    uint32_t src_index;
    uint64_t src_at;  /* offset in src[src_index] */
    const vs_spill_extent_t *disk;
    uint32_t disk_index;
    uint64_t disk_at; /* offset in disk[disk_index] */
} vs_spill_cursor_t;

static const unsigned char *vs_spill_cursor_src(const vs_spill_cursor_t *c)
{
    return (const unsigned char *)c->src[c->src_index].ptr + c->src_at;
}

static uint64_t vs_spill_cursor_disk(const vs_spill_cursor_t *c)
{
    return c->disk[c->disk_index].offset + c->disk_at;
}

static void vs_spill_cursor_next(vs_spill_cursor_t *c)
{
    c->src_at += VS_SPILL_BLOCK_BYTES;
    if (c->src_at >= c->src[c->src_index].bytes) {
        c->src_index++;
        c->src_at = 0;
    }
    c->disk_at += VS_SPILL_BLOCK_BYTES;
    if (c->disk_at >= c->disk[c->disk_index].bytes) {
        c->disk_index++;
        c->disk_at = 0;
    }
}

/* Writes the blocks in runs that are contiguous both in memory and in the
 * file, at most VS_SPILL_CHUNK_BYTES each, checksumming each block first. */
static int vs_spill_write_blocks(int fd, const vs_host_extent_t *src, uint64_t data_bytes, uint64_t blocks,
                                 const vs_spill_extent_t *disk, vs_content_hash_t *checksums, const void *zeros)
{
    vs_spill_cursor_t c = {.src = src, .disk = disk};
    uint64_t b = 0;

    while (b < blocks) {
        const unsigned char *run_src = vs_spill_cursor_src(&c);
        uint64_t run_disk = vs_spill_cursor_disk(&c);
        uint64_t run_bytes = 0, padding = 0;
        do {
            const unsigned char *block_src = vs_spill_cursor_src(&c);
            uint64_t block_data = data_bytes - b * VS_SPILL_BLOCK_BYTES;
            if (block_data > VS_SPILL_BLOCK_BYTES)
                block_data = VS_SPILL_BLOCK_BYTES;
            vs_content_hash_t h = {{0, 0}};
            vs_content_hash_update(&h, 0, block_src, block_data);
            if (block_data < VS_SPILL_BLOCK_BYTES) {
                padding = VS_SPILL_BLOCK_BYTES - block_data;
                vs_content_hash_update(&h, block_data, zeros, padding);
            }
            checksums[b] = vs_content_hash_final(h, VS_SPILL_BLOCK_BYTES);
            run_bytes += block_data;
            b++;
            if (b == blocks)
                break;
            vs_spill_cursor_next(&c);
        } while (padding == 0 && run_bytes < VS_SPILL_CHUNK_BYTES && vs_spill_cursor_src(&c) == run_src + run_bytes
                 && vs_spill_cursor_disk(&c) == run_disk + run_bytes);
        int rc = vs_spill_write_all(fd, run_src, run_bytes, run_disk);
        if (rc == 0 && padding != 0)
            rc = vs_spill_write_all(fd, zeros, padding, run_disk + run_bytes);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The source must be what the header promises: O_DIRECT needs the
 * alignment, the block walk needs block-sized extents. */
static bool vs_spill_source_ok(const vs_host_extent_t *src, uint32_t src_count, uint64_t data_bytes)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < src_count && total < data_bytes; i++) {
        if (src[i].ptr == NULL || src[i].bytes == 0 || (uintptr_t)src[i].ptr % VS_SPILL_ALIGN != 0
            || src[i].bytes % VS_SPILL_ALIGN != 0)
            return false;
        /* Only the extent the data ends in may hold part of a block. */
        if (total + src[i].bytes < data_bytes && src[i].bytes % VS_SPILL_BLOCK_BYTES != 0)
            return false;
        total += src[i].bytes;
    }
    return total >= data_bytes;
}

int vs_spill_write(const vs_host_extent_t *src, uint32_t src_count, uint64_t bytes, vs_spill_copy_t *out)
{
    int saved_errno = errno;
    vs_spill_extent_t *extents = NULL;
    vs_content_hash_t *checksums = NULL;
    uint32_t count = 0;
    bool taken = false;
    int fd = -1;
    int rc = 0;

    memset(out, 0, sizeof *out);
    if (!vs_spill_enabled()) {
        rc = -ENODEV;
        goto out;
    }
    if (bytes == 0)
        goto out;
    uint64_t data_bytes = (bytes + VS_SPILL_ALIGN - 1) / VS_SPILL_ALIGN * VS_SPILL_ALIGN;
    uint64_t blocks = (bytes + VS_SPILL_BLOCK_BYTES - 1) / VS_SPILL_BLOCK_BYTES;
    if (data_bytes < bytes || src == NULL || !vs_spill_source_ok(src, src_count, data_bytes)) {
        rc = -EINVAL;
        goto out;
    }
    checksums = malloc(blocks * sizeof *checksums);
    if (checksums == NULL) {
        rc = -ENOMEM;
        goto out;
    }

    vs_mutex_lock(&vs_spill.lock);
    if (!vs_spill.enabled)
        rc = -ENODEV;
    if (rc == 0)
        rc = vs_spill_open_spill_locked();
    if (rc == 0 && data_bytes % VS_SPILL_BLOCK_BYTES != 0 && vs_spill.zeros == NULL) {
        vs_spill.zeros = aligned_alloc(VS_SPILL_ALIGN, VS_SPILL_BLOCK_BYTES);
        if (vs_spill.zeros == NULL)
            rc = -ENOMEM;
        else
            memset(vs_spill.zeros, 0, VS_SPILL_BLOCK_BYTES);
    }
    if (rc == 0)
        rc = vs_spill_take(blocks, &extents, &count);
    taken = rc == 0;
    fd = vs_spill.fd;
    const void *zeros = vs_spill.zeros;
    vs_mutex_unlock(&vs_spill.lock);
    if (rc != 0)
        goto out;

    rc = vs_spill_reserve(fd, extents, count);
    if (rc == 0)
        rc = vs_spill_write_blocks(fd, src, data_bytes, blocks, extents, checksums, zeros);
    if (rc != 0)
        goto out;

    *out = (vs_spill_copy_t){.extents = extents, .count = count, .bytes = blocks * VS_SPILL_BLOCK_BYTES,
                             .checksums = checksums};
    extents = NULL;
    checksums = NULL;
    atomic_fetch_add(&vs_spill_writes, 1);
    atomic_fetch_add(&vs_spill_bytes_written, blocks * VS_SPILL_BLOCK_BYTES);
out:
    if (taken && extents != NULL) {
        /* Nothing is kept of a failed spill: neither blocks nor disk space. */
        const vs_spill_io_t *io = vs_spill_io();
        for (uint32_t i = 0; i < count; i++)
            (void)io->punch(fd, extents[i].offset, extents[i].bytes);
        vs_mutex_lock(&vs_spill.lock);
        vs_spill_give_back(extents, count);
        vs_mutex_unlock(&vs_spill.lock);
    }
    free(extents);
    free(checksums);
    errno = saved_errno;
    return rc;
}

int vs_spill_read(const vs_spill_copy_t *copy, uint64_t first_block, uint64_t blocks, void *dst)
{
    int saved_errno = errno;
    int rc = 0;

    if (blocks == 0)
        goto out;
    uint64_t copy_blocks = copy != NULL ? copy->bytes / VS_SPILL_BLOCK_BYTES : 0;
    if (copy == NULL || dst == NULL || (uintptr_t)dst % VS_SPILL_ALIGN != 0 || first_block >= copy_blocks
        || blocks > copy_blocks - first_block) {
        rc = -EINVAL;
        goto out;
    }
    vs_mutex_lock(&vs_spill.lock);
    int fd = vs_spill.enabled ? vs_spill.fd : -1;
    vs_mutex_unlock(&vs_spill.lock);
    if (fd < 0) {
        rc = -ENODEV;
        goto out;
    }

    /* Find the extent holding `first_block`. */
    uint32_t index = 0;
    uint64_t at = first_block * VS_SPILL_BLOCK_BYTES;
    while (index < copy->count && at >= copy->extents[index].bytes) {
        at -= copy->extents[index].bytes;
        index++;
    }
    unsigned char *to = dst;
    uint64_t b = 0;
    while (b < blocks) {
        if (index >= copy->count) {
            rc = -EINVAL; /* extents shorter than `bytes`: not a copy this store made */
            goto out;
        }
        uint64_t run = copy->extents[index].bytes - at;
        if (run > (blocks - b) * VS_SPILL_BLOCK_BYTES)
            run = (blocks - b) * VS_SPILL_BLOCK_BYTES;
        if (run > VS_SPILL_CHUNK_BYTES)
            run = VS_SPILL_CHUNK_BYTES;
        uint64_t offset = copy->extents[index].offset + at;
        rc = vs_spill_read_all(fd, to, run, offset);
        if (rc != 0) {
            vs_log(VS_LOG_WARN, "spill: reading %llu bytes at offset %llu of the spill file failed",
                   (unsigned long long)run, (unsigned long long)offset);
            goto out;
        }
        for (uint64_t k = 0; k < run / VS_SPILL_BLOCK_BYTES; k++) {
            uint64_t block = first_block + b + k;
            vs_content_hash_t h = vs_content_hash(to + k * VS_SPILL_BLOCK_BYTES, VS_SPILL_BLOCK_BYTES);
            if (!vs_content_hash_equal(h, copy->checksums[block])) {
                atomic_fetch_add(&vs_spill_checksum_failures, 1);
                vs_log(VS_LOG_ERROR,
                       "spill: block %llu of a spilled copy (offset %llu of the spill file) fails its checksum: "
                       "the data on disk is corrupt",
                       (unsigned long long)block, (unsigned long long)(offset + k * VS_SPILL_BLOCK_BYTES));
                rc = -EBADMSG;
                goto out;
            }
        }
        to += run;
        b += run / VS_SPILL_BLOCK_BYTES;
        at += run;
        if (at == copy->extents[index].bytes) {
            index++;
            at = 0;
        }
    }
    atomic_fetch_add(&vs_spill_reads, 1);
    atomic_fetch_add(&vs_spill_bytes_read, blocks * VS_SPILL_BLOCK_BYTES);
out:
    errno = saved_errno;
    return rc;
}

void vs_spill_release(vs_spill_copy_t *copy)
{
    int saved_errno = errno;

    if (copy == NULL)
        return;
    if (copy->count != 0) {
        vs_mutex_lock(&vs_spill.lock);
        int fd = vs_spill.enabled ? vs_spill.fd : -1;
        vs_mutex_unlock(&vs_spill.lock);
        if (fd >= 0) {
            /* Punched while the blocks are still this copy's (see the top). */
            const vs_spill_io_t *io = vs_spill_io();
            for (uint32_t i = 0; i < copy->count; i++)
                (void)io->punch(fd, copy->extents[i].offset, copy->extents[i].bytes);
            vs_mutex_lock(&vs_spill.lock);
            if (vs_spill.fd == fd)
                vs_spill_give_back(copy->extents, copy->count);
            vs_mutex_unlock(&vs_spill.lock);
        }
    }
    free(copy->extents);
    free(copy->checksums);
    memset(copy, 0, sizeof *copy);
    errno = saved_errno;
}

/* Closes the file and forgets every block. Lock held. */
static void vs_spill_close_spill_locked(void)
{
    VS_ASSERT_HELD(&vs_spill.lock);
    if (vs_spill.fd >= 0)
        (void)vs_spill_io()->close(vs_spill.fd);
    vs_spill.fd = -1;
    vs_spill.enabled = false;
    vs_spill.dir[0] = '\0';
    free(vs_spill.used);
    vs_spill.used = NULL;
    vs_spill.capacity = 0;
    vs_spill.file_blocks = 0;
    vs_spill.used_blocks = 0;
    free(vs_spill.zeros);
    vs_spill.zeros = NULL;
}

void vs_spill_shutdown(void)
{
    int saved_errno = errno;
    vs_mutex_lock(&vs_spill.lock);
    vs_spill_close_spill_locked();
    vs_mutex_unlock(&vs_spill.lock);
    errno = saved_errno;
}

bool vs_spill_enabled(void)
{
    vs_mutex_lock(&vs_spill.lock);
    bool enabled = vs_spill.enabled;
    vs_mutex_unlock(&vs_spill.lock);
    return enabled;
}

void vs_spill_stats(vs_spill_stats_t *out)
{
    vs_mutex_lock(&vs_spill.lock);
    out->file_bytes = vs_spill.file_blocks * VS_SPILL_BLOCK_BYTES;
    out->used_bytes = vs_spill.used_blocks * VS_SPILL_BLOCK_BYTES;
    out->direct_io = vs_spill.direct_io;
    vs_mutex_unlock(&vs_spill.lock);
    out->writes = atomic_load(&vs_spill_writes);
    out->reads = atomic_load(&vs_spill_reads);
    out->bytes_written = atomic_load(&vs_spill_bytes_written);
    out->bytes_read = atomic_load(&vs_spill_bytes_read);
    out->checksum_failures = atomic_load(&vs_spill_checksum_failures);
    out->io_errors = atomic_load(&vs_spill_io_errors);
}

/* The start-up error: the config's one-line form, with the reason. */
static void vs_spill_config_error(char *err, size_t err_size, const char *dir, const char *reason)
{
    char shown[160];
    if (err == NULL || err_size == 0)
        return;
    vs_config_quote(dir, shown, sizeof shown);
    snprintf(err, err_size, "vramshim: VRAMSHIM_SPILL_DIR=\"%s\" is not valid (%s); accepted: %s", shown, reason,
             VS_SPILL_DIR_FORMS);
}

int vs_spill_configure(const char *dir, char *err, size_t err_size)
{
    int saved_errno = errno;
    struct stat st;
    struct statfs fs;
    bool direct_io = false;
    int rc = 0;

    vs_mutex_lock(&vs_spill.lock);
    vs_spill_close_spill_locked();
    vs_mutex_unlock(&vs_spill.lock);
    atomic_store(&vs_spill_writes, 0);
    atomic_store(&vs_spill_reads, 0);
    atomic_store(&vs_spill_bytes_written, 0);
    atomic_store(&vs_spill_bytes_read, 0);
    atomic_store(&vs_spill_checksum_failures, 0);
    atomic_store(&vs_spill_io_errors, 0);
    if (dir == NULL || dir[0] == '\0')
        goto out;

    /* Room for the fallback's "/.vramshim-spill-XXXXXX". */
    if (strlen(dir) + 32 > sizeof vs_spill.dir) {
        rc = -ENAMETOOLONG;
        vs_spill_config_error(err, err_size, dir, "the path is too long");
        goto out;
    }
    if (stat(dir, &st) != 0) {
        rc = -errno;
        vs_spill_config_error(err, err_size, dir, strerror(errno));
        goto out;
    }
    if (!S_ISDIR(st.st_mode)) {
        rc = -ENOTDIR;
        vs_spill_config_error(err, err_size, dir, "not a directory");
        goto out;
    }
    /* The check that matters: the very call the first spill will make. */
    const vs_spill_io_t *io = vs_spill_io();
    int fd = io->open_temp(dir, &direct_io);
    if (fd < 0) {
        char reason[128];
        rc = -errno;
        snprintf(reason, sizeof reason, "cannot create a file in it: %s", strerror(errno));
        vs_spill_config_error(err, err_size, dir, reason);
        goto out;
    }
    (void)io->close(fd);
    if (statfs(dir, &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC))
        vs_log(VS_LOG_WARN, "VRAMSHIM_SPILL_DIR=%s is on %s: spilling to memory defeats the disk tier", dir,
               fs.f_type == TMPFS_MAGIC ? "tmpfs" : "ramfs");

    vs_mutex_lock(&vs_spill.lock);
    memcpy(vs_spill.dir, dir, strlen(dir) + 1);
    vs_spill.direct_io = direct_io;
    vs_spill.enabled = true;
    vs_mutex_unlock(&vs_spill.lock);
out:
    errno = saved_errno;
    return rc;
}
