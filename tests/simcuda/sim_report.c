/* sim_report.c: the exit report (`SIMCUDA_REPORT=path`), and the call
 * counts it lists, readable while the program runs (`simcuda_calls`).
 *
 * Main entry point: `sim_report_at_exit`, a destructor of the library. When
 * `SIMCUDA_REPORT` names a file it writes one JSON object there: per-device
 * memory figures, bytes copied by direction, kernels launched, the number of
 * calls of every entry point that was called, the end of the virtual clock,
 * the clock's own figures (host costs, engine busy times, GPU idle fraction,
 * per-thread host time) and the number of injected faults, from processes
 * that called `cuInit`. The file is written beside its final
 * name and renamed into place, so a reader never sees half a report.
 */
#include "sim_internal.h"
#include "simcuda.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int report_write(FILE *out)
{
    fprintf(out, "{\n  \"devices\": [");
    for (int i = 0; i < sim_device_count; i++) {
        sim_device_t *device = &sim_devices[i];
        fprintf(out, "%s\n    {\"ordinal\": %d, \"total_bytes\": %llu, \"peak_bytes\": %llu, \"used_bytes\": %llu}",
                i ? "," : "", i, (unsigned long long)device->total_bytes,
                (unsigned long long)atomic_load(&device->peak_bytes),
                (unsigned long long)atomic_load(&device->used_bytes));
    }
    fprintf(out, "%s],\n", sim_device_count ? "\n  " : "");
    fprintf(out, "  \"copied\": {\"htod\": %llu, \"dtoh\": %llu, \"dtod\": %llu, \"htoh\": %llu},\n",
            (unsigned long long)atomic_load(&sim_stats.copied_htod),
            (unsigned long long)atomic_load(&sim_stats.copied_dtoh),
            (unsigned long long)atomic_load(&sim_stats.copied_dtod),
            (unsigned long long)atomic_load(&sim_stats.copied_htoh));
    fprintf(out, "  \"kernels\": %llu,\n", (unsigned long long)atomic_load(&sim_stats.kernels));
    fprintf(out, "  \"lane_instructions\": %llu,\n", (unsigned long long)simcuda_lane_instructions());
    fprintf(out, "  \"calls\": {");
    bool first = true;
    for (int i = 0; i < SIM_API_COUNT; i++) {
        uint64_t count = atomic_load(&sim_stats.calls[i]);
        if (count == 0)
            continue;
        fprintf(out, "%s\n    \"%s\": %llu", first ? "" : ",", sim_api_table[i].symbol, (unsigned long long)count);
        first = false;
    }
    fprintf(out, "%s},\n", first ? "" : "\n  ");
    fprintf(out, "  \"modeled_ns\": %llu,\n", (unsigned long long)sim_clock_modeled_ns());
    sim_clock_report(out);
    fprintf(out, "  \"faults_injected\": %llu\n}\n", (unsigned long long)atomic_load(&sim_stats.faults_injected));
    return ferror(out) ? -1 : 0;
}

__attribute__((destructor)) static void sim_report_at_exit(void)
{
    const char *path = getenv("SIMCUDA_REPORT");
    if (path == NULL || *path == '\0')
        return;
    /* A process that never called `cuInit` (a shell or a script that
     * vramshim's start-up probe loaded this library into, to read its
     * version) did no CUDA work: its empty report would replace the
     * program's. */
    if (atomic_load(&sim_stats.calls[SIM_ID(cuInit)]) == 0)
        return;
    char tmp[4096];
    if (snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= (int)sizeof tmp)
        return;
    FILE *out = fopen(tmp, "w");
    if (out == NULL) {
        fprintf(stderr, "simcuda: cannot write the report SIMCUDA_REPORT=%s\n", path);
        return;
    }
    int rc = report_write(out);
    if (fclose(out) != 0 || rc != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "simcuda: cannot write the report SIMCUDA_REPORT=%s\n", path);
        unlink(tmp);
    }
}

SIM_EXPORT uint64_t simcuda_calls(const char *symbol)
{
    for (int i = 0; symbol != NULL && i < SIM_API_COUNT; i++) {
        if (strcmp(sim_api_table[i].symbol, symbol) == 0)
            return atomic_load(&sim_stats.calls[i]);
    }
    return 0;
}
