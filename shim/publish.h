/* publish.h: the live snapshot for `vramshim ps/dump/top` (publish.c),
 * published from a thread of its own once the driver is loaded (the top
 * layer registers `vs_publish_start` with `vs_driver_on_load`), removed at
 * exit. Lock: the publisher's, a leaf (internal.h).
 */
#ifndef VS_PUBLISH_H
#define VS_PUBLISH_H

void vs_publish_start(void);
void vs_publish_stop(void);
/* In a forked child: drops the parent's snapshot without touching it (the
 * publisher thread exists only in the parent). */
void vs_publish_forget(void);

#endif /* VS_PUBLISH_H */
