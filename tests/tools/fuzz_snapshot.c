/* fuzz_snapshot.c: the fuzz target for the snapshot reader. Any bytes
 * either fail `vs_snapshot_parse` with an error or parse into a view that
 * every renderer of `vramshim` (text, JSON, every sort and filter) can
 * print; nothing may read out of bounds or crash.
 *
 * Entry point: `LLVMFuzzerTestOneInput`, run by libFuzzer (clang builds)
 * or by the portable driver, tests/common/fuzz_driver.c, with the corpus of
 * fuzz_snapshot_corpus.c (every build).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dump.h"
#include "snapshot_reader.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static FILE *sink;
    if (!sink)
        sink = fopen("/dev/null", "w");
    /* The reader parses its own aligned copy; so does the target, sized
     * exactly so that a read past `size` is caught by ASan. */
    void *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    vs_snapshot_view_t view;
    char msg[256];
    int rc = vs_snapshot_parse(buf, size, &view, msg, sizeof(msg));
    if (rc == 0) {
        /* The promise the command relies on. */
        if (sizeof(vs_snapshot_header_t) + (size_t)view.row_count * sizeof(vs_snapshot_row_t) >
            size)
            abort();
        for (int sort = 0; sort < VS_DUMP_SORT_COUNT; sort++) {
            for (int place = -1; place < VS_SNAPSHOT_PLACE_COUNT; place++) {
                vs_dump_options_t opts = {.sort = (vs_dump_sort_t)sort, .place = place,
                                          .json = (sort + place) % 2 != 0,
                                          .bytes = sort % 2 != 0, .now_ns = 123456789};
                vs_dump_write(sink, &view, &opts);
            }
        }
    } else if (rc != -VS_READ_ERR_TRUNCATED && rc != -VS_READ_ERR_VERSION &&
               rc != -VS_READ_ERR_CORRUPT) {
        abort();
    } else if (!msg[0]) {
        abort(); /* every error explains itself */
    }
    free(buf);
    return 0;
}
