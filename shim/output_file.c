/* output_file.c: creation of the files the shim writes (`vs_output_open`);
 * the rules are in output_file.h. Nothing here logs: callers do, once. */
#include "output_file.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

/* A regular file of ours with a single link: an earlier run's output, not
 * something planted (another user's file, or a hard link to one of ours). */
static int vs_output_is_ours(const struct stat *st)
{
    if (!S_ISREG(st->st_mode))
        return S_ISFIFO(st->st_mode) ? -ENXIO : -EPERM;
    if (st->st_uid != geteuid() || st->st_nlink != 1)
        return -EPERM;
    return 0;
}

int vs_output_open(const char *path, vs_output_mode_t mode)
{
    int saved_errno = errno;
    int fd = -1, rc;

    for (int attempt = 0; attempt < 2; attempt++) {
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0600);
        if (fd >= 0) {
            rc = fchmod(fd, 0600) < 0 ? -errno : 0; /* whatever the umask did */
            goto done;
        }
        if (errno != EEXIST) {
            rc = -errno;
            goto out;
        }
        /* Something is there: a file of ours is used in place; the
         * descriptor's own fstat decides, so a swap after the check
         * changes nothing. ENOENT: it went away meanwhile, create again. */
        fd = open(path, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd >= 0)
            break;
        rc = -errno;
        if (errno != ENOENT)
            goto out;
    }
    if (fd < 0) {
        rc = -EEXIST;
        goto out;
    }
    struct stat st;
    rc = fstat(fd, &st) < 0 ? -errno : vs_output_is_ours(&st);
    if (rc == 0 && mode == VS_OUTPUT_REPLACE && ftruncate(fd, 0) < 0)
        rc = -errno;
    if (rc == 0 && st.st_mode & 077)
        rc = fchmod(fd, 0600) < 0 ? -errno : 0;
done:
    if (rc == 0 && mode == VS_OUTPUT_APPEND && fcntl(fd, F_SETFL, O_WRONLY | O_APPEND | O_NONBLOCK) < 0)
        rc = -errno;
    if (rc != 0) {
        close(fd);
        goto out;
    }
    errno = saved_errno;
    return fd;
out:
    errno = saved_errno;
    return rc;
}

int vs_output_replaceable(const char *path)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    return vs_output_is_ours(&st) == 0 ? 0 : -EPERM;
}
