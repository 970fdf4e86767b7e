/* sim_fault.c: call counting and fault injection (`SIMCUDA_FAIL`).
 *
 * Main entry point: `sim_api_enter` (through `SIM_ENTER`), the first
 * statement of every exported function. It counts the call for the report
 * and, when a rule of `SIMCUDA_FAIL` selects this call, returns the row's
 * `fault_error` (or the rule's `err=`) so the function returns before any
 * side effect; then it checks that `cuInit` has run where the caller needs it.
 * Before all that it charges the call's host cost to the virtual clock: a
 * failing call costs the host time too.
 *
 *   SIMCUDA_FAIL="cuMemCreate:3,cuMemcpyDtoHAsync_v2:every=4,cuMemHostAlloc:after=2:err=CUDA_ERROR_UNKNOWN"
 *
 * A rule names an exported symbol (that symbol only) or a request name
 * (every variant of it, counted together). The variable is parsed at the
 * first call of any entry point; a malformed value is reported and makes
 * `cuInit` exit the process with status 2, since the harness asked for
 * something it will not get.
 */
#include "sim_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

sim_stats_t sim_stats;

typedef enum fault_mode_e {
    FAULT_NTH,   /* fail the Nth call only */
    FAULT_EVERY, /* fail every Nth call */
    FAULT_AFTER, /* fail every call after the first N */
} fault_mode_t;

typedef struct fault_rule_s {
    fault_mode_t mode;
    uint64_t n;
    bool has_error;
    CUresult error;
    _Atomic uint64_t calls; /* calls this rule has seen */
} fault_rule_t;

#define SIM_FAULT_MAX_RULES 64

static fault_rule_t fault_rules[SIM_FAULT_MAX_RULES];
static fault_rule_t *fault_rule_of[SIM_API_COUNT];
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;
static bool fault_config_bad;

static int parse_count(const char *text, uint64_t *out)
{
    if (*text < '0' || *text > '9')
        return -EINVAL;
    char *end = NULL;
    errno = 0;
    unsigned long long value = strtoull(text, &end, 10);
    if (errno != 0 || *end != '\0')
        return -EINVAL;
    *out = value;
    return 0;
}

/* Parses one "name:spec[:err=NAME]" item into `rule` and binds it to the
 * rows it names. */
static int parse_rule(char *item, fault_rule_t *rule)
{
    char *name = item;
    char *spec = strchr(item, ':');
    if (spec == NULL)
        return -EINVAL;
    *spec++ = '\0';
    char *option = strchr(spec, ':');
    if (option != NULL)
        *option++ = '\0';

    if (strncmp(spec, "every=", 6) == 0) {
        rule->mode = FAULT_EVERY;
        if (parse_count(spec + 6, &rule->n) != 0 || rule->n == 0)
            return -EINVAL;
    } else if (strncmp(spec, "after=", 6) == 0) {
        rule->mode = FAULT_AFTER;
        if (parse_count(spec + 6, &rule->n) != 0)
            return -EINVAL;
    } else {
        rule->mode = FAULT_NTH;
        if (parse_count(spec, &rule->n) != 0 || rule->n == 0)
            return -EINVAL;
    }
    if (option != NULL) {
        if (strncmp(option, "err=", 4) != 0 || sim_error_from_name(option + 4, &rule->error) != 0)
            return -EINVAL;
        rule->has_error = true;
    }

    bool bound = false;
    for (int i = 0; i < SIM_API_COUNT; i++) {
        if (strcmp(sim_api_table[i].symbol, name) == 0 || strcmp(sim_api_table[i].request, name) == 0) {
            fault_rule_of[i] = rule;
            bound = true;
        }
    }
    return bound ? 0 : -ENOENT;
}

static void fault_parse(void)
{
    const char *text = getenv("SIMCUDA_FAIL");
    if (text == NULL || *text == '\0')
        return;
    char *copy = strdup(text);
    if (copy == NULL) {
        fault_config_bad = true;
        return;
    }
    int count = 0;
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item != NULL; item = strtok_r(NULL, ",", &save)) {
        if (count == SIM_FAULT_MAX_RULES || parse_rule(item, &fault_rules[count]) != 0) {
            fault_config_bad = true;
            break;
        }
        count++;
    }
    free(copy);
    if (fault_config_bad)
        memset(fault_rule_of, 0, sizeof fault_rule_of);
}

void sim_fault_check_config(void)
{
    pthread_once(&fault_once, fault_parse);
    if (!fault_config_bad)
        return;
    fprintf(stderr,
            "simcuda: SIMCUDA_FAIL=\"%s\" is malformed (accepted: comma-separated NAME:N, NAME:every=N or "
            "NAME:after=N, each optionally followed by :err=CUDA_ERROR_NAME, where NAME is a driver symbol "
            "or request name simcuda implements, e.g. cuMemCreate:3,cuMemcpyDtoHAsync:every=4)\n",
            getenv("SIMCUDA_FAIL"));
    exit(2);
}

static CUresult fault_inject(sim_api_id_t id)
{
    atomic_fetch_add_explicit(&sim_stats.calls[id], 1, memory_order_relaxed);
    pthread_once(&fault_once, fault_parse);
    fault_rule_t *rule = fault_rule_of[id];
    if (rule == NULL)
        return CUDA_SUCCESS;
    uint64_t call = atomic_fetch_add_explicit(&rule->calls, 1, memory_order_relaxed) + 1;
    bool fail = false;
    switch (rule->mode) {
    case FAULT_NTH: fail = call == rule->n; break;
    case FAULT_EVERY: fail = call % rule->n == 0; break;
    case FAULT_AFTER: fail = call > rule->n; break;
    }
    if (!fail)
        return CUDA_SUCCESS;
    atomic_fetch_add_explicit(&sim_stats.faults_injected, 1, memory_order_relaxed);
    return rule->has_error ? rule->error : sim_api_table[id].fault_error;
}

CUresult sim_api_enter(sim_api_id_t id, sim_need_t need)
{
    bool priced_by_call = need == SIM_NEED_INIT_PRICED_BY_CALL;
    if (!priced_by_call)
        sim_clock_host_call(id);
    CUresult result = fault_inject(id);
    if (result == CUDA_SUCCESS && need != SIM_NEED_NOTHING && !sim_initialized())
        result = CUDA_ERROR_NOT_INITIALIZED;
    /* A call that prices itself does so only when it goes on. */
    if (priced_by_call && result != CUDA_SUCCESS)
        sim_clock_host_call(id);
    return result;
}
