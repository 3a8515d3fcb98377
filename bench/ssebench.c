/* A streamed-completion server and load client for bench/endpoints.py (loopback only).
 *
 * Debian 12 packages no load tool that times a streamed answer's first event, so this
 * is one, compiled by the bench at run time:  gcc -O2 -o ssebench ssebench.c
 *
 *   ssebench serve PORT TOKENS INTERVAL_MS
 *       a stand-in for an OpenAI-compatible model server: every POST is answered with
 *       server-sent events in chunked encoding, one `data: {...}` event per token, the
 *       first at once and then one every INTERVAL_MS, TOKENS in all, then
 *       `data: [DONE]`; keep-alive. One thread, epoll: it paces hundreds of streams
 *       with a fraction of a core, so it is never what a proxy in front of it waits on.
 *   ssebench load PORT PATH CONNS SECONDS [HEADER]...
 *       CONNS keep-alive connections, each sending POST PATH (a small chat request)
 *       again as soon as its stream ends, for SECONDS. Each stream is timed with
 *       clock_gettime(MONOTONIC) from the request's write: to its first event (time to
 *       first token) and to its end. Prints one line of key=value: streams, errors, and
 *       p50/p95 of both in µs. A stream that is not 200 or lacks [DONE] is an error.
 *
 * HEADER is "Name: value" (Host, Authorization...).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUFSZ (64 * 1024)
#define MAXCONN 4096

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

static void nonblocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

static void nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static int send_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) { usleep(50); continue; }
        if (n <= 0) return -1;
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

/* ---- serve ---------------------------------------------------------------------- */

struct stream {
    int fd;
    char in[BUFSZ];
    size_t have;
    int sent;      /* tokens sent; -1: waiting for a request */
    double due;    /* when the next token is due (µs) */
};

static struct stream *streams[MAXCONN];

static int chunk(int fd, const char *event) {
    char buf[512];
    int len = (int)strlen(event);
    int n = snprintf(buf, sizeof buf, "%x\r\n%s\r\n", len, event);
    return send_all(fd, buf, (size_t)n);
}

/* A whole request in the buffer (head and Content-Length body)? Consume it. */
static int take_request(struct stream *s) {
    s->in[s->have] = 0;
    char *end = strstr(s->in, "\r\n\r\n");
    if (!end) return 0;
    size_t head = (size_t)(end - s->in) + 4, body = 0;
    char *cl = strcasestr(s->in, "\r\ncontent-length:");
    if (cl && cl < end) body = (size_t)strtoul(cl + 17, NULL, 10);
    if (s->have < head + body) return 0;
    memmove(s->in, s->in + head + body, s->have - head - body);
    s->have -= head + body;
    return 1;
}

static int serve(int port, int tokens, int interval_ms) {
    int lfd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(lfd, (struct sockaddr *)&a, sizeof a) || listen(lfd, 1024)) { perror("bind"); return 1; }
    nonblocking(lfd);
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd}, evs[256];
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    static const char head[] =
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
        "Transfer-Encoding: chunked\r\n\r\n";
    static const char token[] =
        "data: {\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,"
        "\"delta\":{\"content\":\" word\"}}]}\n\n";
    for (;;) {
        double t = now_us(), next = t + 1e6;
        for (int i = 0; i < MAXCONN; i++) {
            struct stream *s = streams[i];
            if (!s || s->sent < 0) continue;
            if (s->due <= t) {
                int bad = 0;
                if (s->sent < tokens) {
                    bad = chunk(s->fd, token);
                    s->sent++;
                    s->due += interval_ms * 1000.0;
                }
                if (!bad && s->sent >= tokens) {
                    bad = chunk(s->fd, "data: [DONE]\n\n") || send_all(s->fd, "0\r\n\r\n", 5);
                    s->sent = -1;
                    if (!bad && take_request(s)) {  /* the next one was already sent */
                        bad = send_all(s->fd, head, sizeof head - 1);
                        s->sent = 0;
                        s->due = now_us();
                    }
                }
                if (bad) { close(s->fd); free(s); streams[i] = NULL; continue; }
            }
            if (s->sent >= 0 && s->due < next) next = s->due;
        }
        /* rounded up: no spinning in the last millisecond before a token is due */
        int wait_ms = (int)((next - now_us()) / 1000 + 0.999);
        int n = epoll_wait(ep, evs, 256, wait_ms < 0 ? 0 : wait_ms);
        for (int k = 0; k < n; k++) {
            int fd = evs[k].data.fd;
            if (fd == lfd) {
                int c;
                while ((c = accept(lfd, NULL, NULL)) >= 0) {
                    if (c >= MAXCONN) { close(c); continue; }
                    nonblocking(c);
                    nodelay(c);
                    streams[c] = calloc(1, sizeof(struct stream));
                    streams[c]->fd = c;
                    streams[c]->sent = -1;
                    struct epoll_event ce = {.events = EPOLLIN, .data.fd = c};
                    epoll_ctl(ep, EPOLL_CTL_ADD, c, &ce);
                }
                continue;
            }
            struct stream *s = streams[fd];
            if (!s) continue;
            ssize_t got = read(fd, s->in + s->have, BUFSZ - 1 - s->have);
            if (got <= 0) {
                if (got < 0 && errno == EAGAIN) continue;
                epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
                close(fd); free(s); streams[fd] = NULL;
                continue;
            }
            s->have += (size_t)got;
            if (s->sent < 0 && take_request(s)) {
                if (send_all(fd, head, sizeof head - 1)) continue;
                s->sent = 0;
                s->due = now_us();
            }
        }
    }
}

/* ---- load ----------------------------------------------------------------------- */

struct client {
    int fd;
    char buf[BUFSZ];
    size_t have;
    double sent_at, first_at;
    int ok;
};

static int cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) {
    if (n == 0) return -1;
    return v[(int)(p * (n - 1))];
}

static char request[8192];
static size_t request_len;

static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) { close(fd); return -1; }
    nodelay(fd);
    nonblocking(fd);
    return fd;
}

/* The next request on the client's connection, timed from now. */
static int send_next(struct client *c) {
    c->have = 0;
    c->first_at = 0;
    c->sent_at = now_us();
    return send_all(c->fd, request, request_len);
}

/* A new connection for client number idx, watched by ep, and its first request. */
static int open_and_send(struct client *c, int ep, uint32_t idx, int port) {
    c->fd = connect_to(port);
    if (c->fd < 0) return -1;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = idx};
    epoll_ctl(ep, EPOLL_CTL_ADD, c->fd, &ev);
    return send_next(c);
}

/* The client's connection closed and opened again (after an error), its request resent. */
static int reopen(struct client *c, int ep, uint32_t idx, int port) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    return open_and_send(c, ep, idx, port);
}

static int load(int port, const char *path, int conns, double seconds, char **headers, int nh) {
    static const char body[] =
        "{\"model\":\"m\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}]}";
    int off = snprintf(request, sizeof request,
                       "POST %s HTTP/1.1\r\nContent-Type: application/json\r\n"
                       "Content-Length: %zu\r\n", path, sizeof body - 1);
    for (int i = 0; i < nh; i++) off += snprintf(request + off, sizeof request - off, "%s\r\n", headers[i]);
    off += snprintf(request + off, sizeof request - off, "\r\n%s", body);
    request_len = (size_t)off;

    size_t cap = 1 << 20;
    double *ttft = malloc(cap * sizeof(double)), *total = malloc(cap * sizeof(double));
    int done = 0, errors = 0;
    int ep = epoll_create1(0);
    struct client *cs = calloc((size_t)conns, sizeof(struct client));
    for (int i = 0; i < conns; i++) {
        if (open_and_send(&cs[i], ep, (uint32_t)i, port)) { fprintf(stderr, "connect failed\n"); return 1; }
    }
    double stop = now_us() + seconds * 1e6;
    struct epoll_event evs[256];
    while (now_us() < stop) {
        int n = epoll_wait(ep, evs, 256, 100);
        for (int k = 0; k < n; k++) {
            struct client *c = &cs[evs[k].data.u32];
            ssize_t got = read(c->fd, c->buf + c->have, BUFSZ - 1 - c->have);
            if (got <= 0) {
                if (got < 0 && errno == EAGAIN) continue;
                errors++;  /* closed mid-stream: reconnect and go on */
                if (reopen(c, ep, evs[k].data.u32, port)) return 1;
                continue;
            }
            double t = now_us();
            c->have += (size_t)got;
            c->buf[c->have] = 0;
            if (!c->first_at && strstr(c->buf, "data: ")) c->first_at = t;
            char *end = strstr(c->buf, "data: [DONE]");
            if (end && strstr(end, "\r\n0\r\n\r\n")) {
                int ok = strncmp(c->buf, "HTTP/1.1 200", 12) == 0;
                if (ok && (size_t)done < cap) {
                    ttft[done] = c->first_at - c->sent_at;
                    total[done] = t - c->sent_at;
                    done++;
                } else if (!ok) errors++;
                if (send_next(c)) return 1;
            } else if (c->have >= BUFSZ - 1) {
                fprintf(stderr, "a stream over %d bytes: use fewer tokens\n", BUFSZ);
                return 1;
            } else if (strncmp(c->buf, "HTTP/1.1 ", 9) == 0 && strncmp(c->buf, "HTTP/1.1 200", 12) && strstr(c->buf, "\r\n\r\n")) {
                errors++;  /* refused (401, 429, 503...): counted, the connection reopened */
                if (reopen(c, ep, evs[k].data.u32, port)) return 1;
            }
        }
    }
    qsort(ttft, (size_t)done, sizeof(double), cmp);
    qsort(total, (size_t)done, sizeof(double), cmp);
    printf("streams=%d errors=%d ttft_p50=%.0f ttft_p95=%.0f total_p50=%.0f total_p95=%.0f\n",
           done, errors, pct(ttft, done, 0.5), pct(ttft, done, 0.95), pct(total, done, 0.5),
           pct(total, done, 0.95));
    return 0;
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc >= 5 && !strcmp(argv[1], "serve")) return serve(atoi(argv[2]), atoi(argv[3]), atoi(argv[4]));
    if (argc >= 6 && !strcmp(argv[1], "load"))
        return load(atoi(argv[2]), argv[3], atoi(argv[4]), atof(argv[5]), argv + 6, argc - 6);
    fprintf(stderr, "usage: ssebench serve PORT TOKENS INTERVAL_MS | load PORT PATH CONNS SECONDS [HEADER]...\n");
    return 2;
}
