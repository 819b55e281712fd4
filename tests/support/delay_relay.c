/*
 * delay-relay — a TCP relay that can slow a connection down, for the
 * reliability suite's network faults (tests/reliability/scenarios/network.sh).
 * The kernel here has no `tc netem`: a slow PostgreSQL is this relay in front
 * of it.
 *
 *   delay-relay LISTEN_PORT TARGET_PORT DELAY_FILE
 *
 * Listens on 127.0.0.1:LISTEN_PORT and forwards each connection to
 * 127.0.0.1:TARGET_PORT. Before passing on what it read, in either
 * direction, it sleeps the number of milliseconds DELAY_FILE holds (read
 * again each time: no file or 0, no delay), so a delay of D adds 2 D to
 * every round trip. When either side ends or fails, both are closed, so the
 * far end learns of it as it would without the relay.
 *
 * One child process per connection; a child dies with the relay
 * (PR_SET_PDEATHSIG), so stopping the relay ends its connections too.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static const char *delay_file;

/* The delay now, in milliseconds. */
static long delay_ms(void)
{
    FILE *f = fopen(delay_file, "r");
    long ms = 0;
    if (f) {
        if (fscanf(f, "%ld", &ms) != 1 || ms < 0) ms = 0;
        fclose(f);
    }
    return ms;
}

static struct sockaddr_in loopback(int port)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
}

/* Copy whatever is readable on `from` to `to`, after the delay. 0 while the
 * connection lasts, -1 once `from` ended or either side failed. */
static int pass(int from, int to)
{
    char buf[65536];
    ssize_t n = read(from, buf, sizeof buf);
    if (n <= 0) return -1;
    long ms = delay_ms();
    if (ms > 0) nanosleep(&(struct timespec){ms / 1000, (ms % 1000) * 1000000L}, NULL);
    for (ssize_t off = 0; off < n;) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w <= 0) return -1;
        off += w;
    }
    return 0;
}

/* A child's connection: relay both ways until one side ends. */
static void serve(int client, int target_port)
{
    struct sockaddr_in to = loopback(target_port);
    int one = 1, server = socket(AF_INET, SOCK_STREAM, 0);
    if (server < 0 || connect(server, (struct sockaddr *)&to, sizeof to) != 0) _exit(1);
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct pollfd p[2] = {{client, POLLIN, 0}, {server, POLLIN, 0}};
    for (;;) {
        if (poll(p, 2, -1) < 0) _exit(1);
        if (p[0].revents && pass(client, server)) break;
        if (p[1].revents && pass(server, client)) break;
    }
    _exit(0); /* closing both sockets tells both ends */
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: delay-relay LISTEN_PORT TARGET_PORT DELAY_FILE\n");
        return 2;
    }
    int listen_port = atoi(argv[1]), target_port = atoi(argv[2]), one = 1;
    delay_file = argv[3];
    signal(SIGCHLD, SIG_IGN); /* children reap themselves */
    struct sockaddr_in at = loopback(listen_port);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0 || setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
        bind(l, (struct sockaddr *)&at, sizeof at) != 0 || listen(l, 64) != 0) {
        perror("delay-relay: listen");
        return 1;
    }
    pid_t parent = getpid();
    for (;;) {
        int c = accept(l, NULL, NULL);
        if (c < 0) continue;
        pid_t pid = fork();
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM);
            if (getppid() != parent) _exit(0); /* the relay died before prctl */
            close(l);
            serve(c, target_port);
        }
        close(c);
    }
}
