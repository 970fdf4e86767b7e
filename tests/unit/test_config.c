/* test_config.c: unit tests of shim/config.c: every accepted form of
 * VRAM_LIMIT and one test per malformed shape, plus the other variables:
 * the mode (offload by default with a limit, tracking without one), the
 * host pool's limit, the smallest evictable size and the eviction policy,
 * the spill directory (stored only; spill.c checks it) and the I/O faults
 * of `VRAMSHIM_IO_FAULT`. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "config.h"
#include "policy.h"

#define KiB (1ull << 10)
#define MiB (1ull << 20)
#define GiB (1ull << 30)
#define TiB (1ull << 40)

static uint64_t size_of(const char *text)
{
    uint64_t bytes = 0;
    assert_int_equal(vs_config_parse_size(text, &bytes), 0);
    return bytes;
}

static void test_size_plain_bytes_parse_exactly(void **state)
{
    (void)state;
    assert_int_equal(size_of("0"), 0);
    assert_int_equal(size_of("1073741824"), GiB);
    assert_int_equal(size_of("512B"), 512);
}

static void test_size_binary_suffixes_multiply_by_1024(void **state)
{
    (void)state;
    assert_int_equal(size_of("4K"), 4 * KiB);
    assert_int_equal(size_of("256M"), 256 * MiB);
    assert_int_equal(size_of("10G"), 10 * GiB);
    assert_int_equal(size_of("2T"), 2 * TiB);
    assert_int_equal(size_of("4KiB"), 4 * KiB);
    assert_int_equal(size_of("256MiB"), 256 * MiB);
    assert_int_equal(size_of("10GiB"), 10 * GiB);
    assert_int_equal(size_of("2TiB"), 2 * TiB);
    assert_int_equal(size_of("10g"), 10 * GiB);
}

static void test_size_decimal_suffixes_multiply_by_1000(void **state)
{
    (void)state;
    assert_int_equal(size_of("4KB"), 4000);
    assert_int_equal(size_of("256MB"), 256000000ull);
    assert_int_equal(size_of("10GB"), 10000000000ull);
    assert_int_equal(size_of("2TB"), 2000000000000ull);
}

static void test_size_decimals_scale_exactly(void **state)
{
    (void)state;
    assert_int_equal(size_of("1.5G"), GiB + GiB / 2);
    assert_int_equal(size_of("0.25M"), MiB / 4);
    assert_int_equal(size_of("1.5GB"), 1500000000ull);
}

static void test_size_too_large_is_erange(void **state)
{
    uint64_t bytes;
    (void)state;
    assert_int_equal(vs_config_parse_size("99999999999999999999", &bytes), -ERANGE);
    assert_int_equal(vs_config_parse_size("20000000T", &bytes), -ERANGE);
}

static void test_limit_single_value_applies_to_every_device(void **state)
{
    vs_limit_t limits[VS_MAX_DEVICES];
    (void)state;
    assert_int_equal(vs_config_parse_limit("256M", limits), 0);
    for (int d = 0; d < VS_MAX_DEVICES; d++) {
        assert_int_equal(limits[d].kind, VS_LIMIT_BYTES);
        assert_int_equal(limits[d].bytes, 256 * MiB);
    }
}

static void test_limit_zero_is_a_zero_byte_limit(void **state)
{
    vs_limit_t limits[VS_MAX_DEVICES];
    (void)state;
    assert_int_equal(vs_config_parse_limit("0", limits), 0);
    assert_int_equal(limits[0].kind, VS_LIMIT_BYTES);
    assert_int_equal(limits[0].bytes, 0);
    assert_int_equal(vs_config_limit_bytes(&limits[0], 80 * GiB), 0);
}

static void test_limit_percentage_resolves_against_physical(void **state)
{
    vs_limit_t limits[VS_MAX_DEVICES];
    (void)state;
    assert_int_equal(vs_config_parse_limit("75%", limits), 0);
    assert_int_equal(limits[3].kind, VS_LIMIT_PERCENT);
    assert_int_equal(vs_config_limit_bytes(&limits[3], 80 * GiB), 60 * GiB);
    assert_int_equal(vs_config_parse_limit("12.5%", limits), 0);
    assert_int_equal(vs_config_limit_bytes(&limits[0], 8 * GiB), GiB);
    assert_int_equal(vs_config_parse_limit("100%", limits), 0);
    assert_int_equal(vs_config_limit_bytes(&limits[0], 8 * GiB), 8 * GiB);
}

static void test_limit_device_list_limits_only_listed_devices(void **state)
{
    vs_limit_t limits[VS_MAX_DEVICES];
    (void)state;
    assert_int_equal(vs_config_parse_limit("0:10G,1:20G,3:50%", limits), 0);
    assert_int_equal(vs_config_limit_bytes(&limits[0], 80 * GiB), 10 * GiB);
    assert_int_equal(vs_config_limit_bytes(&limits[1], 80 * GiB), 20 * GiB);
    assert_int_equal(limits[2].kind, VS_LIMIT_NONE);
    assert_int_equal(vs_config_limit_bytes(&limits[2], 80 * GiB), UINT64_MAX);
    assert_int_equal(vs_config_limit_bytes(&limits[3], 80 * GiB), 40 * GiB);
}

/* One shape of malformed VRAM_LIMIT per entry: each must be refused. */
static const char *const malformed_limits[] = {
    "",            /* empty */
    "abc",         /* no number */
    "G",           /* unit without number */
    "10X",         /* unknown unit */
    "10 G",        /* space inside */
    " 10G",        /* leading space */
    "-1G",         /* negative */
    "+1G",         /* sign */
    "1.5",         /* fraction of a byte: unit forgotten */
    "1.G",         /* dot without fraction digits */
    ".5G",         /* fraction without integer part */
    "1..5G",       /* two dots */
    "10G5",        /* trailing garbage */
    "1e9",         /* exponent */
    "0x100",       /* hexadecimal */
    "99999999999999999999", /* does not fit 64 bits */
    "150%",        /* percentage above 100 */
    "0%",          /* zero percentage */
    "%",           /* percentage without number */
    "50%%",        /* doubled percent sign */
    "0:",          /* device without value */
    ":10G",        /* value without device */
    "0:10G,",      /* trailing comma */
    ",0:10G",      /* leading comma */
    "0:10G,0:5G",  /* device listed twice */
    "x:10G",       /* device not a number */
    "64:10G",      /* device out of range */
    "0:10G;1:5G",  /* wrong separator */
    "0:10G,1",     /* list entry without colon */
    "0:1:10G",     /* two colons */
};

static void test_limit_every_malformed_shape_is_refused(void **state)
{
    vs_limit_t limits[VS_MAX_DEVICES];
    (void)state;
    for (size_t i = 0; i < sizeof malformed_limits / sizeof malformed_limits[0]; i++) {
        int rc = vs_config_parse_limit(malformed_limits[i], limits);
        if (rc == 0)
            fail_msg("VRAM_LIMIT=\"%s\" was accepted", malformed_limits[i]);
        assert_true(rc == -EINVAL || rc == -ERANGE);
    }
}

/* A fake environment: NULL-terminated name/value pairs. */
static const char *fake_getenv(const char *name, void *ctx)
{
    const char *const *pairs = ctx;
    for (size_t i = 0; pairs[i] != NULL; i += 2) {
        if (strcmp(pairs[i], name) == 0)
            return pairs[i + 1];
    }
    return NULL;
}

static void test_parse_unset_environment_tracks_only(void **state)
{
    const char *env[] = {NULL};
    vs_config_t cfg;
    (void)state;
    assert_int_equal(vs_config_parse(&cfg, fake_getenv, env, NULL, 0), 0);
    assert_false(cfg.limit_set);
    assert_int_equal(cfg.mode, VS_MODE_TRACK);
    assert_int_equal(cfg.log_level, VS_LOG_WARN);
    assert_int_equal(cfg.limit[0].kind, VS_LIMIT_NONE);
}

static void test_parse_all_variables_are_read(void **state)
{
    const char *env[] = {"VRAM_LIMIT", "1.5G", "VRAMSHIM_MODE", "cap", "VRAMSHIM_LOG", "debug",
                         "VRAMSHIM_LOG_FILE", "/tmp/x.log", "VRAMSHIM_DRIVER", "/opt/libcuda.so.1",
                         "VRAMSHIM_DEBUG_SNAPSHOT", "/tmp/snap", NULL};
    vs_config_t cfg;
    (void)state;
    assert_int_equal(vs_config_parse(&cfg, fake_getenv, env, NULL, 0), 0);
    assert_true(cfg.limit_set);
    assert_int_equal(cfg.limit[0].bytes, GiB + GiB / 2);
    assert_int_equal(cfg.log_level, VS_LOG_DEBUG);
    assert_string_equal(cfg.log_file, "/tmp/x.log");
    assert_string_equal(cfg.driver, "/opt/libcuda.so.1");
    assert_string_equal(cfg.debug_snapshot, "/tmp/snap");
}

static void test_parse_malformed_limit_message_names_variable_value_and_forms(void **state)
{
    const char *env[] = {"VRAM_LIMIT", "10X", NULL};
    vs_config_t cfg;
    char msg[512];
    (void)state;
    assert_int_equal(vs_config_parse(&cfg, fake_getenv, env, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "VRAM_LIMIT"));
    assert_non_null(strstr(msg, "\"10X\""));
    assert_non_null(strstr(msg, "KiB"));
    assert_non_null(strstr(msg, "75%"));
    assert_non_null(strstr(msg, "0:10G,1:20G"));
    assert_null(strchr(msg, '\n'));
}

static void test_parse_unknown_mode_and_log_level_are_refused(void **state)
{
    const char *bad_mode[] = {"VRAMSHIM_MODE", "oversubscribe", NULL};
    const char *bad_log[] = {"VRAMSHIM_LOG", "verbose", NULL};
    const char *empty_file[] = {"VRAMSHIM_LOG_FILE", "", NULL};
    vs_config_t cfg;
    char msg[512];
    (void)state;
    assert_int_equal(vs_config_parse(&cfg, fake_getenv, bad_mode, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "VRAMSHIM_MODE"));
    assert_int_equal(vs_config_parse(&cfg, fake_getenv, bad_log, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "error|warn|info|debug"));
    assert_int_equal(vs_config_parse(&cfg, fake_getenv, empty_file, msg, sizeof msg), -EINVAL);
}

/* ---- The offload mode's variables ---------------------------------------- */

static vs_config_t parse_ok(const char **env)
{
    vs_config_t cfg;
    char msg[512] = "";
    if (vs_config_parse(&cfg, fake_getenv, env, msg, sizeof msg) != 0)
        fail_msg("refused: %s", msg);
    return cfg;
}

/* `name`=`value` alone is refused with one line naming the variable, the
 * value in quotes and the accepted forms (`forms`, a part of them). */
static void assert_refused(const char *name, const char *value, const char *forms)
{
    const char *env[] = {name, value, NULL};
    vs_config_t cfg;
    char msg[512] = "";
    char quoted[256];
    if (vs_config_parse(&cfg, fake_getenv, env, msg, sizeof msg) != -EINVAL)
        fail_msg("%s=\"%s\" was accepted", name, value);
    snprintf(quoted, sizeof quoted, "%s=\"%s\"", name, value);
    if (strstr(msg, quoted) == NULL)
        fail_msg("the message does not name %s: %s", quoted, msg);
    if (strstr(msg, "accepted: ") == NULL || strstr(msg, forms) == NULL)
        fail_msg("the message for %s does not list the accepted forms (%s): %s", quoted, forms, msg);
    assert_null(strchr(msg, '\n'));
}

static void test_parse_limit_alone_means_offload(void **state)
{
    const char *env[] = {"VRAM_LIMIT", "512M", NULL};
    (void)state;
    vs_config_t cfg = parse_ok(env);
    assert_true(cfg.limit_set);
    assert_false(cfg.mode_set);
    assert_int_equal(cfg.mode, VS_MODE_OFFLOAD);
}

static void test_parse_mode_with_limit_selects_cap_or_offload(void **state)
{
    const char *cap[] = {"VRAM_LIMIT", "512M", "VRAMSHIM_MODE", "cap", NULL};
    const char *offload[] = {"VRAM_LIMIT", "512M", "VRAMSHIM_MODE", "offload", NULL};
    const char *zero_limit[] = {"VRAM_LIMIT", "0", NULL};
    (void)state;
    vs_config_t cfg = parse_ok(cap);
    assert_true(cfg.mode_set);
    assert_int_equal(cfg.mode, VS_MODE_CAP);
    cfg = parse_ok(offload);
    assert_true(cfg.mode_set);
    assert_int_equal(cfg.mode, VS_MODE_OFFLOAD);
    /* A limit of zero bytes is a limit: offload, everything evictable goes. */
    cfg = parse_ok(zero_limit);
    assert_int_equal(cfg.mode, VS_MODE_OFFLOAD);
}

static void test_parse_mode_without_limit_tracks_only(void **state)
{
    const char *cap[] = {"VRAMSHIM_MODE", "cap", NULL};
    const char *offload[] = {"VRAMSHIM_MODE", "offload", "VRAMSHIM_HOST_LIMIT", "8G", NULL};
    (void)state;
    vs_config_t cfg = parse_ok(cap);
    assert_false(cfg.limit_set);
    assert_int_equal(cfg.mode, VS_MODE_TRACK);
    cfg = parse_ok(offload);
    assert_false(cfg.limit_set);
    assert_int_equal(cfg.mode, VS_MODE_TRACK);
}

static void test_parse_unknown_mode_is_refused_naming_offload_and_cap(void **state)
{
    static const char *const bad[] = {"", "track", "CAP", "Offload", "cap ", " offload", "offload,cap", "evict"};
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_refused("VRAMSHIM_MODE", bad[i], "offload|cap");
}

static void test_parse_offload_defaults_when_unset(void **state)
{
    const char *env[] = {"VRAM_LIMIT", "1G", NULL};
    (void)state;
    vs_config_t cfg = parse_ok(env);
    assert_int_equal(cfg.host_limit, 0); /* 0: half of physical memory, decided by the shim */
    assert_int_equal(cfg.min_evict, 2 * MiB);
    assert_int_equal(cfg.min_evict, VS_MIN_EVICT_FLOOR);
}

static void test_parse_host_limit_takes_every_size_form(void **state)
{
    static const struct {
        const char *text;
        uint64_t bytes;
    } sizes[] = {
        {"64G", 64 * GiB},      {"64GiB", 64 * GiB},        {"1.5G", GiB + GiB / 2},
        {"512MB", 512000000ull}, {"1073741824", GiB},       {"2t", 2 * TiB},
        {"2097152", 2 * MiB},    {"4096K", 4 * MiB},
    };
    (void)state;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const char *env[] = {"VRAM_LIMIT", "1G", "VRAMSHIM_HOST_LIMIT", sizes[i].text, NULL};
        vs_config_t cfg = parse_ok(env);
        if (cfg.host_limit != sizes[i].bytes)
            fail_msg("VRAMSHIM_HOST_LIMIT=%s read as %llu bytes", sizes[i].text, (unsigned long long)cfg.host_limit);
    }
}

static void test_parse_host_limit_zero_and_malformed_are_refused(void **state)
{
    static const char *const bad[] = {
        "0", "0G", "0.0M", "", "10X", "-1G", "1.5", "abc", "0:10G", "99999999999999999999", " 8G", "8 G",
        /* Too small to hold one eviction: every one would fail. */
        "1", "2097151", "1M", "150%", "0%", "100.0000001%",
    };
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_refused("VRAMSHIM_HOST_LIMIT", bad[i], "KiB/MiB/GiB/TiB");
}

static void test_parse_host_limit_percentage_of_available_memory(void **state)
{
    (void)state;
    const char *env[] = {"VRAM_LIMIT", "1G", "VRAMSHIM_HOST_LIMIT", "50%", NULL};
    vs_config_t cfg = parse_ok(env);
    assert_int_equal(cfg.host_limit_ppm, 500000);
    assert_int_equal(cfg.host_limit, 0);
    const char *two_m[] = {"VRAM_LIMIT", "1G", "VRAMSHIM_HOST_LIMIT", "2M", NULL};
    cfg = parse_ok(two_m);
    assert_int_equal(cfg.host_limit, 2 * MiB);
}

static void test_parse_values_above_zero_never_read_as_zero(void **state)
{
    uint64_t bytes = 1;
    vs_limit_t limits[VS_MAX_DEVICES];
    (void)state;
    assert_int_equal(vs_config_parse_size("0.000000000000000000001T", &bytes), -ERANGE);
    assert_int_equal(vs_config_parse_size("0.1B", &bytes), -EINVAL);
    assert_int_equal(vs_config_parse_size("0.0000001K", &bytes), -ERANGE);
    assert_int_equal(vs_config_parse_size("0.000000000000000000000T", &bytes), 0);
    assert_int_equal(bytes, 0);
    assert_int_equal(vs_config_parse_limit("0.000000000000000000001T", limits), -ERANGE);
    assert_refused("VRAM_LIMIT", "0.000000000000000000001T", "KiB/MiB/GiB/TiB");
}

static void test_parse_percent_above_100_by_any_amount_is_refused(void **state)
{
    vs_limit_t limits[VS_MAX_DEVICES];
    (void)state;
    assert_int_equal(vs_config_parse_limit("100.0000001%", limits), -ERANGE);
    assert_int_equal(vs_config_parse_limit("100.0000000000000000000001%", limits), -ERANGE);
    assert_int_equal(vs_config_parse_limit("100.000%", limits), 0);
    assert_int_equal(limits[0].ppm, 1000000);
    assert_refused("VRAM_LIMIT", "100.0000001%", "percentage");
}

static void test_parse_snapshot_rows_checked_at_load(void **state)
{
    static const char *const bad[] = {"abc", "0", "-1", "4194305", "5 ", " 5", "", "1e3", "99999999999999999999999"};
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_refused("VRAMSHIM_SNAPSHOT_ROWS", bad[i], "1 to 4194304");
    const char *env[] = {"VRAMSHIM_SNAPSHOT_ROWS", "4194304", NULL};
    assert_int_equal(parse_ok(env).snapshot_rows, 4194304);
    const char *unset[] = {NULL};
    assert_int_equal(parse_ok(unset).snapshot_rows, 0);
}

static void test_parse_min_evict_takes_sizes_of_at_least_2m(void **state)
{
    static const struct {
        const char *text;
        uint64_t bytes;
    } sizes[] = {
        {"2M", 2 * MiB}, {"2097152", 2 * MiB}, {"2MiB", 2 * MiB}, {"4M", 4 * MiB}, {"1G", GiB}, {"2.5M", 2 * MiB + MiB / 2},
    };
    (void)state;
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        const char *env[] = {"VRAM_LIMIT", "1G", "VRAMSHIM_MIN_EVICT", sizes[i].text, NULL};
        vs_config_t cfg = parse_ok(env);
        if (cfg.min_evict != sizes[i].bytes)
            fail_msg("VRAMSHIM_MIN_EVICT=%s read as %llu bytes", sizes[i].text, (unsigned long long)cfg.min_evict);
    }
}

static void test_parse_min_evict_below_2m_and_malformed_are_refused(void **state)
{
    static const char *const bad[] = {
        "1M", "2097151", "2MB" /* 2,000,000 bytes */, "0", "1.9M", "", "2X", "-2M", "1%", "2M,4M",
    };
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_refused("VRAMSHIM_MIN_EVICT", bad[i], "at least 2M");
}

static void test_parse_policy_names_select_their_order(void **state)
{
    static const struct {
        const char *name;
        vs_policy_kind_t kind;
    } names[] = {{"lru", VS_POLICY_LRU}, {"cyclic", VS_POLICY_CYCLIC}, {"learned", VS_POLICY_CYCLIC},
                 {"predict", VS_POLICY_PREDICT}};
    (void)state;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *env[] = {"VRAM_LIMIT", "1G", "VRAMSHIM_POLICY", names[i].name, NULL};
        vs_config_t cfg = parse_ok(env);
        if (cfg.policy != (int)names[i].kind)
            fail_msg("VRAMSHIM_POLICY=%s selected kind %d, expected %d", names[i].name, cfg.policy,
                     (int)names[i].kind);
    }
}

static void test_parse_unknown_policy_is_refused_naming_every_policy(void **state)
{
    static const char *const bad[] = {"", "fifo", "belady", "lru ", " cyclic", "lru,cyclic", "random"};
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_refused("VRAMSHIM_POLICY", bad[i], "lru|cyclic|learned|predict");
}

static void test_parse_prefetch_is_on_by_default_and_switchable(void **state)
{
    (void)state;
    const char *none[] = {"VRAM_LIMIT", "1G", NULL};
    vs_config_t cfg = parse_ok(none);
    assert_true(cfg.prefetch);
    assert_int_equal(cfg.policy, (int)VS_POLICY_CYCLIC);
    const char *off[] = {"VRAM_LIMIT", "1G", "VRAMSHIM_PREFETCH", "off", NULL};
    cfg = parse_ok(off);
    assert_false(cfg.prefetch);
    const char *on[] = {"VRAM_LIMIT", "1G", "VRAMSHIM_PREFETCH", "on", NULL};
    cfg = parse_ok(on);
    assert_true(cfg.prefetch);
    static const char *const bad[] = {"", "ON", "1", "yes", "off ", "on,off"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_refused("VRAMSHIM_PREFETCH", bad[i], "on|off");
}

static void test_parse_partial_is_auto_by_default_and_switchable(void **state)
{
    (void)state;
    const char *none[] = {"VRAM_LIMIT", "1G", NULL};
    assert_int_equal(parse_ok(none).partial_residency, VS_PARTIAL_AUTO);
    const char *off[] = {"VRAM_LIMIT", "1G", "VRAMSHIM_PARTIAL", "off", NULL};
    assert_int_equal(parse_ok(off).partial_residency, VS_PARTIAL_OFF);
    const char *on[] = {"VRAM_LIMIT", "1G", "VRAMSHIM_PARTIAL", "on", NULL};
    assert_int_equal(parse_ok(on).partial_residency, VS_PARTIAL_ON);
    const char *automatic[] = {"VRAM_LIMIT", "1G", "VRAMSHIM_PARTIAL", "auto", NULL};
    assert_int_equal(parse_ok(automatic).partial_residency, VS_PARTIAL_AUTO);
    static const char *const bad[] = {"", "ON", "1", "partial", "Auto"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_refused("VRAMSHIM_PARTIAL", bad[i], "auto|on|off");
}

static void test_parse_pin_device_pointers_is_off_unless_on(void **state)
{
    (void)state;
    const char *none[] = {"VRAM_LIMIT", "1G", NULL};
    assert_false(parse_ok(none).pin_device_pointers);
    const char *on[] = {"VRAM_LIMIT", "1G", "VRAMSHIM_PIN_DEVICE_POINTERS", "on", NULL};
    assert_true(parse_ok(on).pin_device_pointers);
    const char *off[] = {"VRAM_LIMIT", "1G", "VRAMSHIM_PIN_DEVICE_POINTERS", "off", NULL};
    assert_false(parse_ok(off).pin_device_pointers);
    static const char *const bad[] = {"", "ON", "1", "yes", "on ", "on,off"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_refused("VRAMSHIM_PIN_DEVICE_POINTERS", bad[i], "on|off");
}

static void test_parse_offload_variables_are_read_together(void **state)
{
    const char *env[] = {"VRAM_LIMIT",         "512M", "VRAMSHIM_MODE",   "offload", "VRAMSHIM_HOST_LIMIT", "48G",
                         "VRAMSHIM_MIN_EVICT", "16M",  "VRAMSHIM_POLICY", "lru",     NULL};
    (void)state;
    vs_config_t cfg = parse_ok(env);
    assert_int_equal(cfg.mode, VS_MODE_OFFLOAD);
    assert_int_equal(cfg.limit[0].bytes, 512 * MiB);
    assert_int_equal(cfg.host_limit, 48 * GiB);
    assert_int_equal(cfg.min_evict, 16 * MiB);
    assert_int_equal(cfg.policy, (int)VS_POLICY_LRU);
}

/* ---- VRAMSHIM_TRACE ------------------------------------------------------ */

static void test_parse_trace_unset_leaves_tracing_off(void **state)
{
    const char *env[] = {NULL};
    (void)state;
    vs_config_t cfg = parse_ok(env);
    assert_string_equal(cfg.trace, "");
}

static void test_parse_trace_path_is_kept_verbatim(void **state)
{
    const char *env[] = {"VRAMSHIM_TRACE", "/tmp/run 1/access.trace", NULL};
    (void)state;
    vs_config_t cfg = parse_ok(env);
    assert_string_equal(cfg.trace, "/tmp/run 1/access.trace");
}

static void test_parse_trace_empty_or_too_long_path_is_refused(void **state)
{
    static char long_path[VS_CONFIG_PATH_MAX + 2];
    (void)state;
    memset(long_path, 'a', sizeof long_path - 1);
    long_path[0] = '/';
    long_path[sizeof long_path - 1] = '\0';
    assert_refused("VRAMSHIM_TRACE", "", "a writable file path");
    const char *env[] = {"VRAMSHIM_TRACE", long_path, NULL};
    vs_config_t cfg;
    char msg[VS_CONFIG_PATH_MAX + 512] = "";
    assert_int_equal(vs_config_parse(&cfg, fake_getenv, env, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "VRAMSHIM_TRACE="));
    assert_non_null(strstr(msg, "a writable file path"));
}

/* ---- VRAMSHIM_SPILL_DIR, VRAMSHIM_IO_FAULT -------------------------------- */

static void test_parse_spill_dir_unset_means_no_disk_tier(void **state)
{
    const char *env[] = {"VRAM_LIMIT", "1G", NULL};
    (void)state;
    vs_config_t cfg = parse_ok(env);
    assert_string_equal(cfg.spill_dir, "");
    assert_int_equal(cfg.io_faults.count, 0);
}

static void test_parse_spill_dir_is_kept_verbatim_and_not_checked(void **state)
{
    /* The parser only stores it: `vs_spill_configure` checks the directory
     * at start-up, in offload mode only. */
    const char *env[] = {"VRAM_LIMIT", "1G", "VRAMSHIM_SPILL_DIR", "/no/such dir/spill", NULL};
    (void)state;
    vs_config_t cfg = parse_ok(env);
    assert_string_equal(cfg.spill_dir, "/no/such dir/spill");
}

static void test_parse_spill_dir_empty_or_too_long_is_refused(void **state)
{
    static char long_path[VS_CONFIG_PATH_MAX + 2];
    (void)state;
    assert_refused("VRAMSHIM_SPILL_DIR", "", "an existing writable directory");
    memset(long_path, 'a', sizeof long_path - 1);
    long_path[0] = '/';
    long_path[sizeof long_path - 1] = '\0';
    const char *env[] = {"VRAMSHIM_SPILL_DIR", long_path, NULL};
    vs_config_t cfg;
    char msg[512] = "";
    assert_int_equal(vs_config_parse(&cfg, fake_getenv, env, msg, sizeof msg), -EINVAL);
    assert_non_null(strstr(msg, "VRAMSHIM_SPILL_DIR=\"/aaa"));
    assert_non_null(strstr(msg, "...\""));
    assert_non_null(strstr(msg, "accepted: an existing writable directory"));
}

static void test_parse_io_fault_lists_are_read(void **state)
{
    const char *env[] = {"VRAMSHIM_IO_FAULT", "reserve:ENOSPC:after=3,read:corrupt:every=2:times=1", NULL};
    (void)state;
    vs_config_t cfg = parse_ok(env);
    assert_int_equal(cfg.io_faults.count, 2);
    assert_int_equal(cfg.io_faults.fault[0].op, VS_SPILL_IO_RESERVE);
    assert_int_equal(cfg.io_faults.fault[0].kind, VS_SPILL_IO_FAULT_ENOSPC);
    assert_int_equal(cfg.io_faults.fault[0].after, 3);
    assert_int_equal(cfg.io_faults.fault[0].every, 1);
    assert_int_equal(cfg.io_faults.fault[1].op, VS_SPILL_IO_READ);
    assert_int_equal(cfg.io_faults.fault[1].kind, VS_SPILL_IO_FAULT_CORRUPT);
    assert_int_equal(cfg.io_faults.fault[1].every, 2);
    assert_int_equal(cfg.io_faults.fault[1].times, 1);
}

static void test_parse_io_fault_malformed_is_refused_naming_the_forms(void **state)
{
    static const char *const bad[] = {
        "", "write", "write:EIO,", "disk:EIO", "write:eio", "read:ENOSPC", "reserve:short", "write:corrupt",
        "write:EIO:every=0", "write:EIO:after=x", "write:EIO:after=1:after=1", "write:EIO:sometimes=1",
    };
    (void)state;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_refused("VRAMSHIM_IO_FAULT", bad[i], "OP:FAULT[:after=N][:every=M][:times=K]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_plain_bytes_parse_exactly),
        cmocka_unit_test(test_size_binary_suffixes_multiply_by_1024),
        cmocka_unit_test(test_size_decimal_suffixes_multiply_by_1000),
        cmocka_unit_test(test_size_decimals_scale_exactly),
        cmocka_unit_test(test_size_too_large_is_erange),
        cmocka_unit_test(test_limit_single_value_applies_to_every_device),
        cmocka_unit_test(test_limit_zero_is_a_zero_byte_limit),
        cmocka_unit_test(test_limit_percentage_resolves_against_physical),
        cmocka_unit_test(test_limit_device_list_limits_only_listed_devices),
        cmocka_unit_test(test_limit_every_malformed_shape_is_refused),
        cmocka_unit_test(test_parse_unset_environment_tracks_only),
        cmocka_unit_test(test_parse_all_variables_are_read),
        cmocka_unit_test(test_parse_malformed_limit_message_names_variable_value_and_forms),
        cmocka_unit_test(test_parse_unknown_mode_and_log_level_are_refused),
        cmocka_unit_test(test_parse_limit_alone_means_offload),
        cmocka_unit_test(test_parse_mode_with_limit_selects_cap_or_offload),
        cmocka_unit_test(test_parse_mode_without_limit_tracks_only),
        cmocka_unit_test(test_parse_unknown_mode_is_refused_naming_offload_and_cap),
        cmocka_unit_test(test_parse_offload_defaults_when_unset),
        cmocka_unit_test(test_parse_host_limit_takes_every_size_form),
        cmocka_unit_test(test_parse_host_limit_zero_and_malformed_are_refused),
        cmocka_unit_test(test_parse_host_limit_percentage_of_available_memory),
        cmocka_unit_test(test_parse_values_above_zero_never_read_as_zero),
        cmocka_unit_test(test_parse_percent_above_100_by_any_amount_is_refused),
        cmocka_unit_test(test_parse_snapshot_rows_checked_at_load),
        cmocka_unit_test(test_parse_min_evict_takes_sizes_of_at_least_2m),
        cmocka_unit_test(test_parse_min_evict_below_2m_and_malformed_are_refused),
        cmocka_unit_test(test_parse_policy_names_select_their_order),
        cmocka_unit_test(test_parse_unknown_policy_is_refused_naming_every_policy),
        cmocka_unit_test(test_parse_prefetch_is_on_by_default_and_switchable),
        cmocka_unit_test(test_parse_partial_is_auto_by_default_and_switchable),
        cmocka_unit_test(test_parse_pin_device_pointers_is_off_unless_on),
        cmocka_unit_test(test_parse_offload_variables_are_read_together),
        cmocka_unit_test(test_parse_trace_unset_leaves_tracing_off),
        cmocka_unit_test(test_parse_trace_path_is_kept_verbatim),
        cmocka_unit_test(test_parse_trace_empty_or_too_long_path_is_refused),
        cmocka_unit_test(test_parse_spill_dir_unset_means_no_disk_tier),
        cmocka_unit_test(test_parse_spill_dir_is_kept_verbatim_and_not_checked),
        cmocka_unit_test(test_parse_spill_dir_empty_or_too_long_is_refused),
        cmocka_unit_test(test_parse_io_fault_lists_are_read),
        cmocka_unit_test(test_parse_io_fault_malformed_is_refused_naming_the_forms),
    };
    return cmocka_run_group_tests_name("config.c", tests, NULL, NULL);
}
