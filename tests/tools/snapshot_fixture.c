/* snapshot_fixture.c: a process that publishes its live-state snapshot
 * with the real writer (shim/snapshot_writer.c), for the tests of the
 * `vramshim` command and of the reader. It stands in for the shim's side
 * only in what it publishes: the allocations are a model driven by
 * commands, not GPU memory.
 *
 * Main entry point: `main`. Modes (first argument):
 *   script           a model of allocations published by the publisher
 *                    thread every 50 ms; commands on stdin, one per line,
 *                    each answered "ok" once published:
 *                      add ID SIZE [KIND]   place ID device|host|disk
 *                      keep ID REASON       touch ID      free ID
 *                      limit BYTES          crash (exit, leaving the
 *                      snapshot behind)     quit
 *   churn SECONDS    publishes generation after generation of
 *                    snapshot_pattern.h as fast as it can, until stdin
 *                    closes or SECONDS pass
 *   damage HOW       publishes once, then damages the object: bad-version,
 *                    bad-magic, truncated, corrupt-place, corrupt-count,
 *                    mid-update, mode-0644; waits for stdin to close
 *   many ROWS PROGRAM   ROWS allocations under the program name PROGRAM
 *                    (any bytes: escape sequences), published every 50 ms
 *                    with new ids each time, in decreasing order, until
 *                    stdin closes
 *   env STATUS VAR...   prints "VAR=value" for each VAR, exits STATUS
 *   raise SIGNAL        kills itself with signal number SIGNAL
 * (the last two are the programs `vramshim run` runs in its tests: unlike
 * `sh`, they carry the sanitizer runtime that an instrumented shim needs.)
 * The snapshot modes print "ready PID" once their snapshot is published.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "snapshot_writer.h"

#include "snapshot_pattern.h"

#define FIXTURE_MAX_ALLOCS 256

typedef struct fixture_alloc_s {
    bool live;
    vs_snapshot_row_t row;
} fixture_alloc_t;

static struct {
    pthread_mutex_t lock;
    fixture_alloc_t allocs[FIXTURE_MAX_ALLOCS];
    vs_snapshot_totals_t totals;
    uint64_t limit;
    uint64_t seq;
} model = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint64_t fixture_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int fixture_lookup(const char *name, const char *(*namer)(uint32_t), uint32_t count)
{
    for (uint32_t i = 0; i < count; i++)
        if (strcmp(name, namer(i)) == 0)
            return (int)i;
    return -1;
}

static const char *const fixture_places[] = {
#define X(suffix, name) name,
    VS_SNAPSHOT_PLACES(X)
#undef X
};
static const char *const fixture_kinds[] = {
#define X(suffix, name) name,
    VS_SNAPSHOT_KINDS(X)
#undef X
};
static const char *const fixture_keeps[] = {
#define X(suffix, name) name,
    VS_SNAPSHOT_KEEPS(X)
#undef X
};
static const char *fixture_place_name(uint32_t i) { return fixture_places[i]; }
static const char *fixture_kind_name(uint32_t i) { return fixture_kinds[i]; }
static const char *fixture_keep_name(uint32_t i) { return fixture_keeps[i]; }

/* The publisher callback: the model as it is now. */
static void fixture_fill(vs_snapshot_t *snap, void *ctx)
{
    (void)ctx;
    pthread_mutex_lock(&model.lock);
    vs_snapshot_totals_t t = model.totals;
    t.allocations = t.device_bytes = t.host_bytes = t.disk_bytes = 0;
    uint32_t n = 0;
    vs_snapshot_device_t dev = {.ordinal = 0, .limit_bytes = model.limit,
                                .physical_bytes = 80ull << 30};
    for (uint32_t i = 0; i < FIXTURE_MAX_ALLOCS; i++) {
        const vs_snapshot_row_t *r = &model.allocs[i].row;
        if (!model.allocs[i].live)
            continue;
        t.allocations++;
        if (r->place == VS_SNAPSHOT_PLACE_DEVICE)
            t.device_bytes += r->size, dev.resident_bytes += r->size;
        else if (r->place == VS_SNAPSHOT_PLACE_HOST)
            t.host_bytes += r->size;
        else
            t.disk_bytes += r->size;
        vs_snapshot_put_row(snap, n++, r);
    }
    vs_snapshot_set_row_count(snap, n);
    vs_snapshot_set_totals(snap, &t);
    vs_snapshot_set_devices(snap, &dev, 1);
    vs_snapshot_set_event_seq(snap, model.seq);
    pthread_mutex_unlock(&model.lock);
}

/* One command; returns 1 to quit, 0 to go on, -1 on a bad command. */
static int fixture_command(vs_snapshot_t *snap, char *line)
{
    char verb[32] = "", arg1[64] = "", arg2[64] = "", arg3[64] = "";
    if (sscanf(line, "%31s %63s %63s %63s", verb, arg1, arg2, arg3) < 1)
        return -1;
    unsigned long long id = strtoull(arg1, NULL, 10);
    if (strcmp(verb, "quit") == 0)
        return 1;
    if (strcmp(verb, "crash") == 0) {
        fflush(stdout);
        _exit(0); /* no close: the snapshot stays behind, as after SIGKILL */
    }
    if (strcmp(verb, "limit") == 0) {
        pthread_mutex_lock(&model.lock);
        model.limit = id;
        pthread_mutex_unlock(&model.lock);
        return 0;
    }
    if (id == 0 || id > FIXTURE_MAX_ALLOCS)
        return -1;
    pthread_mutex_lock(&model.lock);
    fixture_alloc_t *a = &model.allocs[id - 1];
    vs_snapshot_row_t *r = &a->row;
    int rc = 0;
    model.seq++;
    if (strcmp(verb, "add") == 0) {
        int kind = arg3[0] ? fixture_lookup(arg3, fixture_kind_name, VS_SNAPSHOT_KIND_COUNT) : 0;
        memset(a, 0, sizeof(*a));
        a->live = true;
        r->alloc_id = id;
        r->address = VS_PATTERN_BASE_ADDRESS + id * 0x4000000u;
        r->size = strtoull(arg2, NULL, 10);
        r->kind = kind < 0 ? 0 : (uint32_t)kind;
        r->created_ns = fixture_now_ns();
        r->last_use_seq = model.seq;
    } else if (!a->live) {
        rc = -1;
    } else if (strcmp(verb, "place") == 0) {
        int place = fixture_lookup(arg2, fixture_place_name, VS_SNAPSHOT_PLACE_COUNT);
        if (place < 0) {
            rc = -1;
        } else if ((uint32_t)place != r->place) {
            if (r->place == VS_SNAPSHOT_PLACE_DEVICE) {
                r->evictions++;
                model.totals.evictions++;
                model.totals.bytes_evicted += r->size;
            } else if (place == VS_SNAPSHOT_PLACE_DEVICE) {
                r->restores++;
                model.totals.restores++;
                model.totals.bytes_restored += r->size;
            }
            r->place = (uint32_t)place;
        }
    } else if (strcmp(verb, "keep") == 0) {
        int keep = fixture_lookup(arg2, fixture_keep_name, VS_SNAPSHOT_KEEP_COUNT);
        if (keep < 0)
            rc = -1;
        else
            r->keep = (uint32_t)keep;
    } else if (strcmp(verb, "touch") == 0) {
        r->uses++;
        r->last_use_ns = fixture_now_ns();
        r->last_use_seq = model.seq;
        model.totals.launches++;
    } else if (strcmp(verb, "free") == 0) {
        a->live = false;
    } else {
        rc = -1;
    }
    pthread_mutex_unlock(&model.lock);
    (void)snap;
    return rc;
}

static int fixture_script(void)
{
    int err = 0;
    vs_snapshot_identity_t id = {.mode = VS_SNAPSHOT_MODE_OFFLOAD, .program = "fixture"};
    vs_snapshot_t *snap = vs_snapshot_open(&id, &err);
    if (!snap) {
        fprintf(stderr, "fixture: vs_snapshot_open: %s\n", strerror(-err));
        return 1;
    }
    if ((err = vs_snapshot_publisher_start(snap, fixture_fill, NULL, 50)) < 0 ||
        (err = vs_snapshot_publisher_flush(snap)) < 0) {
        fprintf(stderr, "fixture: publisher: %s\n", strerror(-err));
        return 1;
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char line[256];
    while (fgets(line, sizeof(line), stdin)) {
        int rc = fixture_command(snap, line);
        if (rc == 1)
            break;
        vs_snapshot_publisher_flush(snap);
        printf(rc < 0 ? "error\n" : "ok\n");
        fflush(stdout);
    }
    vs_snapshot_close(snap, true);
    return 0;
}

static bool fixture_stdin_closed(void)
{
    struct pollfd pfd = {.fd = STDIN_FILENO, .events = POLLIN};
    if (poll(&pfd, 1, 0) <= 0)
        return false;
    char buf[64];
    return read(STDIN_FILENO, buf, sizeof(buf)) <= 0;
}

static int fixture_churn(double seconds)
{
    int err = 0;
    vs_snapshot_identity_t id = {.mode = VS_SNAPSHOT_MODE_OFFLOAD, .program = "churn",
                                 .row_capacity = 128};
    vs_snapshot_t *snap = vs_snapshot_open(&id, &err);
    if (!snap) {
        fprintf(stderr, "fixture: vs_snapshot_open: %s\n", strerror(-err));
        return 1;
    }
    uint64_t end = fixture_now_ns() + (uint64_t)(seconds * 1e9);
    for (uint64_t gen = 1;; gen++) {
        vs_snapshot_begin(snap);
        vs_pattern_fill(snap, gen);
        vs_snapshot_end(snap);
        if (gen == 1) {
            printf("ready %d\n", (int)getpid());
            fflush(stdout);
        }
        /* Thousands of publications a second, far more than the shim's
         * few; a writer that never pauses would starve every reader. */
        struct timespec pause = {0, 20000L};
        nanosleep(&pause, NULL);
        if (gen % 64 == 0 && (fixture_now_ns() > end || fixture_stdin_closed()))
            break;
    }
    vs_snapshot_close(snap, true);
    return 0;
}

static int fixture_many(uint32_t rows, const char *program)
{
    int err = 0;
    vs_snapshot_identity_t id = {.mode = VS_SNAPSHOT_MODE_OFFLOAD, .program = program,
                                 .row_capacity = rows};
    vs_snapshot_t *snap = vs_snapshot_open(&id, &err);
    if (!snap) {
        fprintf(stderr, "fixture: vs_snapshot_open: %s\n", strerror(-err));
        return 1;
    }
    for (uint64_t gen = 1;; gen++) {
        vs_snapshot_totals_t totals = {.allocations = rows, .device_bytes = (uint64_t)rows << 20};
        vs_snapshot_begin(snap);
        for (uint32_t i = 0; i < rows; i++) {
            vs_snapshot_row_t row = {
                .alloc_id = gen * rows + (rows - i), /* new every time, not sorted */
                .address = 0x7f0000000000ull + ((uint64_t)i << 21),
                .size = 1u << 20,
                .kind = VS_SNAPSHOT_KIND_DEVICE,
                .place = VS_SNAPSHOT_PLACE_DEVICE,
                .uses = gen + i,
                .created_ns = fixture_now_ns(),
            };
            vs_snapshot_put_row(snap, i, &row);
        }
        vs_snapshot_set_totals(snap, &totals);
        vs_snapshot_set_row_count(snap, rows);
        vs_snapshot_end(snap);
        if (gen == 1) {
            printf("ready %d\n", (int)getpid());
            fflush(stdout);
        }
        struct timespec pause = {0, 50000000L};
        nanosleep(&pause, NULL);
        if (fixture_stdin_closed())
            break;
    }
    vs_snapshot_close(snap, true);
    return 0;
}

static int fixture_damage(const char *how)
{
    int err = 0;
    vs_snapshot_identity_t id = {.mode = VS_SNAPSHOT_MODE_CAP, .program = "damaged",
                                 .row_capacity = 64};
    vs_snapshot_t *snap = vs_snapshot_open(&id, &err);
    if (!snap) {
        fprintf(stderr, "fixture: vs_snapshot_open: %s\n", strerror(-err));
        return 1;
    }
    vs_snapshot_begin(snap);
    vs_pattern_fill(snap, 3);
    vs_snapshot_end(snap);

    char name[VS_SNAPSHOT_NAME_MAX];
    vs_snapshot_name(name, sizeof(name), (unsigned)geteuid(), getpid());
    int fd = shm_open(name, O_RDWR, 0);
    size_t len = sizeof(vs_snapshot_header_t) + 64 * sizeof(vs_snapshot_row_t);
    vs_snapshot_header_t *h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd < 0 || h == MAP_FAILED) {
        fprintf(stderr, "fixture: cannot map %s: %s\n", name, strerror(errno));
        return 1;
    }
    vs_snapshot_row_t *rows = (vs_snapshot_row_t *)(h + 1);
    int rc = 0;
    if (strcmp(how, "bad-version") == 0)
        h->abi_version = VS_SNAPSHOT_ABI_VERSION + 98;
    else if (strcmp(how, "bad-magic") == 0)
        h->magic = 0x1234;
    else if (strcmp(how, "truncated") == 0)
        rc = ftruncate(fd, sizeof(vs_snapshot_header_t) + 2 * sizeof(vs_snapshot_row_t));
    else if (strcmp(how, "corrupt-place") == 0)
        rows[1].place = 77;
    else if (strcmp(how, "corrupt-count") == 0)
        h->row_count = 65;
    else if (strcmp(how, "mid-update") == 0)
        h->sequence |= 1; /* a writer killed between begin and end */
    else if (strcmp(how, "mode-0644") == 0)
        rc = fchmod(fd, 0644);
    else {
        fprintf(stderr, "fixture: unknown damage '%s'\n", how);
        return 2;
    }
    if (rc < 0) {
        fprintf(stderr, "fixture: %s: %s\n", how, strerror(errno));
        return 1;
    }
    close(fd);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    char buf[64];
    while (read(STDIN_FILENO, buf, sizeof(buf)) > 0)
        ;
    /* The mapping may now extend past the end of the object: leave it. */
    vs_snapshot_close(snap, true);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "script") == 0)
        return fixture_script();
    if (argc >= 3 && strcmp(argv[1], "churn") == 0)
        return fixture_churn(strtod(argv[2], NULL));
    if (argc >= 4 && strcmp(argv[1], "many") == 0)
        return fixture_many((uint32_t)strtoul(argv[2], NULL, 10), argv[3]);
    if (argc >= 3 && strcmp(argv[1], "damage") == 0)
        return fixture_damage(argv[2]);
    if (argc >= 3 && strcmp(argv[1], "env") == 0) {
        for (int i = 3; i < argc; i++) {
            const char *value = getenv(argv[i]);
            printf("%s=%s\n", argv[i], value ? value : "(unset)");
        }
        return atoi(argv[2]);
    }
    if (argc >= 3 && strcmp(argv[1], "raise") == 0) {
        signal(atoi(argv[2]), SIG_DFL);
        raise(atoi(argv[2]));
        return 1;
    }
    fprintf(stderr, "usage: snapshot_fixture script | churn SECONDS | damage HOW | "
                    "env STATUS VAR... | raise SIGNAL\n");
    return 2;
}
