/* config.h: the shim's environment variables, parsed once at load.
 *
 * `vs_config_parse` is pure (it reads variables through a callback and
 * reports errors into a buffer), so the unit tests drive it directly; the
 * library's constructor calls `vs_config_load`, which prints the one-line
 * message and exits with status 2 on a malformed value, before the program
 * does any GPU work.
 */
#ifndef VS_CONFIG_H
#define VS_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "log.h"
#include "spill_io.h"

#define VS_MAX_DEVICES 64
#define VS_CONFIG_PATH_MAX 4096

/* The forms `VRAM_LIMIT` (and later `VRAMSHIM_HOST_LIMIT`) accept, quoted in
 * every error message. */
#define VS_SIZE_FORMS                                                                              \
    "bytes (1073741824), K/M/G/T or KiB/MiB/GiB/TiB (x1024), KB/MB/GB/TB (x1000), decimals (1.5G)"
#define VS_LIMIT_FORMS                                                                             \
    VS_SIZE_FORMS ", a percentage of device memory (75%), a per-device list (0:10G,1:20G) or 0"
/* `VRAMSHIM_DRIVER`: the parser stores the path; `vs_driver_check`
 * (driver.h) opens it at start-up and reports with the same forms. */
#define VS_DRIVER_FORMS "the path or name of the real libcuda.so.1 (a CUDA driver, not libvramshim.so)"
/* `VRAMSHIM_SPILL_DIR`: the parser only stores the path; `vs_spill_configure`
 * (spill.h) checks it at start-up and reports with the same form. */
#define VS_SPILL_DIR_FORMS "an existing writable directory"

/* Every variable: X(field, name, accepted forms). One list, expanded into
 * the parser's dispatch, the error messages and the documentation test. */
#define VS_CONFIG_VARS(X)                                                                          \
    X(vram_limit, "VRAM_LIMIT", VS_LIMIT_FORMS)                                                    \
    X(mode, "VRAMSHIM_MODE", "offload|cap")                                                        \
    X(host_limit, "VRAMSHIM_HOST_LIMIT",                                                           \
      VS_SIZE_FORMS ", at least 2M, or a percentage of the memory available to the process (50%)") \
    X(min_evict, "VRAMSHIM_MIN_EVICT", VS_SIZE_FORMS ", at least 2M")                              \
    X(policy, "VRAMSHIM_POLICY", "lru|cyclic|learned|predict")                                     \
    X(prefetch, "VRAMSHIM_PREFETCH", "on|off")                                             \
    X(partial_residency, "VRAMSHIM_PARTIAL", "auto|on|off")                                        \
    X(meminfo, "VRAMSHIM_MEMINFO", "limit|device")                                                 \
    X(pin_device_pointers, "VRAMSHIM_PIN_DEVICE_POINTERS", "on|off")                               \
    X(log, "VRAMSHIM_LOG", "error|warn|info|debug")                                                \
    X(log_file, "VRAMSHIM_LOG_FILE", "a writable file path")                                       \
    X(driver, "VRAMSHIM_DRIVER", VS_DRIVER_FORMS)                                                  \
    X(debug_snapshot, "VRAMSHIM_DEBUG_SNAPSHOT", "a writable file path")                         \
    X(trace, "VRAMSHIM_TRACE", "a writable file path")                                             \
    X(spill_dir, "VRAMSHIM_SPILL_DIR", VS_SPILL_DIR_FORMS)                                         \
    X(io_fault, "VRAMSHIM_IO_FAULT", VS_SPILL_IO_FAULT_FORMS " (testing only)")                   \
    X(snapshot_rows, "VRAMSHIM_SNAPSHOT_ROWS", "a number of rows from 1 to 4194304")

/* VRAMSHIM_PARTIAL: whether the plan may keep a head of one streamed
 * allocation resident. `auto`: where the device's largest evictable
 * allocation is 32 MiB or more and its evictions are mostly clean
 * (vs_prefetch_budget_update). `auto` and `on` also let it stream pieces
 * of one size among small allocations of mixed sizes (vs_prefetch_piece). */
typedef enum vs_partial_e {
    VS_PARTIAL_OFF = 0,
    VS_PARTIAL_AUTO,
    VS_PARTIAL_ON,
} vs_partial_t;

typedef enum vs_mode_e {
    VS_MODE_TRACK = 0, /* no VRAM_LIMIT: track and observe only */
    VS_MODE_CAP,       /* refuse allocations over the limit */
    VS_MODE_OFFLOAD,   /* evict cold allocations to host memory (the default with VRAM_LIMIT) */
} vs_mode_t;

/* The smallest evictable allocation: the VMM granularity of current GPUs. */
#define VS_MIN_EVICT_FLOOR (2ull << 20)

typedef enum vs_limit_kind_e {
    VS_LIMIT_NONE = 0, /* no limit on this device: track only */
    VS_LIMIT_BYTES,    /* an absolute number of bytes (0 included) */
    VS_LIMIT_PERCENT,  /* a fraction of the device's physical memory */
} vs_limit_kind_t;

typedef struct vs_limit_s {
    vs_limit_kind_t kind;
    uint64_t bytes; /* VS_LIMIT_BYTES */
    uint32_t ppm;   /* VS_LIMIT_PERCENT, in parts per million (75% = 750000) */
} vs_limit_t;

typedef struct vs_config_s {
    vs_mode_t mode;
    bool mode_set;                      /* VRAMSHIM_MODE was given */
    bool limit_set;                     /* VRAM_LIMIT was given */
    vs_limit_t limit[VS_MAX_DEVICES];   /* per device; NONE where not listed */
    uint64_t host_limit;                /* 0 = not given: see host_limit_ppm */
    uint32_t host_limit_ppm;            /* a percentage of the memory available; 0 = not given (half) */
    uint32_t snapshot_rows;             /* VRAMSHIM_SNAPSHOT_ROWS; 0 = the default */
    uint64_t min_evict;                 /* VRAMSHIM_MIN_EVICT, >= VS_MIN_EVICT_FLOOR */
    int policy;                         /* a vs_policy_kind_t */
    bool prefetch;                      /* VRAMSHIM_PREFETCH: restore ahead from the learned order */
    int partial_residency;              /* VRAMSHIM_PARTIAL (vs_partial_t): a streamed allocation may keep a head resident */
    bool meminfo_device;                /* VRAMSHIM_MEMINFO=device: cuMemGetInfo answers the driver's figures */
    bool pin_device_pointers;           /* VRAMSHIM_PIN_DEVICE_POINTERS: pin what small host-to-device copies name */
    vs_log_level_t log_level;
    char log_file[VS_CONFIG_PATH_MAX];
    char driver[VS_CONFIG_PATH_MAX];    /* "" = libcuda.so.1 from the search path */
    char debug_snapshot[VS_CONFIG_PATH_MAX];
    char trace[VS_CONFIG_PATH_MAX];     /* "" = no access trace */
    char spill_dir[VS_CONFIG_PATH_MAX]; /* "" = no disk tier */
    vs_spill_io_faults_t io_faults;     /* VRAMSHIM_IO_FAULT; count 0 = none */
} vs_config_t;

/* Looks up one variable; returns NULL when unset. */
typedef const char *(*vs_config_getenv_fn)(const char *name, void *ctx);

/* Parses a size (see VS_SIZE_FORMS) into bytes. 0 or -EINVAL (malformed),
 * -ERANGE (does not fit 64 bits). */
int vs_config_parse_size(const char *text, uint64_t *bytes);

/* Parses a `VRAM_LIMIT` value into per-device limits. 0 or -EINVAL/-ERANGE. */
int vs_config_parse_limit(const char *text, vs_limit_t limits[VS_MAX_DEVICES]);

/* Fills `cfg` from the variables. On a malformed value returns -EINVAL and
 * writes into `msg` one line naming the variable, the value and the accepted
 * forms. */
int vs_config_parse(vs_config_t *cfg, vs_config_getenv_fn get, void *ctx, char *msg, size_t msg_len);

/* Writes `value` as error messages show it into `out`: one line whatever it
 * holds (quotes, backslashes and control characters as \xNN), cut with
 * "..." when longer than `out_len` allows. */
void vs_config_quote(const char *value, char *out, size_t out_len);

/* The limit of `device` in bytes given its physical memory; UINT64_MAX when
 * the device is not limited. */
uint64_t vs_config_limit_bytes(const vs_limit_t *limit, uint64_t physical_bytes);

/* The process-wide configuration, parsed from the environment on first use
 * (the constructor makes that first use happen at load). Exits with status
 * 2 after one line on stderr when a value is malformed. */
const vs_config_t *vs_config_get(void);

#endif /* VS_CONFIG_H */
