#include "crash.h"

#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/timestamp.h"

/* gcc says __SANITIZE_ADDRESS__ / __SANITIZE_THREAD__; clang answers
 * __has_feature (and only newer clangs define the thread one). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CRASH_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CRASH_SANITIZED 1
#endif
#endif

static const struct {
    int sig;
    const char *name;
} crash_signals[] = {
    {SIGSEGV, "SIGSEGV"}, {SIGBUS, "SIGBUS"}, {SIGFPE, "SIGFPE"}, {SIGILL, "SIGILL"}, {SIGABRT, "SIGABRT"},
};

void crash_report_thread(void)
{
    sigset_t set;
    sigemptyset(&set);
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++) sigaddset(&set, crash_signals[i].sig);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

#ifndef CRASH_SANITIZED

#define CRASH_FRAMES_MAX 64

static log_format_t crash_format;

static void put(const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static void on_crash(int sig)
{
    const char *name = "a fatal signal";
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
        if (crash_signals[i].sig == sig) name = crash_signals[i].name;

    /* The log's own time format, by hand: gmtime_r and strftime are not
     * async-signal-safe. */
    struct timespec ts;
    char when[TIMESTAMP_TEXT_SIZE];
    clock_gettime(CLOCK_REALTIME, &ts);
    timestamp_format((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000, when);
    when[10] = 'T';
    when[23] = 'Z';
    when[24] = '\0';

    const char *what = "; the stack of the crashing thread follows, a frame a line "
                       "(addr2line -f -i -e BINARY 0xOFFSET names each)";
    if (crash_format == LOG_FORMAT_JSON) {
        put("{\"ts\":\"");
        put(when);
        put("\",\"level\":\"error\",\"component\":\"main\",\"msg\":\"crashed on ");
        put(name);
        put(what);
        put("\"}\n");
    } else {
        put(when);
        put(" error [main] crashed on ");
        put(name);
        put(what);
        put("\n");
    }
    void *frames[CRASH_FRAMES_MAX];
    int n = backtrace(frames, CRASH_FRAMES_MAX);
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
    /* SA_RESETHAND gave the signal back its default action, and SA_NODEFER
     * lets it through now: the process dies of it. */
    raise(sig);
}

void crash_report_install(log_format_t format)
{
    crash_format = format;
    /* backtrace() loads libgcc's unwinder on its first call, which is not
     * safe inside a signal handler: load it now. */
    void *frame;
    backtrace(&frame, 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_crash;
    sa.sa_flags = SA_RESETHAND | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof crash_signals / sizeof crash_signals[0]; i++)
        sigaction(crash_signals[i].sig, &sa, NULL);
}

#else

void crash_report_install(log_format_t format)
{
    (void)format;
}

#endif
