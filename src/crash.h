/* crash — a backtrace on stderr when the process dies of a fault.
 *
 * A crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT: librdkafka's assertions
 * abort) writes one log line naming the signal, then the stack of the thread
 * that crashed, one frame a line as glibc's backtrace_symbols_fd prints it
 * ("binary(+0xOFFSET)[0xADDRESS]"; `addr2line -f -i -e BINARY 0xOFFSET` names
 * the function and line), and then dies of the same signal as it would have
 * without the handler: the same exit status, a core dump where the system
 * keeps them (DESIGN.md: Logs). The handler writes with write(2) only and
 * allocates nothing.
 *
 * Sanitizer builds keep their own, better report: there this does nothing. */
#ifndef STORAGE_CRASH_H
#define STORAGE_CRASH_H

#include "log.h"

/* Call once, after log_configure and before any thread starts. */
void crash_report_install(log_format_t format);

/* Call first thing on a thread created with every signal blocked, as
 * librdkafka creates its own: a fault in a thread that blocks its signal is
 * not delivered to the handler, the kernel kills the process at once and
 * nothing is written. This lets the fault signals through again (in every
 * build: a sanitizer's own report needs them as well). */
void crash_report_thread(void);

#endif
