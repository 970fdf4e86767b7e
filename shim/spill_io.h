/* spill_io.h: the I/O seam of the disk tier (`vs_spill_io`).
 *
 * The spill store (spill.c) makes every file operation through one table of
 * functions, so that tests can see each fault the disk can produce without a
 * full or failing disk: the table is the POSIX implementation, wrapped by a
 * fault-injecting layer while `VRAMSHIM_IO_FAULT` (testing only) asks for
 * faults. Every function keeps POSIX conventions: -1 (or a short count) with
 * `errno` set, so the store's error handling is the one real I/O needs.
 *
 * No CUDA here: the unit tests link it as part of `vramshim_core`.
 */
#ifndef VS_SPILL_IO_H
#define VS_SPILL_IO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The file operations the spill store makes. Offsets and sizes in bytes. */
typedef struct vs_spill_io_s {
    /* Opens a new file with no name in `dir`, owner-only, read-write;
     * `*direct_io` tells whether it bypasses the page cache (O_DIRECT).
     * Returns the descriptor, or -1 with errno. */
    int (*open_temp)(const char *dir, bool *direct_io);
    /* Allocates disk space for [offset, offset + bytes), growing the file when
     * that passes its end, so that a full disk shows here and not in a later
     * write. 0, or -1 with errno (ENOSPC). */
    int (*reserve)(int fd, uint64_t offset, uint64_t bytes);
    /* Gives the disk space of a range back to the filesystem (the file keeps
     * its size; the range reads as zeros). 0, or -1 with errno. */
    int (*punch)(int fd, uint64_t offset, uint64_t bytes);
    /* Sets the file's size. 0, or -1 with errno. */
    int (*truncate)(int fd, uint64_t bytes);
    /* pwrite(2) and pread(2): the bytes moved (possibly fewer than asked), or
     * -1 with errno. */
    ssize_t (*write_at)(int fd, const void *buf, size_t bytes, uint64_t offset);
    ssize_t (*read_at)(int fd, void *buf, size_t bytes, uint64_t offset);
    int (*close)(int fd);
} vs_spill_io_t;

/* The plain POSIX table (Linux: O_TMPFILE, fallocate). */
extern const vs_spill_io_t vs_spill_io_posix;

/* The table the store uses now: the base table (POSIX unless a test set
 * another), behind the fault layer while faults are set. */
const vs_spill_io_t *vs_spill_io(void);

/* Replaces the base table (tests); NULL restores POSIX. The table must
 * outlive its use. Not thread-safe against I/O in flight. */
void vs_spill_io_set_base(const vs_spill_io_t *io);

/* The system calls the POSIX `open_temp` makes, replaceable so that tests
 * reach its fallbacks (no O_TMPFILE, no O_DIRECT) on filesystems that accept
 * both. Each returns like the system call it names. */
typedef struct vs_spill_io_sys_s {
    int (*open_file)(const char *path, int flags, mode_t mode);
    int (*set_flags)(int fd, int flags); /* fcntl(fd, F_SETFL, flags) */
    int (*make_temp)(char *path_template, int flags); /* mkostemp(3) */
} vs_spill_io_sys_t;

/* NULL restores the real system calls. Tests only. */
void vs_spill_io_set_sys(const vs_spill_io_sys_t *sys);

/* ---- Fault injection (`VRAMSHIM_IO_FAULT`) ------------------------------
 *
 * A comma-separated list of `OP:FAULT[:after=N][:every=M][:times=K][:ms=D]`:
 *   OP     reserve | write | read
 *   FAULT  ENOSPC (reserve, write), EIO (all three), short (write, read:
 *          move half of what was asked, at least 1 byte, and with O_DIRECT
 *          a whole number of 4 KiB pages, so the caller must loop),
 *          corrupt (read: flip one bit of what the read returns),
 *          slow (write, read: the call takes MS milliseconds more, then
 *          succeeds: a busy or networked disk)
 *   after  the first N calls of OP pass untouched (default 0)
 *   every  then every M-th call of OP is hit (default 1: each one)
 *   times  at most K calls are hit in all (default: no bound)
 *   ms     slow only: the delay of each hit call (default 100)
 * Each entry counts the calls of its OP on its own; when several entries hit
 * the same call, the first listed applies. */
#define VS_SPILL_IO_FAULT_FORMS                                                                    \
    "OP:FAULT[:after=N][:every=M][:times=K][:ms=D], comma-separated; OP reserve|write|read; FAULT " \
    "ENOSPC (reserve, write), EIO, short (write, read), corrupt (read), slow (write, read; ms=D)"

#define VS_SPILL_IO_FAULTS_MAX 8

typedef enum vs_spill_io_op_e {
    VS_SPILL_IO_RESERVE = 0,
    VS_SPILL_IO_WRITE,
    VS_SPILL_IO_READ,
} vs_spill_io_op_t;

typedef enum vs_spill_io_fault_kind_e {
    VS_SPILL_IO_FAULT_ENOSPC = 0,
    VS_SPILL_IO_FAULT_EIO,
    VS_SPILL_IO_FAULT_SHORT,
    VS_SPILL_IO_FAULT_CORRUPT,
    VS_SPILL_IO_FAULT_SLOW,
} vs_spill_io_fault_kind_t;

typedef struct vs_spill_io_fault_s {
    vs_spill_io_op_t op;
    vs_spill_io_fault_kind_t kind;
    uint64_t after; /* calls that pass before the first hit */
    uint64_t every; /* >= 1 */
    uint64_t times; /* 0 = no bound */
    uint64_t ms;    /* VS_SPILL_IO_FAULT_SLOW: the delay */
} vs_spill_io_fault_t;

typedef struct vs_spill_io_faults_s {
    uint32_t count; /* 0 = no faults */
    vs_spill_io_fault_t fault[VS_SPILL_IO_FAULTS_MAX];
} vs_spill_io_faults_t;

/* Parses a `VRAMSHIM_IO_FAULT` value. 0, or -EINVAL for anything but the
 * forms above (unknown or empty entries, a fault its OP cannot have,
 * repeated or zero `every`, more than VS_SPILL_IO_FAULTS_MAX entries) and
 * -ERANGE for a count that does not fit 64 bits. `*out` is only written on
 * success. */
int vs_spill_io_parse_faults(const char *text, vs_spill_io_faults_t *out);

/* Starts injecting `faults` (copied; call counts start from zero); NULL or
 * an empty list stops. Call before I/O starts (start-up, or a test). */
void vs_spill_io_set_faults(const vs_spill_io_faults_t *faults);

/* Faults injected so far (all entries). */
uint64_t vs_spill_io_faults_injected(void);

#endif /* VS_SPILL_IO_H */
