/* worker.h: the shim's own threads (the offload engine's retire and
 * arrival threads, the stamp log's thread): starting one the first time it
 * is needed, telling a forked child (where it is not there) from the
 * process that started it, and letting it end what it was handed at exit.
 *
 * Under `lock` (the owning module's leaf lock): `vs_worker_owned` is false
 * in a forked child, where the thread is not there (it is marked failed:
 * the caller drops what was handed to it, or does it itself);
 * `vs_worker_start` starts the thread the first time (signals blocked,
 * detached; `without` says in the log what the shim does instead when it
 * cannot) and waits until it runs, which the thread says with
 * `vs_worker_started`. `vs_worker_stop`, at exit, without the lock: lets
 * the thread end what it was handed, for a second at most, and starts no
 * other. The thread ends once `stop` is set and its work is done, and says
 * so with `vs_worker_ended` (which clears `running` and signals
 * `finished`). Each thread's work list, and how it
 * hands work over and waits for it, stay its module's own.
 */
#ifndef VS_WORKER_H
#define VS_WORKER_H

#include <pthread.h>
#include <stdbool.h>
#include <sys/types.h>

typedef struct vs_worker_s {
    pthread_mutex_t lock;
    pthread_cond_t work, finished;
    pthread_t thread;
    pid_t creator; /* the process whose thread it is */
    bool running, failed, stop;
} vs_worker_t;
#define VS_WORKER_INIT                                                                             \
    {                                                                                              \
        .lock = PTHREAD_MUTEX_INITIALIZER, .work = PTHREAD_COND_INITIALIZER,                       \
        .finished = PTHREAD_COND_INITIALIZER                                                       \
    }
bool vs_worker_owned(vs_worker_t *w);
bool vs_worker_start(vs_worker_t *w, void *(*thread_main)(void *), const char *name, const char *without);
void vs_worker_started(vs_worker_t *w);
void vs_worker_ended(vs_worker_t *w);
void vs_worker_stop(vs_worker_t *w);

#endif
