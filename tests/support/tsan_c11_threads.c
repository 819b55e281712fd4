/* C11 threads on POSIX threads, for the ThreadSanitizer build only (make
 * tsan links this file into build/tsan/storage-consumer, nothing else).
 *
 * librdkafka, as built for Debian 12, makes its threads, mutexes and
 * condition variables with C11's thrd_create, mtx_lock, cnd_wait... glibc
 * implements those on its POSIX threads internally, calls ThreadSanitizer
 * cannot see: the ThreadSanitizer of GCC 12 and Clang 14 intercepts
 * pthread_create and pthread_mutex_lock, not their C11 forms. A thread it
 * never saw start crashes the process on its first malloc (ThreadSanitizer
 * has no state for it), and a lock it never saw taken orders nothing, so
 * every hand-over between librdkafka's threads and ours would be reported
 * as a race.
 *
 * These definitions in the executable take precedence over glibc's for
 * every library the process loads, and do what glibc does (the same types:
 * glibc's mtx_t, cnd_t, thrd_t and once_flag are its pthread_mutex_t,
 * pthread_cond_t, pthread_t and pthread_once_t), through the pthread calls
 * ThreadSanitizer intercepts. Only what librdkafka uses is here: a missing
 * one would still resolve to glibc's, unseen, so the list is checked
 * against the library's imports (nm -D) when the library changes. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <threads.h>

_Static_assert(sizeof(mtx_t) == sizeof(pthread_mutex_t), "mtx_t is glibc's pthread_mutex_t");
_Static_assert(sizeof(cnd_t) == sizeof(pthread_cond_t), "cnd_t is glibc's pthread_cond_t");
_Static_assert(sizeof(thrd_t) == sizeof(pthread_t), "thrd_t is glibc's pthread_t");
_Static_assert(sizeof(once_flag) == sizeof(pthread_once_t), "once_flag is glibc's pthread_once_t");

/* glibc's mapping of a pthread result to a C11 one. */
static int thrd_result(int err)
{
    switch (err) {
    case 0: return thrd_success;
    case ENOMEM: return thrd_nomem;
    case ETIMEDOUT: return thrd_timedout;
    case EBUSY: return thrd_busy;
    default: return thrd_error;
    }
}

typedef struct {
    thrd_start_t func;
    void *arg;
} start_t;

static void *thread_start(void *p)
{
    start_t s = *(start_t *)p;
    free(p);
    return (void *)(intptr_t)s.func(s.arg);
}

int thrd_create(thrd_t *thr, thrd_start_t func, void *arg)
{
    start_t *s = malloc(sizeof *s);
    if (!s) return thrd_nomem;
    *s = (start_t){func, arg};
    int err = pthread_create(thr, NULL, thread_start, s);
    if (err) free(s);
    return err == EAGAIN ? thrd_nomem : thrd_result(err);
}

int thrd_join(thrd_t thr, int *res)
{
    void *ret;
    int err = pthread_join(thr, &ret);
    if (!err && res) *res = (int)(intptr_t)ret;
    return thrd_result(err);
}

thrd_t thrd_current(void) { return pthread_self(); }

int mtx_init(mtx_t *m, int type)
{
    pthread_mutexattr_t attr;
    int kind;
    switch (type) {
    case mtx_plain:
    case mtx_timed:
        kind = PTHREAD_MUTEX_NORMAL;
        break;
    case mtx_plain | mtx_recursive:
    case mtx_timed | mtx_recursive:
        kind = PTHREAD_MUTEX_RECURSIVE;
        break;
    default:
        return thrd_error;
    }
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, kind);
    int err = pthread_mutex_init((pthread_mutex_t *)m, &attr);
    pthread_mutexattr_destroy(&attr);
    return thrd_result(err);
}

int mtx_lock(mtx_t *m) { return thrd_result(pthread_mutex_lock((pthread_mutex_t *)m)); }
int mtx_unlock(mtx_t *m) { return thrd_result(pthread_mutex_unlock((pthread_mutex_t *)m)); }
void mtx_destroy(mtx_t *m) { pthread_mutex_destroy((pthread_mutex_t *)m); }

int cnd_init(cnd_t *c) { return thrd_result(pthread_cond_init((pthread_cond_t *)c, NULL)); }
int cnd_signal(cnd_t *c) { return thrd_result(pthread_cond_signal((pthread_cond_t *)c)); }
int cnd_broadcast(cnd_t *c) { return thrd_result(pthread_cond_broadcast((pthread_cond_t *)c)); }
void cnd_destroy(cnd_t *c) { pthread_cond_destroy((pthread_cond_t *)c); }

int cnd_wait(cnd_t *c, mtx_t *m)
{
    return thrd_result(pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m));
}

/* TIME_UTC is CLOCK_REALTIME, the clock of a default pthread condition. */
int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict until)
{
    return thrd_result(pthread_cond_timedwait((pthread_cond_t *)c, (pthread_mutex_t *)m, until));
}

void call_once(once_flag *flag, void (*func)(void)) { pthread_once((pthread_once_t *)flag, func); }
