/* worker.c: the shim's own threads' start, fork check and stop (worker.h).
 * Locks: `vs_worker_t.lock` is its owning module's leaf lock.
 */
#include "worker.h"

#include <errno.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

bool vs_worker_owned(vs_worker_t *w)
{
    if (w->creator == 0 || w->creator == getpid())
        return true;
    w->running = false;
    w->failed = true;
    return false;
}

bool vs_worker_start(vs_worker_t *w, void *(*thread_main)(void *), const char *name, const char *without)
{
    if (!vs_worker_owned(w))
        return false;
    if (w->running || w->failed)
        return w->running;
    sigset_t all, old;
    /* The program's signals are never delivered to a thread it does not
     * know about. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&w->thread, NULL, thread_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        w->failed = true;
        vs_log(VS_LOG_WARN, "cannot start the shim's thread %s (%s): %s", name, strerror(rc), without);
        return false;
    }
    pthread_setname_np(w->thread, name);
    /* Never joined: at exit it is waited for a second at most
     * (`vs_worker_stop`). */
    pthread_detach(w->thread);
    w->creator = getpid();
    while (!w->running)
        pthread_cond_wait(&w->finished, &w->lock);
    return true;
}

void vs_worker_started(vs_worker_t *w)
{
    w->running = true;
    pthread_cond_broadcast(&w->finished);
}

void vs_worker_ended(vs_worker_t *w)
{
    w->running = false;
    pthread_cond_broadcast(&w->finished);
}

void vs_worker_stop(vs_worker_t *w)
{
    pthread_mutex_lock(&w->lock);
    if (!w->running || w->creator != getpid()) {
        pthread_mutex_unlock(&w->lock);
        return;
    }
    /* What was handed over is made first, for a while at most: the
     * process is exiting, and a driver that its own exit already took down
     * must not hold it up. No thread is started after this. */
    w->stop = true;
    w->failed = true;
    pthread_cond_signal(&w->work);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    while (w->running)
        if (pthread_cond_timedwait(&w->finished, &w->lock, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&w->lock);
}
