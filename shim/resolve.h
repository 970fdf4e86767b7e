/* resolve.h: the `dlsym` override and `cuGetProcAddress` (resolve.c): which
 * wrapper stands in for a real driver function. No lock: the table is built
 * once, after the driver is loaded (pthread_once).
 */
#ifndef VS_RESOLVE_H
#define VS_RESOLVE_H

/* The wrapper standing in for a real driver function, or NULL. */
void *vs_resolve_wrapper_for_real(const void *real_function);

/* Says, once per wrapper, which wrappers another library has written over
 * (at exit; `cuGetProcAddress` and `dlsym` say it as soon as they meet
 * one). */
void vs_resolve_report_patched(void);

#endif /* VS_RESOLVE_H */
