/*
 * policy_replay.c: the policy benchmark. Replays traces through policy/
 * offline and compares the bytes moved by LRU, the learned (cyclic) policy
 * and Belady's farthest-next-use reference at limits of 10%, 25% and 50% of
 * each trace's peak live bytes. Main entry point: `main`.
 *
 * Usage: policy_replay [--svg FILE] [--svg-trace dit|llm|vae] [--svg-limit PCT]
 *                      [--svg-policy lru|learned|cyclic|planned|belady|all] [--svg-x auto|op|time]
 *                      [--dump-trace NAME FILE] [--passes N] [TRACE_FILE]
 * Without TRACE_FILE it runs the synthetic workloads of synth.c. --svg
 * renders one trace's replay at one limit as a timeline (svg.c), a panel per
 * order asked for. The goal,
 * learned <= 1.02 x Belady bytes moved (H2D + D2H) at every limit, decides
 * the summary line: "met" or "MISSED". Like every benchmark it reports and
 * does not gate: it exits 0 whether the goal is met or missed, 1 when it is
 * broken (a replay or the SVG failed), 2 on a usage or input error.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "svg.h"
#include "synth.h"
#include "trace.h"

#define GOAL 1.02
#define MIB (1024.0 * 1024.0)

static const unsigned limit_pct[] = {10, 25, 50};
#define N_LIMITS (sizeof(limit_pct) / sizeof(limit_pct[0]))

static const char *const order_name[] = {
#define ORDER_NAME(suffix, name) name,
    VS_BENCH_ORDER_LIST(ORDER_NAME)
#undef ORDER_NAME
};

typedef int (*synth_fn)(vs_bench_trace_t *t);
static const struct {
    const char *name;
    synth_fn fn;
} synths[] = {
#define SYNTH_ENTRY(name, fn, desc) {#name, fn},
    VS_BENCH_SYNTH_LIST(SYNTH_ENTRY)
#undef SYNTH_ENTRY
};
#define N_SYNTHS (sizeof(synths) / sizeof(synths[0]))

static int load_file(const char *path, vs_bench_trace_t *t)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "policy_replay: cannot open %s: %s\n", path, strerror(errno));
        return -errno;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    int rc = 0;
    while (buf) {
        len += fread(buf + len, 1, cap - len, f);
        if (len < cap)
            break;
        char *n = realloc(buf, cap * 2);
        if (!n) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = n;
        cap *= 2;
    }
    fclose(f);
    if (!buf)
        return -ENOMEM;
    /* The workload suite's traces name their measured passes in a
     * comment: "# passes: W warm-up, M measured (seq A to B, excluded)". */
    const char *mark = memmem(buf, len, "\n# passes: ", 11);
    char line[128] = "";
    if (mark) {
        size_t at = (size_t)(mark - buf) + 11, n = 0;
        while (at + n < len && n + 1 < sizeof(line) && buf[at + n] != '\n')
            n++;
        memcpy(line, buf + at, n);
        line[n] = '\0';
    }
    unsigned long warmup, measured;
    unsigned long long from, to;
    if (sscanf(line, "%lu warm-up, %lu measured (seq %llu to %llu", &warmup, &measured, &from, &to) == 4
        && measured > 0 && from < to) {
        t->warmup = warmup;
        t->passes = warmup + measured;
        t->measure_from = from;
        t->measure_to = to;
    }
    vs_trace_reader_t reader;
    vs_trace_event_t ev;
    vs_trace_reader_init(&reader, buf, len);
    while ((rc = vs_trace_reader_next(&reader, &ev)) > 0) {
        if (ev.kind == VS_TRACE_USE && ev.seq > t->seq)
            t->seq = ev.seq;
        if (ev.kind == VS_TRACE_USE && ev.seq < t->seq) {
            fprintf(stderr, "%s:%zu: operation numbers go backwards\n", path, reader.line_no);
            rc = -EINVAL;
            break;
        }
        if ((rc = vs_bench_trace_push(t, &ev)) < 0)
            break;
    }
    if (rc == -EINVAL && reader.line_no)
        fprintf(stderr, "%s:%zu: malformed trace line\n", path, reader.line_no);
    free(buf);
    t->name = path;
    return rc;
}

static int dump_file(const vs_bench_trace_t *t, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return -errno;
    fprintf(f, "# vramshim trace v1 (synthetic: %s)\n", t->name);
    char line[VS_TRACE_LINE_MAX + 2];
    for (size_t k = 0; k < t->len; k++) {
        int n = vs_trace_format(&t->ev[k], line, sizeof(line));
        if (n < 0) {
            fclose(f);
            return n;
        }
        fwrite(line, 1, (size_t)n, f);
    }
    return fclose(f) == 0 ? 0 : -EIO;
}

/* ---- SVG timeline ------------------------------------------------------ */

/* `policy` is an order's name, "cyclic" (the name VRAMSHIM_POLICY also
 * accepts for the learned order) or "all". */
static int render_svg(const char *path, const vs_bench_trace_t *t, unsigned pct, const char *policy,
                      vs_bench_svg_x_t x)
{
    uint64_t peak = vs_bench_peak_bytes(t);
    vs_bench_svg_doc_t doc = {.trace = t->name, .limit_pct = pct, .limit = peak * pct / 100,
                              .peak = peak, .passes = t->passes, .x = x};
    vs_bench_result_t res[VS_BENCH_CLASSIC_ORDERS];
    vs_bench_svg_panel_t panels[VS_BENCH_CLASSIC_ORDERS];
    size_t n = 0;
    memset(res, 0, sizeof(res));
    int rc = 0;
    for (int o = 0; o < VS_BENCH_CLASSIC_ORDERS && rc == 0; o++) {
        bool wanted = strcmp(policy, "all") == 0 || strcmp(policy, order_name[o]) == 0 ||
                      (o == VS_BENCH_LEARNED && strcmp(policy, "cyclic") == 0);
        if (!wanted)
            continue;
        rc = vs_bench_replay(t, (vs_bench_order_t)o, doc.limit, true, &res[n]);
        panels[n].policy = order_name[o];
        panels[n].res = &res[n];
        n++;
    }
    if (rc == 0 && n == 0)
        rc = -EINVAL;
    FILE *f = rc == 0 ? fopen(path, "w") : NULL;
    if (rc == 0 && !f)
        rc = -errno;
    if (f) {
        rc = vs_bench_svg_write(f, &doc, panels, n);
        if (ferror(f) && rc == 0)
            rc = -EIO;
        if (fclose(f) != 0 && rc == 0)
            rc = -EIO;
    }
    for (size_t o = 0; o < n; o++)
        free(res[o].timeline);
    return rc;
}

/* ---- the table ----------------------------------------------------------- */

/* Prints one trace's rows; returns 1 when the goal is missed somewhere, 0
 * when met, a negative errno when the trace cannot be replayed. */
static int bench_trace(const vs_bench_trace_t *t, uint64_t passes)
{
    uint64_t peak = vs_bench_peak_bytes(t);
    int missed = 0;
    for (size_t l = 0; l < N_LIMITS; l++) {
        uint64_t limit = peak * limit_pct[l] / 100;
        vs_bench_result_t res[VS_BENCH_CLASSIC_ORDERS];
        for (int o = 0; o < VS_BENCH_CLASSIC_ORDERS; o++) {
            int rc = o == VS_BENCH_BELADY ? vs_bench_optimum(t, limit, false, &res[o])
                                          : vs_bench_replay(t, (vs_bench_order_t)o, limit, false, &res[o]);
            if (rc < 0) {
                fprintf(stderr, "policy_replay: %s at %u%%: %s replay failed: %s\n", t->name,
                        limit_pct[l], order_name[o],
                        rc == -EINVAL ? "an operation does not fit or the trace is inconsistent"
                                      : strerror(-rc));
                return rc;
            }
        }
        printf("%-5s %3u%% %8.0f", t->name, limit_pct[l], (double)limit / MIB);
        for (int o = 0; o < VS_BENCH_CLASSIC_ORDERS; o++)
            printf(" | %8.0f %8.0f", (double)res[o].h2d / MIB / (double)passes,
                   (double)res[o].d2h / MIB / (double)passes);
        uint64_t best = res[VS_BENCH_BELADY].h2d + res[VS_BENCH_BELADY].d2h;
        uint64_t learned = res[VS_BENCH_LEARNED].h2d + res[VS_BENCH_LEARNED].d2h;
        uint64_t lru = res[VS_BENCH_LRU].h2d + res[VS_BENCH_LRU].d2h;
        uint64_t planned = res[VS_BENCH_PLANNED].h2d + res[VS_BENCH_PLANNED].d2h;
        double ratio = best ? (double)learned / (double)best : (learned ? 1e9 : 1.0);
        double lru_ratio = best ? (double)lru / (double)best : (lru ? 1e9 : 1.0);
        double planned_ratio = best ? (double)planned / (double)best : (planned ? 1e9 : 1.0);
        bool ok = ratio <= GOAL;
        missed |= !ok;
        printf(" | %6.3f %6.3f %6.3f %s\n", lru_ratio, ratio, planned_ratio, ok ? "ok" : "MISSED");
    }
    return missed;
}

/* ---- the suite (issue 54) ------------------------------------------------- */

static const struct {
    const char *name;
    synth_fn fn;
    bool fixed_reference;
} suite[] = {
#define SUITE_REF_belady false
#define SUITE_REF_fixed true
#define SUITE_ENTRY(name, fn, desc, reference) {#name, fn, SUITE_REF_##reference},
    VS_BENCH_SUITE_LIST(SUITE_ENTRY)
#undef SUITE_ENTRY
};
#define N_SUITE (sizeof(suite) / sizeof(suite[0]))
static const unsigned suite_pct[] = {25, 50, 75};
#define N_SUITE_LIMITS (sizeof(suite_pct) / sizeof(suite_pct[0]))

static uint64_t moved(const vs_bench_result_t *r)
{
    return r->h2d + r->d2h;
}

/* One trace's rows of the suite's table; returns 1 when missed, 0 when
 * met, -errno when broken. */
static int bench_suite_trace(const vs_bench_trace_t *t, const char *name, bool fixed_reference)
{
    uint64_t peak = vs_bench_peak_bytes(t);
    int status = 0;
    for (size_t l = 0; l < N_SUITE_LIMITS; l++) {
        uint64_t limit = peak * suite_pct[l] / 100;
        static const vs_bench_order_t orders[] = {VS_BENCH_LRU, VS_BENCH_LEARNED, VS_BENCH_PREDICT};
        vs_bench_result_t res[4], fixed;
        int rc = 0;
        for (size_t o = 0; o < 3 && rc == 0; o++)
            rc = vs_bench_replay(t, orders[o], limit, false, &res[o]);
        if (rc == 0)
            rc = vs_bench_optimum(t, limit, false, &res[3]);
        bool have_fixed = rc == 0 && vs_bench_optimum(t, limit, true, &fixed) == 0;
        if (rc == 0 && fixed_reference && !have_fixed)
            rc = -EINVAL;
        if (rc < 0) {
            fprintf(stderr, "policy_replay: %s at %u%%: replay failed: %s\n", name, suite_pct[l], strerror(-rc));
            return rc;
        }
        uint64_t ref = fixed_reference ? moved(&fixed) : moved(&res[3]);
        /* The same over the whole trace, its learning passes included. */
        double whole = 0.0;
        if (t->measure_from) {
            vs_bench_trace_t all = *t;
            vs_bench_result_t pred_all, ref_all;
            all.measure_from = 0;
            rc = vs_bench_replay(&all, VS_BENCH_PREDICT, limit, false, &pred_all);
            if (rc == 0)
                rc = vs_bench_optimum(&all, limit, fixed_reference, &ref_all);
            if (rc < 0) {
                fprintf(stderr, "policy_replay: %s at %u%%: replay failed: %s\n", name, suite_pct[l],
                        strerror(-rc));
                return rc;
            }
            whole = moved(&ref_all) ? (double)moved(&pred_all) / (double)moved(&ref_all) : 1.0;
        }
        uint64_t measured = t->passes > t->warmup ? t->passes - t->warmup : 1;
        double pass = (double)measured * MIB;
        double pred = ref ? (double)moved(&res[2]) / (double)ref : (moved(&res[2]) ? 1e9 : 1.0);
        double lru = ref ? (double)moved(&res[0]) / (double)ref : (moved(&res[0]) ? 1e9 : 1.0);
        bool ok = pred <= VS_BENCH_SUITE_GOAL;
        status |= !ok;
        printf("%-14s%c %4u%% %8.0f | %8.1f %8.1f %8.1f %8.1f ", name, fixed_reference ? '*' : ' ', suite_pct[l],
               (double)limit / MIB, (double)moved(&res[0]) / pass, (double)moved(&res[1]) / pass,
               (double)moved(&res[2]) / pass, (double)moved(&res[3]) / pass);
        if (have_fixed)
            printf("%8.1f", (double)moved(&fixed) / pass);
        else
            printf("%8s", "-");
        printf(" | %7.3f %8.3f %s", lru, pred, ok ? "ok    " : "MISSED");
        if (t->measure_from)
            printf(" %6.3f\n", whole);
        else
            printf(" %6s\n", "-");
    }
    return status;
}

/* The suite's table: bytes per pass of lru, the learned (cyclic) order,
 * predict, Belady's MIN with write-back and the best fixed set
 * (bench/workloads/optimum.h); lru and predict over the trace's reference
 * (MIN, or for a stream with no period the best fixed
 * set), goal <= VS_BENCH_SUITE_GOAL. The synthetic shapes, or the trace files given
 * (held against Belady's, or the best fixed set's where the file's name
 * says moe). Returns 1 when missed, 0 when met, -errno when broken. */
static int bench_suite(char **files, int n_files)
{
    printf("suite: bytes moved per measured pass in MiB (H2D+D2H), after the warm-up passes; ref = Belady's MIN with "
           "write-back, or the best fixed set's (*); whole = pred/ref over the whole trace, the warm-up's learning "
           "included\n");
    printf("%-15s limit      MiB |      lru  learned  predict   belady    fixed | lru/ref pred/ref goal<=%.2f"
           "  whole\n", "trace", VS_BENCH_SUITE_GOAL);
    int status = 0;
    size_t count = n_files > 0 ? (size_t)n_files : N_SUITE;
    for (size_t s = 0; s < count; s++) {
        vs_bench_trace_t t;
        memset(&t, 0, sizeof(t));
        int rc = n_files > 0 ? load_file(files[s], &t) : suite[s].fn(&t);
        const char *name = n_files > 0 ? files[s] : suite[s].name;
        if (n_files > 0) {
            const char *slash = strrchr(name, '/');
            name = slash ? slash + 1 : name;
            if (!t.measure_from)
                t.passes = 1;
        }
        bool fixed_reference = n_files > 0 ? strstr(name, "moe") != NULL : suite[s].fixed_reference;
        if (rc == 0)
            rc = bench_suite_trace(&t, name, fixed_reference);
        vs_bench_trace_fini(&t);
        if (rc < 0)
            return rc;
        status |= rc;
    }
    printf("suite goal (predict <= %.2f x the reference at every limit): %s\n", VS_BENCH_SUITE_GOAL,
           status ? "MISSED" : "met");
    return status;
}

static void usage(void)
{
    fprintf(stderr, "usage: policy_replay [--svg FILE] [--svg-trace dit|llm|vae] [--svg-limit PCT]\n"
                    "                     [--svg-policy lru|learned|cyclic|planned|belady|all]"
                    " [--svg-x auto|op|time]\n"
                    "                     [--dump-trace NAME FILE] [--passes N] [TRACE_FILE]\n"
                    "       policy_replay --suite [TRACE_FILE...]\n");
}

static bool svg_policy_known(const char *name)
{
    if (strcmp(name, "all") == 0 || strcmp(name, "cyclic") == 0)
        return true;
    for (int o = 0; o < VS_BENCH_CLASSIC_ORDERS; o++)
        if (strcmp(name, order_name[o]) == 0)
            return true;
    return false;
}

int main(int argc, char **argv)
{
    const char *svg = NULL, *svg_trace = "dit", *svg_policy = "all", *dump_name = NULL,
               *dump_path = NULL, *file = NULL;
    vs_bench_svg_x_t svg_x = VS_BENCH_SVG_X_AUTO;
    unsigned svg_pct = 25;
    uint64_t file_passes = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--suite") == 0) {
            int r = bench_suite(argv + i + 1, argc - i - 1);
            if (r < 0)
                fprintf(stderr, "policy_replay: the suite failed: %s\n", strerror(-r));
            return r < 0 ? 1 : 0;
        }
        if (strcmp(argv[i], "--svg") == 0 && i + 1 < argc) {
            svg = argv[++i];
        } else if (strcmp(argv[i], "--svg-trace") == 0 && i + 1 < argc) {
            svg_trace = argv[++i];
        } else if (strcmp(argv[i], "--svg-limit") == 0 && i + 1 < argc) {
            svg_pct = (unsigned)strtoul(argv[++i], NULL, 10);
            if (svg_pct == 0 || svg_pct > 100) {
                usage();
                return 2;
            }
        } else if (strcmp(argv[i], "--svg-policy") == 0 && i + 1 < argc) {
            svg_policy = argv[++i];
            if (!svg_policy_known(svg_policy)) {
                usage();
                return 2;
            }
        } else if (strcmp(argv[i], "--svg-x") == 0 && i + 1 < argc) {
            const char *x = argv[++i];
            if (strcmp(x, "auto") == 0) {
                svg_x = VS_BENCH_SVG_X_AUTO;
            } else if (strcmp(x, "op") == 0) {
                svg_x = VS_BENCH_SVG_X_OP;
            } else if (strcmp(x, "time") == 0) {
                svg_x = VS_BENCH_SVG_X_TIME;
            } else {
                usage();
                return 2;
            }
        } else if (strcmp(argv[i], "--dump-trace") == 0 && i + 2 < argc) {
            dump_name = argv[++i];
            dump_path = argv[++i];
        } else if (strcmp(argv[i], "--passes") == 0 && i + 1 < argc) {
            file_passes = strtoull(argv[++i], NULL, 10);
            if (file_passes == 0) {
                usage();
                return 2;
            }
        } else if (argv[i][0] == '-' || file) {
            usage();
            return 2;
        } else {
            file = argv[i];
        }
    }
    vs_bench_trace_t traces[N_SYNTHS];
    size_t n_traces = 0;
    int rc = 0;
    memset(traces, 0, sizeof(traces));
    if (file) {
        rc = load_file(file, &traces[0]);
        traces[0].passes = file_passes;
        n_traces = 1;
    } else {
        for (size_t s = 0; s < N_SYNTHS && rc == 0; s++, n_traces++)
            rc = synths[s].fn(&traces[s]);
    }
    if (rc < 0) {
        fprintf(stderr, "policy_replay: cannot build the traces: %s\n", strerror(-rc));
        for (size_t s = 0; s < n_traces; s++)
            vs_bench_trace_fini(&traces[s]);
        return 2;
    }
    int status = 0; /* 0 met, 1 missed, 2 broken */
    if (dump_name) {
        for (size_t s = 0; s < n_traces; s++)
            if (strcmp(traces[s].name, dump_name) == 0 && (rc = dump_file(&traces[s], dump_path)) < 0)
                fprintf(stderr, "policy_replay: cannot write %s: %s\n", dump_path, strerror(-rc));
    }
    printf("bytes moved per pass in MiB (H2D in, D2H written back); ratio = (H2D+D2H) / Belady's MIN with write-back\n");
    printf("trace limit      MiB |   lru H2D      D2H | learned H2D    D2H | planned H2D    D2H "
           "|  belady H2D    D2H | lru/B  lrn/B  pln/B goal<=%.2f (lrn)\n", GOAL);
    for (size_t s = 0; s < n_traces; s++) {
        int r = bench_trace(&traces[s], traces[s].passes);
        if (r < 0)
            status = 2;
        else if (r > 0 && status == 0)
            status = 1;
    }
    if (svg) {
        const vs_bench_trace_t *t = NULL;
        for (size_t s = 0; s < n_traces; s++)
            if (file || strcmp(traces[s].name, svg_trace) == 0)
                t = &traces[s];
        if (!t) {
            fprintf(stderr, "policy_replay: no trace named %s\n", svg_trace);
            status = 2;
        } else if ((rc = render_svg(svg, t, svg_pct, svg_policy, svg_x)) < 0) {
            fprintf(stderr, "policy_replay: cannot render %s: %s\n", svg,
                    rc == -EINVAL ? "the replay failed, or --svg-x time on a trace without times"
                                  : strerror(-rc));
            status = 2;
        }
    }
    printf("goal (learned <= %.2f x Belady at every limit): %s\n", GOAL,
           status == 0 ? "met" : status == 1 ? "MISSED" : "not evaluated (error)");
    for (size_t s = 0; s < n_traces; s++)
        vs_bench_trace_fini(&traces[s]);
    return status == 2 ? 1 : 0;
}
