/* device_hash.h: the content hash (`content_hash.h`) of device memory,
 * computed on the device by the embedded `vramshim_content_hash` kernel.
 *
 * A hasher belongs to one context: it holds the loaded kernel and `slots`
 * result slots (16 bytes of device memory and a pinned host copy each), so
 * that several hashes can be in flight on different streams. It does no
 * locking: the caller owns a slot from `vs_device_hash_enqueue` until it
 * has read `vs_device_hash_result`.
 */
#ifndef VS_DEVICE_HASH_H
#define VS_DEVICE_HASH_H

#include <cuda.h>
#include <stdint.h>

#include "content_hash.h"

typedef struct vs_device_hasher_s vs_device_hasher_t;

/* Loads the kernel in the current context (which must be on `device`) and
 * allocates `slots` result slots (device lanes + pinned host copies).
 * Returns 0, or a negative errno: -EINVAL (no slots, no current context or
 * one on another device), -ENOMEM, -ENOTSUP (the driver refuses the PTX or
 * has no module API), -EIO (another driver error). Logs once per process
 * why the driver refused; the caller then copies instead of hashing. */
int vs_device_hasher_create(int device, unsigned slots, vs_device_hasher_t **out);

/* Unloads the kernel and frees the slots (in the hasher's own context).
 * No hash may be in flight. NULL is accepted. */
void vs_device_hasher_destroy(vs_device_hasher_t *h);

/* Forgets a hasher whose context was destroyed: the driver freed its
 * module, lanes and pinned memory with it, so no driver call is made. NULL
 * is accepted. */
void vs_device_hasher_forget(vs_device_hasher_t *h);

unsigned vs_device_hasher_slots(const vs_device_hasher_t *h);

/* On `stream`: zeroes slot `slot`, runs the kernel over [base, base+bytes)
 * and copies the lanes to the slot's pinned host copy. Nothing waits; the
 * memory must stay mapped until the stream has passed the kernel. `base` is
 * 8-byte aligned; `bytes` may be any length, 0 included. Calls the driver
 * directly (never the shim's hooks), so a NULL stream is the legacy
 * stream. CUDA_SUCCESS, CUDA_ERROR_INVALID_VALUE for a slot out of range
 * or an unaligned base, or the driver's error. */
CUresult vs_device_hash_enqueue(vs_device_hasher_t *h, unsigned slot, CUdeviceptr base, uint64_t bytes,
                                CUstream stream);

/* Once `stream` has been synchronised after `vs_device_hash_enqueue`: the
 * finished hash of those `bytes` (`vs_content_hash_final` applied), equal
 * to `vs_content_hash` of the same bytes on the host. */
vs_content_hash_t vs_device_hash_result(const vs_device_hasher_t *h, unsigned slot, uint64_t bytes);

#endif /* VS_DEVICE_HASH_H */
