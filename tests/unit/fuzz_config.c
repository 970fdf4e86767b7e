/* fuzz_config.c: the fuzz target for the shim's configuration parsers
 * (shim/config.c). The first byte picks a variable of `VS_CONFIG_VARS`
 * ('0' is the first, '1' the second, ...); the rest, NUL-terminated, is its
 * value, handed to `vs_config_parse_size`, `vs_config_parse_limit` and,
 * through a fake getenv, to `vs_config_parse`. Besides never crashing:
 * - a plain decimal integer parses as a size exactly as `strtoull` reads it,
 *   or fails with -ERANGE exactly when `strtoull` overflows;
 * - a limit that parses names only devices below `VS_MAX_DEVICES`, each one
 *   listed, and percentages in (0, 100], as `strtod` reads them;
 * - an I/O fault list (`vs_spill_io_parse_faults`) that parses has 1 to
 *   VS_SPILL_IO_FAULTS_MAX entries, one per comma-separated part, each a
 *   fault its operation can have, with `every` at least 1;
 * - `vs_config_parse` either succeeds with a consistent configuration or
 *   writes one line (no newline in it) that names the variable.
 *
 * Entry point: `LLVMFuzzerTestOneInput`, run by libFuzzer (clang builds)
 * or by fuzz_driver.c (every build).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz_target.h"
#include "spill_io.h"

#define VS_FUZZ_VAR_NAME(field, name, forms) name,
static const char *const vs_fuzz_var_names[] = {VS_CONFIG_VARS(VS_FUZZ_VAR_NAME)};
#undef VS_FUZZ_VAR_NAME
#define VS_FUZZ_VAR_COUNT (sizeof vs_fuzz_var_names / sizeof vs_fuzz_var_names[0])

static bool vs_fuzz_all_digits(const char *text)
{
    if (!*text)
        return false;
    for (; *text; text++)
        if (*text < '0' || *text > '9')
            return false;
    return true;
}

static void vs_fuzz_check_size(const char *value)
{
    uint64_t bytes = 0;
    int rc = vs_config_parse_size(value, &bytes);
    VS_FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE);
    if (vs_fuzz_all_digits(value)) {
        errno = 0;
        unsigned long long expected = strtoull(value, NULL, 10);
        bool overflows = errno == ERANGE;
        VS_FUZZ_CHECK(overflows ? rc == -ERANGE : rc == 0 && bytes == expected);
    }
}

static void vs_fuzz_check_limit(const char *value)
{
    vs_limit_t limits[VS_MAX_DEVICES];
    int rc = vs_config_parse_limit(value, limits);
    VS_FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE);
    if (rc != 0)
        return;
    size_t limited = 0;
    for (int d = 0; d < VS_MAX_DEVICES; d++) {
        const vs_limit_t *limit = &limits[d];
        VS_FUZZ_CHECK(limit->kind == VS_LIMIT_NONE || limit->kind == VS_LIMIT_BYTES ||
                      limit->kind == VS_LIMIT_PERCENT);
        if (limit->kind == VS_LIMIT_PERCENT) {
            VS_FUZZ_CHECK(limit->ppm > 0 && limit->ppm <= 1000000);
            VS_FUZZ_CHECK(vs_config_limit_bytes(limit, UINT64_C(80) << 30) <= UINT64_C(80) << 30);
        }
        if (limit->kind != VS_LIMIT_NONE)
            limited++;
    }
    if (strchr(value, ':') == NULL) {
        /* One value for every device; a percentage as `strtod` reads it, to
         * the part per million. */
        VS_FUZZ_CHECK(limited == VS_MAX_DEVICES);
        if (limits[0].kind == VS_LIMIT_PERCENT) {
            /* The parser truncates to the part per million: ppm is the
             * floor of the exact value, within (expected - 1, expected].
             * `strtod` and the product each round (by up to an ulp of about
             * 1e-10 here), so the bounds get a margin far above that and far
             * below one ppm: "0.0050999...9%" is 50 ppm, and strtod * 1e4
             * gives 51.00000000000001. */
            double expected_ppm = strtod(value, NULL) * 10000.0;
            const double margin = 1e-6;
            VS_FUZZ_CHECK((double)limits[0].ppm <= expected_ppm + margin);
            VS_FUZZ_CHECK((double)limits[0].ppm + 1.0 + margin >= expected_ppm);
        }
        return;
    }
    /* A list: every entry's device index is below VS_MAX_DEVICES and that
     * device is limited; no other device is. */
    size_t entries = 0;
    for (const char *entry = value; entry; entry = strchr(entry, ',') ? strchr(entry, ',') + 1 : NULL) {
        char *after = NULL;
        errno = 0;
        unsigned long device = strtoul(entry, &after, 10);
        VS_FUZZ_CHECK(errno == 0 && after > entry && *after == ':');
        VS_FUZZ_CHECK(device < VS_MAX_DEVICES);
        VS_FUZZ_CHECK(limits[device].kind != VS_LIMIT_NONE);
        entries++;
    }
    VS_FUZZ_CHECK(entries == limited);
}

static void vs_fuzz_check_faults(const char *value)
{
    vs_spill_io_faults_t faults;
    memset(&faults, 0xa5, sizeof faults);
    int rc = vs_spill_io_parse_faults(value, &faults);
    VS_FUZZ_CHECK(rc == 0 || rc == -EINVAL || rc == -ERANGE);
    if (rc != 0)
        return;
    size_t commas = 0;
    for (const char *p = value; *p; p++)
        commas += *p == ',';
    VS_FUZZ_CHECK(faults.count >= 1 && faults.count <= VS_SPILL_IO_FAULTS_MAX);
    VS_FUZZ_CHECK(faults.count == commas + 1);
    for (uint32_t i = 0; i < faults.count; i++) {
        const vs_spill_io_fault_t *f = &faults.fault[i];
        VS_FUZZ_CHECK(f->op == VS_SPILL_IO_RESERVE || f->op == VS_SPILL_IO_WRITE || f->op == VS_SPILL_IO_READ);
        VS_FUZZ_CHECK(f->every >= 1);
        VS_FUZZ_CHECK(f->kind != VS_SPILL_IO_FAULT_ENOSPC || f->op != VS_SPILL_IO_READ);
        VS_FUZZ_CHECK(f->kind != VS_SPILL_IO_FAULT_SHORT || f->op != VS_SPILL_IO_RESERVE);
        VS_FUZZ_CHECK(f->kind != VS_SPILL_IO_FAULT_CORRUPT || f->op == VS_SPILL_IO_READ);
        VS_FUZZ_CHECK(f->kind != VS_SPILL_IO_FAULT_SLOW || f->op != VS_SPILL_IO_RESERVE);
        VS_FUZZ_CHECK(f->ms <= 60000);
        VS_FUZZ_CHECK(f->kind == VS_SPILL_IO_FAULT_ENOSPC || f->kind == VS_SPILL_IO_FAULT_EIO
                      || f->kind == VS_SPILL_IO_FAULT_SHORT || f->kind == VS_SPILL_IO_FAULT_CORRUPT
                      || f->kind == VS_SPILL_IO_FAULT_SLOW);
    }
}

typedef struct vs_fuzz_env_s {
    const char *name;
    const char *value;
} vs_fuzz_env_t;

static const char *vs_fuzz_getenv(const char *name, void *ctx)
{
    const vs_fuzz_env_t *env = ctx;
    return strcmp(name, env->name) == 0 ? env->value : NULL;
}

static void vs_fuzz_check_parse(const char *name, const char *value)
{
    vs_fuzz_env_t env = {name, value};
    vs_config_t *cfg = malloc(sizeof *cfg);
    char msg[512];
    VS_FUZZ_CHECK(cfg != NULL);
    msg[0] = '\0';
    int rc = vs_config_parse(cfg, vs_fuzz_getenv, &env, msg, sizeof msg);
    if (rc == 0) {
        bool is_limit = strcmp(name, "VRAM_LIMIT") == 0;
        VS_FUZZ_CHECK(cfg->limit_set == is_limit);
        VS_FUZZ_CHECK(cfg->mode == (is_limit ? VS_MODE_OFFLOAD : VS_MODE_TRACK));
        VS_FUZZ_CHECK(cfg->min_evict >= VS_MIN_EVICT_FLOOR);
        VS_FUZZ_CHECK(strcmp(name, "VRAMSHIM_HOST_LIMIT") != 0 || cfg->host_limit >= VS_MIN_EVICT_FLOOR
                      || (cfg->host_limit_ppm > 0 && cfg->host_limit_ppm <= 1000000));
        VS_FUZZ_CHECK(strcmp(name, "VRAMSHIM_SNAPSHOT_ROWS") != 0
                      || (cfg->snapshot_rows >= 1 && cfg->snapshot_rows <= 4194304));
        VS_FUZZ_CHECK(strnlen(cfg->log_file, VS_CONFIG_PATH_MAX) < VS_CONFIG_PATH_MAX);
        VS_FUZZ_CHECK(strnlen(cfg->driver, VS_CONFIG_PATH_MAX) < VS_CONFIG_PATH_MAX);
        VS_FUZZ_CHECK(strnlen(cfg->debug_snapshot, VS_CONFIG_PATH_MAX) < VS_CONFIG_PATH_MAX);
        VS_FUZZ_CHECK(strnlen(cfg->spill_dir, VS_CONFIG_PATH_MAX) < VS_CONFIG_PATH_MAX);
        VS_FUZZ_CHECK(strcmp(name, "VRAMSHIM_IO_FAULT") == 0 ? cfg->io_faults.count >= 1 : cfg->io_faults.count == 0);
    } else {
        /* The message the shim prints before exit(2): one line, naming the
         * variable. */
        VS_FUZZ_CHECK(rc == -EINVAL);
        VS_FUZZ_CHECK(msg[0] != '\0');
        VS_FUZZ_CHECK(strchr(msg, '\n') == NULL);
        VS_FUZZ_CHECK(strstr(msg, name) != NULL);
    }
    free(cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    const char *name = vs_fuzz_var_names[(uint8_t)(data[0] - '0') % VS_FUZZ_VAR_COUNT];
    /* An exactly sized NUL-terminated copy of the value: a read past its
     * NUL is caught by ASan. */
    char *value = malloc(size);
    if (!value)
        return 0;
    memcpy(value, data + 1, size - 1);
    value[size - 1] = '\0';
    vs_fuzz_check_size(value);
    vs_fuzz_check_limit(value);
    vs_fuzz_check_faults(value);
    vs_fuzz_check_parse(name, value);
    free(value);
    return 0;
}

/* Seeds: the first character is the variable's index in VS_CONFIG_VARS
 * (0 VRAM_LIMIT, 1 MODE, 2 HOST_LIMIT, 3 MIN_EVICT, 4 POLICY, 5 LOG,
 * 6 LOG_FILE, 7 DRIVER, 8 DEBUG_SNAPSHOT, 9 TRACE, ':' SPILL_DIR, ';' IO_FAULT). */
static const char *const vs_fuzz_config_seeds[] = {
    "010G", "01.5GiB", "075%", "012.5%", "00:10G,1:20G", "00", "01073741824", "0100MB", "02T",
    "063:1G", "00:50%,3:2G", "018446744073709551615", "018446744073709551616", "016EiB", "016384P",
    "01.5", "010X", "0150%", "00:10G,0:5G", "064:1G", "0:1G", "00:", "0,", "01e3", "0-1G", "0 1G",
    "00.0000000000000000001G", "099.9999999%", "00%", "0100%", "0100.0001%",
    "1offload", "1cap", "1CAP", "1",
    "28G", "20", "21.5TiB", "218446744073709551615B",
    "32M", "31M", "32097152", "32MiB", "32.0000001M",
    "4lru", "4cyclic", "4learned", "4LRU",
    "5error", "5warn", "5info", "5debug", "5trace",
    "6/tmp/vramshim.log", "6", "7/usr/lib/x86_64-linux-gnu/libcuda.so.1", "8/tmp/snapshot",
    ":/var/tmp/spill", ":", ";reserve:ENOSPC", ";write:EIO:after=3", ";read:corrupt:every=2:times=1",
    ";write:short,read:short", ";read:ENOSPC", ";write:EIO:every=0", ";write:EIO:after=18446744073709551616",
    ";write:EIO,", ";read:EIO:after=1:after=2",
};

static const char *const vs_fuzz_config_tokens[] = {
    "K", "M", "G", "T", "KiB", "MiB", "GiB", "TiB", "KB", "MB", "GB", "TB", "B", "k", "gib", "%",
    ":", ",", ".", "0", "1", "63", "64", "100", "1.5", "0.", ".5", "18446744073709551615",
    "18446744073709551616", "99999999999999999999", "0:", ",1:", "\n", "\r", "\t", " ", "\"",
    "%s", "\x1b[31m", "reserve", "write", "read", "ENOSPC", "EIO", "short", "corrupt", ":after=", ":every=",
    ":times=", "=",
};

const vs_fuzz_corpus_t vs_fuzz_corpus = {
    .name = "config",
    .seeds = vs_fuzz_config_seeds,
    .seed_count = sizeof vs_fuzz_config_seeds / sizeof vs_fuzz_config_seeds[0],
    .tokens = vs_fuzz_config_tokens,
    .token_count = sizeof vs_fuzz_config_tokens / sizeof vs_fuzz_config_tokens[0],
};
