/* patcher.h: libvs_patcher.so (patcher.c), a library that writes a jump
 * over the `cuMemAlloc` that `cuGetProcAddress` gives it. */
#ifndef VS_TESTS_PATCHER_H
#define VS_TESTS_PATCHER_H

typedef enum { PATCHER_TRAMPOLINE, PATCHER_RESOLVE } patcher_mode_t;

/* Patches `cuMemAlloc`; 0, or -1 with one line on stderr. */
__attribute__((visibility("default"))) int patcher_install(patcher_mode_t mode);
/* How many calls reached the patcher's function. */
__attribute__((visibility("default"))) unsigned long patcher_calls_seen(void);

#endif
