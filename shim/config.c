/* config.c: parsing of the shim's environment variables (`vs_config_get`).
 *
 * Every value is checked before the program does any GPU work: a limit that
 * is silently misread is worse than no limit ("vram_limit not taking effect"
 * is the commonest complaint about peer tools). So a malformed value stops
 * the program at load with exit status 2 and one line that names the
 * variable, the value and the forms accepted. The size parser is shared with
 * later variables (`VRAMSHIM_HOST_LIMIT`).
 */
#include "config.h"

#include "policy.h"
#include "snapshot_abi.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

/* Sizes are computed in 128 bits so that overflow is detected, not wrapped. */
__extension__ typedef unsigned __int128 vs_u128;

/* Unit suffixes, matched case-insensitively; the longest match wins because
 * the table lists "KiB" and "KB" before "K". */
static const struct {
    const char *suffix;
    uint64_t multiplier;
} vs_size_units[] = {
    {"KiB", 1ull << 10}, {"MiB", 1ull << 20}, {"GiB", 1ull << 30}, {"TiB", 1ull << 40},
    {"KB", 1000ull},     {"MB", 1000000ull},  {"GB", 1000000000ull}, {"TB", 1000000000000ull},
    {"K", 1ull << 10},   {"M", 1ull << 20},   {"G", 1ull << 30},   {"T", 1ull << 40},
    {"B", 1ull},
};

static bool vs_is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Reads `digits[.digits]` at *p. The integer part goes to *whole, the
 * fraction to *frac_num / *frac_den (den is a power of ten; digits past the
 * 18th are checked but do not change the value). *nonzero tells whether any
 * digit, of either part, is not 0, *frac_nonzero the same of the fraction
 * (the digits past the 18th included): a value written as more than zero
 * must not be read as zero, nor 100.0000001% as 100%. Advances *p. */
static int vs_parse_decimal(const char **p, uint64_t *whole, uint64_t *frac_num, uint64_t *frac_den, bool *has_fraction,
                            bool *nonzero, bool *frac_nonzero)
{
    const char *s = *p;
    vs_u128 w = 0;

    if (!vs_is_digit(*s))
        return -EINVAL;
    for (; vs_is_digit(*s); s++) {
        w = w * 10 + (unsigned)(*s - '0');
        if (w > UINT64_MAX)
            return -ERANGE;
    }
    *whole = (uint64_t)w;
    *frac_num = 0;
    *frac_den = 1;
    *has_fraction = false;
    *frac_nonzero = false;
    if (*s == '.') {
        s++;
        if (!vs_is_digit(*s))
            return -EINVAL;
        *has_fraction = true;
        for (int n = 0; vs_is_digit(*s); s++, n++) {
            if (*s != '0')
                *frac_nonzero = true;
            if (n < 18) {
                *frac_num = *frac_num * 10 + (uint64_t)(*s - '0');
                *frac_den *= 10;
            }
        }
    }
    *nonzero = w != 0 || *frac_nonzero;
    *p = s;
    return 0;
}

int vs_config_parse_size(const char *text, uint64_t *bytes)
{
    const char *p = text;
    uint64_t whole, frac_num, frac_den, multiplier = 1;
    bool has_fraction, nonzero, frac_nonzero;
    int rc;

    if (text == NULL)
        return -EINVAL;
    rc = vs_parse_decimal(&p, &whole, &frac_num, &frac_den, &has_fraction, &nonzero, &frac_nonzero);
    if (rc != 0)
        return rc;
    if (*p != '\0') {
        size_t i;
        for (i = 0; i < sizeof vs_size_units / sizeof vs_size_units[0]; i++) {
            if (strcasecmp(p, vs_size_units[i].suffix) == 0)
                break;
        }
        if (i == sizeof vs_size_units / sizeof vs_size_units[0])
            return -EINVAL;
        multiplier = vs_size_units[i].multiplier;
    }
    /* A fraction of a byte means the unit was forgotten ("1.5" for "1.5G"). */
    if (has_fraction && multiplier == 1)
        return -EINVAL;
    vs_u128 total = (vs_u128)whole * multiplier
                              + (vs_u128)frac_num * multiplier / frac_den;
    if (total > UINT64_MAX)
        return -ERANGE;
    /* "0.000000000000000000001T" is not a limit of 0: a value written as
     * more than zero that comes to no byte at all is refused. */
    if (nonzero && total == 0)
        return -ERANGE;
    *bytes = (uint64_t)total;
    return 0;
}

/* "75%" or "12.5%": (0, 100] in parts per million. */
static int vs_parse_percent(const char *text, size_t len, uint32_t *ppm)
{
    char buf[64];
    const char *p = buf;
    uint64_t whole, frac_num, frac_den;
    bool has_fraction, nonzero, frac_nonzero;
    int rc;

    if (len == 0 || len >= sizeof buf || text[len - 1] != '%')
        return -EINVAL;
    memcpy(buf, text, len - 1);
    buf[len - 1] = '\0';
    rc = vs_parse_decimal(&p, &whole, &frac_num, &frac_den, &has_fraction, &nonzero, &frac_nonzero);
    if (rc != 0 || *p != '\0')
        return -EINVAL;
    /* Above 100 by any amount, however far down the fraction. */
    if (whole > 100 || (whole == 100 && frac_nonzero))
        return -ERANGE;
    /* 128 bits: a long fraction (12.500000000000000000%) must not wrap. */
    uint64_t value = whole * 1000000 + (uint64_t)((vs_u128)frac_num * 1000000 / frac_den);
    /* Resolution: a part per million (0.0001%); anything that rounds to no
     * memory at all is refused rather than read as a limit of 0. */
    if (value / 100 == 0 || value > 100000000)
        return -ERANGE;
    *ppm = (uint32_t)(value / 100);
    return 0;
}

/* One limit: a size or a percentage. `text` is not NUL-terminated. */
static int vs_parse_one_limit(const char *text, size_t len, vs_limit_t *out)
{
    char buf[64];
    int rc;

    if (len == 0 || len >= sizeof buf)
        return -EINVAL;
    if (text[len - 1] == '%') {
        out->kind = VS_LIMIT_PERCENT;
        return vs_parse_percent(text, len, &out->ppm);
    }
    memcpy(buf, text, len);
    buf[len] = '\0';
    out->kind = VS_LIMIT_BYTES;
    rc = vs_config_parse_size(buf, &out->bytes);
    return rc;
}

int vs_config_parse_limit(const char *text, vs_limit_t limits[VS_MAX_DEVICES])
{
    vs_limit_t parsed[VS_MAX_DEVICES];
    int rc;

    memset(parsed, 0, sizeof parsed);
    if (text == NULL || text[0] == '\0')
        return -EINVAL;
    if (strchr(text, ':') == NULL) {
        /* One value for every device. */
        vs_limit_t one = {0};
        rc = vs_parse_one_limit(text, strlen(text), &one);
        if (rc != 0)
            return rc;
        for (int d = 0; d < VS_MAX_DEVICES; d++)
            parsed[d] = one;
        memcpy(limits, parsed, sizeof parsed);
        return 0;
    }
    /* "0:10G,1:20G": each device at most once; devices not listed are not
     * limited. */
    const char *p = text;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        unsigned long device = 0;
        const char *d;

        if (colon == NULL || colon == p)
            return -EINVAL;
        for (d = p; d < colon; d++) {
            if (!vs_is_digit(*d))
                return -EINVAL;
            device = device * 10 + (unsigned long)(*d - '0');
            if (device >= VS_MAX_DEVICES)
                return -ERANGE;
        }
        if (parsed[device].kind != VS_LIMIT_NONE)
            return -EINVAL;
        rc = vs_parse_one_limit(colon + 1, len - (size_t)(colon + 1 - p), &parsed[device]);
        if (rc != 0)
            return rc;
        if (comma == NULL)
            break;
        p = comma + 1;
    }
    memcpy(limits, parsed, sizeof parsed);
    return 0;
}

uint64_t vs_config_limit_bytes(const vs_limit_t *limit, uint64_t physical_bytes)
{
    switch (limit->kind) {
    case VS_LIMIT_BYTES:
        return limit->bytes;
    case VS_LIMIT_PERCENT:
        return (uint64_t)((vs_u128)physical_bytes * limit->ppm / 1000000u);
    case VS_LIMIT_NONE:
    default:
        return UINT64_MAX;
    }
}

static int vs_parse_log_level(const char *text, vs_log_level_t *out)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++) {
        if (strcmp(text, names[i]) == 0) {
            *out = (vs_log_level_t)i;
            return 0;
        }
    }
    return -EINVAL;
}

/* A row count for the live snapshot: plain digits, 1 to the most a reader
 * accepts. */
static int vs_parse_rows(const char *text, uint32_t *rows)
{
    uint64_t value = 0;
    if (!vs_is_digit(*text))
        return -EINVAL;
    for (; vs_is_digit(*text); text++) {
        value = value * 10 + (uint64_t)(*text - '0');
        if (value > VS_SNAPSHOT_MAX_ROWS)
            return -ERANGE;
    }
    if (*text != '\0' || value == 0)
        return -EINVAL;
    *rows = (uint32_t)value;
    return 0;
}

static int vs_copy_path(const char *text, char *dst)
{
    size_t len = strlen(text);
    if (len == 0 || len >= VS_CONFIG_PATH_MAX)
        return -EINVAL;
    memcpy(dst, text, len + 1);
    return 0;
}

#define VS_FORMS_OF(field, name, forms) static const char vs_forms_##field[] = forms;
VS_CONFIG_VARS(VS_FORMS_OF)
#undef VS_FORMS_OF

/* Parses one variable's value into the config. */
static int vs_config_apply(vs_config_t *cfg, const char *name, const char *value)
{
    if (strcmp(name, "VRAM_LIMIT") == 0) {
        int rc = vs_config_parse_limit(value, cfg->limit);
        cfg->limit_set = rc == 0;
        return rc;
    }
    if (strcmp(name, "VRAMSHIM_MODE") == 0) {
        cfg->mode_set = true;
        if (strcmp(value, "cap") == 0)
            return cfg->mode = VS_MODE_CAP, 0;
        if (strcmp(value, "offload") == 0)
            return cfg->mode = VS_MODE_OFFLOAD, 0;
        return -EINVAL;
    }
    if (strcmp(name, "VRAMSHIM_HOST_LIMIT") == 0) {
        size_t len = strlen(value);
        /* A percentage of the memory the process may use (host_memory.h). */
        if (len > 0 && value[len - 1] == '%')
            return vs_parse_percent(value, len, &cfg->host_limit_ppm);
        int rc = vs_config_parse_size(value, &cfg->host_limit);
        /* A pool that cannot hold one eviction (2 MiB) fails every one. */
        return rc == 0 && cfg->host_limit < VS_MIN_EVICT_FLOOR ? -EINVAL : rc;
    }
    if (strcmp(name, "VRAMSHIM_MIN_EVICT") == 0) {
        int rc = vs_config_parse_size(value, &cfg->min_evict);
        return rc == 0 && cfg->min_evict < VS_MIN_EVICT_FLOOR ? -EINVAL : rc;
    }
    if (strcmp(name, "VRAMSHIM_POLICY") == 0) {
        vs_policy_kind_t kind;
        if (vs_policy_kind_from_name(value, &kind) != 0)
            return -EINVAL;
        cfg->policy = (int)kind;
        return 0;
    }
    if (strcmp(name, "VRAMSHIM_PREFETCH") == 0) {
        if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0)
            return -EINVAL;
        cfg->prefetch = strcmp(value, "on") == 0;
        return 0;
    }
    if (strcmp(name, "VRAMSHIM_PARTIAL") == 0) {
        if (strcmp(value, "on") == 0)
            cfg->partial_residency = VS_PARTIAL_ON;
        else if (strcmp(value, "auto") == 0)
            cfg->partial_residency = VS_PARTIAL_AUTO;
        else if (strcmp(value, "off") == 0)
            cfg->partial_residency = VS_PARTIAL_OFF;
        else
            return -EINVAL;
        return 0;
    }
    if (strcmp(name, "VRAMSHIM_MEMINFO") == 0) {
        if (strcmp(value, "limit") != 0 && strcmp(value, "device") != 0)
            return -EINVAL;
        cfg->meminfo_device = strcmp(value, "device") == 0;
        return 0;
    }
    if (strcmp(name, "VRAMSHIM_PIN_DEVICE_POINTERS") == 0) {
        if (strcmp(value, "on") != 0 && strcmp(value, "off") != 0)
            return -EINVAL;
        cfg->pin_device_pointers = strcmp(value, "on") == 0;
        return 0;
    }
    if (strcmp(name, "VRAMSHIM_LOG") == 0)
        return vs_parse_log_level(value, &cfg->log_level);
    if (strcmp(name, "VRAMSHIM_LOG_FILE") == 0)
        return vs_copy_path(value, cfg->log_file);
    if (strcmp(name, "VRAMSHIM_DRIVER") == 0)
        return vs_copy_path(value, cfg->driver);
    if (strcmp(name, "VRAMSHIM_DEBUG_SNAPSHOT") == 0)
        return vs_copy_path(value, cfg->debug_snapshot);
    if (strcmp(name, "VRAMSHIM_TRACE") == 0)
        return vs_copy_path(value, cfg->trace);
    if (strcmp(name, "VRAMSHIM_SPILL_DIR") == 0)
        return vs_copy_path(value, cfg->spill_dir);
    if (strcmp(name, "VRAMSHIM_SNAPSHOT_ROWS") == 0)
        return vs_parse_rows(value, &cfg->snapshot_rows);
    if (strcmp(name, "VRAMSHIM_IO_FAULT") == 0)
        return vs_spill_io_parse_faults(value, &cfg->io_faults);
    return -ENOENT;
}

void vs_config_quote(const char *value, char *out, size_t out_len)
{
    size_t at = 0;
    for (const unsigned char *p = (const unsigned char *)value; *p != '\0'; p++) {
        char piece[8];
        int n = (*p < 0x20 || *p == 0x7f || *p == '"' || *p == '\\') ? snprintf(piece, sizeof piece, "\\x%02x", *p)
                                                                   : snprintf(piece, sizeof piece, "%c", *p);
        if (at + (size_t)n + 4 >= out_len) {
            memcpy(out + at, "...", 3);
            at += 3;
            break;
        }
        memcpy(out + at, piece, (size_t)n);
        at += (size_t)n;
    }
    out[at] = '\0';
}

int vs_config_parse(vs_config_t *cfg, vs_config_getenv_fn get, void *ctx, char *msg, size_t msg_len)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->mode = VS_MODE_TRACK;
    cfg->min_evict = VS_MIN_EVICT_FLOOR;
    /* The learned cycle; LRU stays selectable as the baseline. */
    cfg->policy = (int)VS_POLICY_CYCLIC;
    cfg->prefetch = true;
    cfg->partial_residency = VS_PARTIAL_AUTO;
    cfg->log_level = VS_LOG_WARN;

#define VS_PARSE_VAR(field, name, forms)                                                           \
    do {                                                                                           \
        const char *value = get(name, ctx);                                                        \
        if (value != NULL && vs_config_apply(cfg, name, value) != 0) {                             \
            if (msg != NULL && msg_len > 0) {                                                      \
                char shown_[160];                                                                  \
                vs_config_quote(value, shown_, sizeof shown_);                                     \
                snprintf(msg, msg_len, "vramshim: %s=\"%s\" is not valid; accepted: %s", name,     \
                         shown_, vs_forms_##field);                                                \
            }                                                                                      \
            return -EINVAL;                                                                        \
        }                                                                                          \
    } while (0);
    VS_CONFIG_VARS(VS_PARSE_VAR)
#undef VS_PARSE_VAR
    /* A limit alone means offload; a mode without a limit has nothing to
     * enforce and only tracks. */
    if (!cfg->limit_set)
        cfg->mode = VS_MODE_TRACK;
    else if (!cfg->mode_set)
        cfg->mode = VS_MODE_OFFLOAD;
    return 0;
}

static const char *vs_config_getenv(const char *name, void *ctx)
{
    (void)ctx;
    return getenv(name);
}

static vs_config_t vs_config;
static pthread_once_t vs_config_once = PTHREAD_ONCE_INIT;

static void vs_config_load(void)
{
    char msg[512];

    if (vs_config_parse(&vs_config, vs_config_getenv, NULL, msg, sizeof msg) != 0) {
        char line[sizeof msg + 1];
        int len = snprintf(line, sizeof line, "%s\n", msg);
        ssize_t ignored = write(STDERR_FILENO, line, len > 0 ? (size_t)len : 0);
        (void)ignored;
        /* The documented exit for a malformed configuration: at load, before
         * the program has touched the GPU. `_exit` because other libraries'
         * destructors must not run in a process that never started. */
        _exit(2);
    }
    int rc = vs_log_configure(vs_config.log_level, vs_config.log_file);
    if (rc != 0)
        vs_log(VS_LOG_WARN, "cannot use VRAMSHIM_LOG_FILE=%s (%s; it must be a regular file of yours or "
               "a new name); logging to stderr", vs_config.log_file, strerror(-rc));
}

const vs_config_t *vs_config_get(void)
{
    pthread_once(&vs_config_once, vs_config_load);
    return &vs_config;
}
