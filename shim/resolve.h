/* resolve.h: the `dlsym` override and `cuGetProcAddress` (resolve.c): which
 * wrapper stands in for a real driver function. No lock: the table is built
 * once, after the driver is loaded (pthread_once).
 */
#ifndef VS_RESOLVE_H
#define VS_RESOLVE_H

/* The wrapper standing in for a real driver function, or NULL. */
void *vs_resolve_wrapper_for_real(const void *real_function);

#endif /* VS_RESOLVE_H */
