/* vramshim.c: the `vramshim` command: `run` and `dump` (here), `ps`
 * (ps.c), `top` (top.c), `plot` (plot.c) and `metrics` (metrics.c).
 *
 * Main entry point: `main`, which dispatches on the subcommand. Exit
 * statuses are listed in tool.h. The command never links the shim: it
 * reads the snapshots the shim publishes (snapshot_reader.c) and, for
 * `run`, finds libvramshim.so and execs the program with it preloaded.
 */
#include "tool.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "dump.h"
#include "snapshot_reader.h"

static const char vs_usage_main[] =
    "usage: vramshim COMMAND [OPTIONS]\n"
    "\n"
    "Run GPU programs under the vramshim preload library and inspect where their\n"
    "memory lives while they run.\n"
    "\n"
    "commands:\n"
    "  run [OPTIONS] -- PROGRAM ARGS...   run PROGRAM with the shim preloaded\n"
    "  ps [OPTIONS]                       list your processes running under the shim\n"
    "  dump PID [OPTIONS]                 one row per allocation of PID, and totals\n"
    "  top PID [OPTIONS]                  a refreshing view of PID (q quits)\n"
    "  plot TRACE -o FILE [OPTIONS]       draw a trace recorded by 'run --trace'\n"
    "  metrics [OPTIONS]                  Prometheus metrics of your processes\n"
    "\n"
    "'vramshim COMMAND --help' describes each command; 'vramshim --version' prints\n"
    "the version.\n"
    "exit status: 0 success, 1 error (no such process, not under the shim, another\n"
    "user's process, unreadable snapshot), 2 usage error; run: the program's status.\n";

static const char vs_usage_run[] =
    "usage: vramshim run [OPTIONS] [--] PROGRAM [ARGS...]\n"
    "\n"
    "Runs PROGRAM with libvramshim.so prepended to LD_PRELOAD and the shim's\n"
    "variables set; exits with PROGRAM's status (126: cannot execute, 127: not found).\n"
    "\n"
    "  --limit SIZE       VRAM_LIMIT: bytes, K/M/G/T or KiB..TiB (x1024), KB..TB (x1000),\n"
    "                     decimals (1.5G), a percentage (75%), per device (0:10G,1:20G)\n"
    "  --host-limit SIZE  VRAMSHIM_HOST_LIMIT: pinned host memory for evicted allocations,\n"
    "                     a size (at least 2M) or a percentage of the memory the program\n"
    "                     may use (50%: physical memory, or its cgroup's limit)\n"
    "  --spill-dir DIR    VRAMSHIM_SPILL_DIR: where allocations spill to disk\n"
    "  --mode MODE        VRAMSHIM_MODE: offload (evict to host/disk) or cap (refuse)\n"
    "  --log LEVEL        VRAMSHIM_LOG: error, warn, info or debug\n"
    "  --trace FILE       VRAMSHIM_TRACE: record allocations, uses, evictions and\n"
    "                     restores in FILE, for 'vramshim plot'\n"
    "  --shim PATH        the library to preload (default: $VRAMSHIM_LIBRARY, else the\n"
    "                     installed " VS_TOOL_LIBDIR "/libvramshim.so, or one\n"
    "                     found beside vramshim: ../shim, ../lib, ../lib64)\n"
    "  -h, --help         this help\n";

static const char vs_usage_dump[] =
    "usage: vramshim dump PID [--json] [--sort KEY] [--state PLACE] [--bytes]\n"
    "\n"
    "One row per allocation of process PID: id, address, size, device, kind, where\n"
    "it lives now (device, host or disk; 'kept: REASON' when it must stay resident),\n"
    "age, last use, uses, evictions, restores; then a totals line.\n"
    "\n"
    "  --json          machine-readable output (schema: tools/dump.schema.json);\n"
    "                  sizes are integers in bytes\n"
    "  --sort KEY      id (default), size (largest first), last-use (most recent\n"
    "                  first), age (oldest first), state (device, host, disk)\n"
    "  --state PLACE   only allocations in device, host or disk\n"
    "  --bytes         sizes as exact byte counts\n"
    "  -h, --help      this help\n";

void vs_tool_error(const char *fmt, ...)
{
    va_list ap;
    fputs("vramshim: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

pid_t vs_tool_parse_pid(const char *text)
{
    char *end;
    errno = 0;
    long value = strtol(text, &end, 10);
    if (errno || end == text || *end || value <= 0 || value > INT_MAX) {
        vs_tool_error("'%s' is not a process id", text);
        return -1;
    }
    return (pid_t)value;
}

/* One size: digits, an optional fraction, an optional unit or '%'. 0 and
 * the bytes in *bytes (*percent for '%'), or -EINVAL. */
static int vs_tool_one_size_parse(const char *p, const char *end, uint64_t *bytes, bool *percent)
{
    static const struct {
        const char *name;
        double scale;
    } units[] = {
        {"", 1},          {"B", 1},         {"K", 0x1p10},     {"M", 0x1p20},   {"G", 0x1p30},
        {"T", 0x1p40},    {"KiB", 0x1p10},  {"MiB", 0x1p20},   {"GiB", 0x1p30}, {"TiB", 0x1p40},
        {"KB", 1e3},      {"MB", 1e6},      {"GB", 1e9},       {"TB", 1e12},    {"%", 1},
    };
    const char *digits = p;
    double value = 0, fraction_scale = 1;
    while (p < end && *p >= '0' && *p <= '9')
        value = value * 10 + (*p++ - '0');
    if (p == digits)
        return -EINVAL;
    if (p < end && *p == '.') {
        const char *fraction = ++p;
        while (p < end && *p >= '0' && *p <= '9')
            value += (*p++ - '0') * (fraction_scale /= 10);
        if (p == fraction)
            return -EINVAL;
    }
    size_t len = (size_t)(end - p);
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strlen(units[i].name) == len && strncasecmp(p, units[i].name, len) == 0) {
            double scaled = value * units[i].scale;
            if (scaled >= 0x1p64)
                return -EINVAL;
            *bytes = (uint64_t)scaled;
            *percent = units[i].name[0] == '%';
            return 0;
        }
    }
    return -EINVAL;
}

int vs_tool_parse_size(const char *text, uint64_t *bytes)
{
    bool percent;
    if (vs_tool_one_size_parse(text, text + strlen(text), bytes, &percent) < 0 || percent)
        return -EINVAL;
    return 0;
}

bool vs_tool_size_valid(const char *text, bool per_device)
{
    if (!*text)
        return false;
    const char *p = text;
    for (;;) {
        const char *end = per_device ? strchr(p, ',') : NULL;
        if (!end)
            end = p + strlen(p);
        const char *colon = memchr(p, ':', (size_t)(end - p));
        if (colon) {
            if (!per_device || colon == p)
                return false;
            for (const char *q = p; q < colon; q++)
                if (*q < '0' || *q > '9')
                    return false;
            p = colon + 1;
        }
        uint64_t bytes;
        bool percent;
        if (vs_tool_one_size_parse(p, end, &bytes, &percent) < 0)
            return false;
        if (!*end)
            return true;
        p = end + 1;
    }
}

/* Returns `path` if it names a regular file, else NULL. */
static bool vs_tool_is_file(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The library to preload: --shim, $VRAMSHIM_LIBRARY, or beside the
 * command (build tree: tools/vramshim -> shim/libvramshim.so; installed:
 * bin/vramshim -> lib/libvramshim.so). Absolute, so that a program that
 * changes directory still finds it. */
static int vs_tool_find_shim(const char *option, char *out, size_t len)
{
    const char *given = option ? option : getenv("VRAMSHIM_LIBRARY");
    if (given && *given) {
        if (!vs_tool_is_file(given) || !realpath(given, out)) {
            vs_tool_error("cannot use the shim library %s (given by %s): no such file", given,
                          option ? "--shim" : "VRAMSHIM_LIBRARY");
            return -ENOENT;
        }
        return 0;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0) {
        vs_tool_error("cannot find my own location (/proc/self/exe): %s; pass --shim PATH",
                      strerror(errno));
        return -errno;
    }
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    *slash = '\0';
    /* The build tree; the installed tree, wherever it was copied (DESTDIR,
     * a relocated prefix); the directory the build recorded; common layouts. */
    static const char *const candidates[] = {
        "../shim/libvramshim.so", VS_TOOL_LIBDIR_FROM_BINDIR "/libvramshim.so",
        VS_TOOL_LIBDIR "/libvramshim.so", "../lib/libvramshim.so", "../lib64/libvramshim.so",
        "libvramshim.so"};
    char tried[6 * PATH_MAX] = "";
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        char path[2 * PATH_MAX + 64];
        if (candidates[i][0] == '/')
            snprintf(path, sizeof(path), "%s", candidates[i]);
        else
            snprintf(path, sizeof(path), "%s/%s", self, candidates[i]);
        if (vs_tool_is_file(path) && realpath(path, out))
            return 0;
        size_t used = strlen(tried);
        snprintf(tried + used, sizeof(tried) - used, "%s%s", used ? ", " : "", path);
    }
    (void)len;
    vs_tool_error("cannot find libvramshim.so (looked in %s); pass --shim PATH or set "
                  "VRAMSHIM_LIBRARY",
                  tried);
    return -ENOENT;
}

/* `--trace FILE` as an absolute path (the program may change directory),
 * in a directory that exists. 0, or -EINVAL after one error line. */
static int vs_tool_trace_path(const char *given, char *out, size_t len)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(given, '/');
    const char *base = slash ? slash + 1 : given;
    if (!*given || !*base || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        vs_tool_error("--trace '%s': expected a file name", given);
        return -EINVAL;
    }
    size_t dir_len = slash ? (size_t)(slash - given) : 1;
    snprintf(dir, sizeof(dir), "%.*s", (int)dir_len, slash ? (slash == given ? "/" : given) : ".");
    char resolved[PATH_MAX];
    struct stat st;
    if (!realpath(dir, resolved) || stat(resolved, &st) < 0 || !S_ISDIR(st.st_mode)) {
        vs_tool_error("--trace %s: no such directory %s", given, dir);
        return -EINVAL;
    }
    if (snprintf(out, len, "%s/%s", strcmp(resolved, "/") == 0 ? "" : resolved, base) >= (int)len) {
        vs_tool_error("--trace %s: the path is too long", given);
        return -EINVAL;
    }
    return 0;
}

int vs_tool_run(int argc, char **argv)
{
    enum { OPT_LIMIT = 256, OPT_HOST_LIMIT, OPT_SPILL_DIR, OPT_MODE, OPT_LOG, OPT_SHIM, OPT_TRACE };
    static const struct option options[] = {
        {"limit", required_argument, NULL, OPT_LIMIT},
        {"host-limit", required_argument, NULL, OPT_HOST_LIMIT},
        {"spill-dir", required_argument, NULL, OPT_SPILL_DIR},
        {"mode", required_argument, NULL, OPT_MODE},
        {"log", required_argument, NULL, OPT_LOG},
        {"shim", required_argument, NULL, OPT_SHIM},
        {"trace", required_argument, NULL, OPT_TRACE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *limit = NULL, *host_limit = NULL, *spill_dir = NULL, *mode = NULL, *log = NULL,
               *shim = NULL;
    char trace[PATH_MAX] = "";
    int c;

    /* '+': stop at the program's name, its options are its own. */
    while ((c = getopt_long(argc, argv, "+h", options, NULL)) != -1) {
        switch (c) {
        case OPT_LIMIT:
            if (!vs_tool_size_valid(optarg, true)) {
                vs_tool_error("--limit %s: expected a size (1073741824, 10G, 10GiB, 10GB, 1.5G), "
                              "a percentage (75%%) or a per-device list (0:10G,1:20G)",
                              optarg);
                return VS_TOOL_EXIT_USAGE;
            }
            limit = optarg;
            break;
        case OPT_HOST_LIMIT:
            if (!vs_tool_size_valid(optarg, false)) {
                vs_tool_error("--host-limit %s: expected a size (1073741824, 10G, 10GiB, 10GB, "
                              "1.5G) or a percentage (50%%)",
                              optarg);
                return VS_TOOL_EXIT_USAGE;
            }
            host_limit = optarg;
            break;
        case OPT_SPILL_DIR:
            if (!*optarg) {
                vs_tool_error("--spill-dir: expected a directory");
                return VS_TOOL_EXIT_USAGE;
            }
            spill_dir = optarg;
            break;
        case OPT_MODE:
            if (strcmp(optarg, "offload") != 0 && strcmp(optarg, "cap") != 0) {
                vs_tool_error("--mode %s: expected offload or cap", optarg);
                return VS_TOOL_EXIT_USAGE;
            }
            mode = optarg;
            break;
        case OPT_LOG:
            if (strcmp(optarg, "error") != 0 && strcmp(optarg, "warn") != 0 &&
                strcmp(optarg, "info") != 0 && strcmp(optarg, "debug") != 0) {
                vs_tool_error("--log %s: expected error, warn, info or debug", optarg);
                return VS_TOOL_EXIT_USAGE;
            }
            log = optarg;
            break;
        case OPT_SHIM:
            shim = optarg;
            break;
        case OPT_TRACE:
            if (vs_tool_trace_path(optarg, trace, sizeof(trace)) < 0)
                return VS_TOOL_EXIT_USAGE;
            break;
        case 'h':
            fputs(vs_usage_run, stdout);
            return VS_TOOL_EXIT_OK;
        default:
            fputs(vs_usage_run, stderr);
            return VS_TOOL_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        vs_tool_error("run: no program given");
        fputs(vs_usage_run, stderr);
        return VS_TOOL_EXIT_USAGE;
    }

    char library[PATH_MAX];
    if (vs_tool_find_shim(shim, library, sizeof(library)) < 0)
        return VS_TOOL_EXIT_ERROR;
    /* ld.so splits LD_PRELOAD on spaces and colons: such a path would be
     * read as several. */
    if (strpbrk(library, " :")) {
        vs_tool_error("the shim's path %s holds a space or a colon, which LD_PRELOAD cannot "
                      "carry; move it or pass --shim",
                      library);
        return VS_TOOL_EXIT_ERROR;
    }
    const char *old = getenv("LD_PRELOAD");
    size_t preload_len = strlen(library) + (old ? strlen(old) : 0) + 2;
    char *preload = malloc(preload_len);
    if (!preload) {
        vs_tool_error("out of memory");
        return VS_TOOL_EXIT_ERROR;
    }
    snprintf(preload, preload_len, "%s%s%s", library, old && *old ? ":" : "",
             old && *old ? old : "");
    if (setenv("LD_PRELOAD", preload, 1) < 0 || (limit && setenv("VRAM_LIMIT", limit, 1) < 0) ||
        (host_limit && setenv("VRAMSHIM_HOST_LIMIT", host_limit, 1) < 0) ||
        (spill_dir && setenv("VRAMSHIM_SPILL_DIR", spill_dir, 1) < 0) ||
        (mode && setenv("VRAMSHIM_MODE", mode, 1) < 0) ||
        (log && setenv("VRAMSHIM_LOG", log, 1) < 0) ||
        (trace[0] && setenv("VRAMSHIM_TRACE", trace, 1) < 0)) {
        vs_tool_error("cannot set the environment: %s", strerror(errno));
        free(preload);
        return VS_TOOL_EXIT_ERROR;
    }
    free(preload);
    fflush(NULL);
    /* exec: the program keeps this pid, its signals and its exit status are
     * its own, and the shim's snapshot is named after the pid users see. */
    execvp(argv[optind], &argv[optind]);
    int err = errno;
    vs_tool_error("cannot run %s: %s", argv[optind], strerror(err));
    return err == ENOENT ? 127 : 126;
}

int vs_tool_dump(int argc, char **argv)
{
    static const struct option options[] = {
        {"json", no_argument, NULL, 'j'},   {"sort", required_argument, NULL, 's'},
        {"state", required_argument, NULL, 'p'}, {"bytes", no_argument, NULL, 'b'},
        {"help", no_argument, NULL, 'h'},   {NULL, 0, NULL, 0},
    };
    vs_dump_options_t opts = {.sort = VS_DUMP_SORT_ID, .place = -1};
    int c;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case 'j':
            opts.json = true;
            break;
        case 's': {
            int sort = vs_dump_sort_parse(optarg);
            if (sort < 0) {
                vs_tool_error("--sort %s: expected id, size, last-use, age or state", optarg);
                return VS_TOOL_EXIT_USAGE;
            }
            opts.sort = (vs_dump_sort_t)sort;
            break;
        }
        case 'p':
            opts.place = vs_dump_place_parse(optarg);
            if (opts.place < 0) {
                vs_tool_error("--state %s: expected device, host or disk", optarg);
                return VS_TOOL_EXIT_USAGE;
            }
            break;
        case 'b':
            opts.bytes = true;
            break;
        case 'h':
            fputs(vs_usage_dump, stdout);
            return VS_TOOL_EXIT_OK;
        default:
            fputs(vs_usage_dump, stderr);
            return VS_TOOL_EXIT_USAGE;
        }
    }
    if (optind + 1 != argc) {
        vs_tool_error(optind >= argc ? "dump: no PID given" : "dump: expected one PID");
        fputs(vs_usage_dump, stderr);
        return VS_TOOL_EXIT_USAGE;
    }
    pid_t pid = vs_tool_parse_pid(argv[optind]);
    if (pid < 0)
        return VS_TOOL_EXIT_USAGE;

    vs_snapshot_copy_t copy;
    char msg[512];
    if (vs_snapshot_read_pid(pid, &copy, msg, sizeof(msg)) < 0) {
        vs_tool_error("%s", msg);
        return VS_TOOL_EXIT_ERROR;
    }
    opts.now_ns = vs_dump_now_ns();
    int rc = vs_dump_write(stdout, &copy.view, &opts);
    vs_snapshot_copy_free(&copy);
    if (rc < 0 || fflush(stdout) != 0) {
        vs_tool_error("cannot write the dump: %s", strerror(rc < 0 ? -rc : errno));
        return VS_TOOL_EXIT_ERROR;
    }
    return VS_TOOL_EXIT_OK;
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name;
        int (*fn)(int argc, char **argv);
    } commands[] = {
        {"run", vs_tool_run},
        {"ps", vs_tool_ps},
        {"dump", vs_tool_dump},
        {"top", vs_tool_top},
        {"plot", vs_tool_plot},
        {"metrics", vs_tool_metrics},
    };
    if (argc < 2) {
        fputs(vs_usage_main, stderr);
        return VS_TOOL_EXIT_USAGE;
    }
    if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 ||
        strcmp(argv[1], "help") == 0) {
        fputs(vs_usage_main, stdout);
        return VS_TOOL_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        printf("vramshim " VS_TOOL_VERSION "\n");
        return VS_TOOL_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        if (strcmp(argv[1], commands[i].name) == 0) {
            /* getopt sees "vramshim-COMMAND ARGS..." */
            optind = 1;
            return commands[i].fn(argc - 1, argv + 1);
        }
    }
    vs_tool_error("unknown command '%s'", argv[1]);
    fputs(vs_usage_main, stderr);
    return VS_TOOL_EXIT_USAGE;
}
