/* device_attributes.c: every `cuDeviceGetAttribute` answer of device 0, one
 * `attribute result value` line each, from 0 to two past
 * CU_DEVICE_ATTRIBUTE_MAX, so that a GPU's answers can be recorded and the
 * simulated driver's compared with them.
 *
 *     device_attributes                 print the answers of the driver found
 *     device_attributes --compare FILE  print them and compare with FILE;
 *                                       its `differs N reason` lines name the
 *                                       attributes simcuda answers otherwise
 *                                       on purpose (features it does not
 *                                       simulate, its own bus layout)
 *
 * Exits 77 where no driver or device answers, 1 when an attribute differs
 * that FILE does not excuse, or an excused one no longer differs.
 */
#include <cuda.h>

#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ATTRIBUTE_COUNT (CU_DEVICE_ATTRIBUTE_MAX + 3)

typedef CUresult (*init_fn)(unsigned int);
typedef CUresult (*attribute_fn)(int *, CUdevice_attribute, CUdevice);

typedef struct recorded_s {
    bool known, excused;
    int result, value;
} recorded_t;

static int read_recorded(const char *path, recorded_t *recorded)
{
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        fprintf(stderr, "device_attributes: cannot read %s\n", path);
        return -1;
    }
    char line[256];
    int number = 0;
    while (fgets(line, sizeof(line), file) != NULL) {
        int attribute, result, value;
        number++;
        if (line[0] == '#' || line[0] == '\n')
            continue;
        if (sscanf(line, "differs %d", &attribute) == 1 && attribute >= 0 && attribute < ATTRIBUTE_COUNT) {
            recorded[attribute].excused = true;
        } else if (sscanf(line, "%d %d %d", &attribute, &result, &value) == 3 && attribute >= 0 &&
                   attribute < ATTRIBUTE_COUNT) {
            recorded[attribute].known = true;
            recorded[attribute].result = result;
            recorded[attribute].value = value;
        } else {
            fprintf(stderr, "device_attributes: %s:%d is neither `N result value` nor `differs N reason`\n", path,
                    number);
            fclose(file);
            return -1;
        }
    }
    fclose(file);
    return 0;
}

int main(int argc, char **argv)
{
    const char *compare = argc == 3 && strcmp(argv[1], "--compare") == 0 ? argv[2] : NULL;
    if (argc != 1 && compare == NULL) {
        fprintf(stderr, "usage: device_attributes [--compare FILE]\n");
        return 2;
    }
    static recorded_t recorded[ATTRIBUTE_COUNT];
    if (compare != NULL && read_recorded(compare, recorded) != 0)
        return 1;
    void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (driver == NULL)
        return 77;
    init_fn init;
    attribute_fn attribute;
    void *symbol = dlsym(driver, "cuInit");
    memcpy(&init, &symbol, sizeof(symbol));
    symbol = dlsym(driver, "cuDeviceGetAttribute");
    memcpy(&attribute, &symbol, sizeof(symbol));
    if (init == NULL || attribute == NULL || init(0) != CUDA_SUCCESS)
        return 77;
    int failures = 0;
    for (int a = 0; a < ATTRIBUTE_COUNT; a++) {
        int value = -12345; /* what an error leaves */
        CUresult result = attribute(&value, (CUdevice_attribute)a, 0);
        printf("%d %d %d\n", a, (int)result, value);
        if (compare == NULL)
            continue;
        const recorded_t *r = &recorded[a];
        bool same = r->known && r->result == (int)result && r->value == value;
        if (!r->known) {
            printf("MISSING attribute %d is not in %s\n", a, compare);
            failures++;
        } else if (!same && !r->excused) {
            printf("DIFFERS attribute %d: recorded %d %d, this driver %d %d\n", a, r->result, r->value, (int)result,
                   value);
            failures++;
        } else if (same && r->excused) {
            printf("FIXED attribute %d now answers as recorded: remove its `differs` line\n", a);
            failures++;
        }
    }
    return failures == 0 ? 0 : 1;
}
