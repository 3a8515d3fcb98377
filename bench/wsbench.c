/* WebSocket echo server and latency/hold/listen clients for bench/proxy_ws.py and
 * bench/load_live.py (loopback only).
 *
 * Debian 12 has no C WebSocket load tool (tcpkali and websocat are not packaged), so
 * this is one, compiled by the bench at run time:  gcc -O2 -o wsbench wsbench.c
 *
 *   wsbench serve PORT
 *       echo server: RFC 6455 handshake, every text/binary frame sent back, ping
 *       answered; one thread, epoll.
 *   wsbench rtt PORT PATH COUNT SIZE [HEADER]...
 *       one connection, COUNT sequential round trips of a SIZE-byte masked text frame
 *       (after 200 discarded warm-up ones), each timed with clock_gettime(MONOTONIC);
 *       the echo is checked byte for byte.  Prints one line of key=value (µs).
 *   wsbench hold PORT PATH CONNS SECONDS INTERVAL_MS SIZE [HEADER]... [-- HEADER...]...
 *       CONNS connections opened (connection i with header set i % sets, the sets
 *       separated by "--"), then for SECONDS each sends a SIZE-byte frame every
 *       INTERVAL_MS (staggered) and checks its echo.  Prints "open N failed F" once all
 *       handshakes are done, then one line of counters and echo latencies.
 *   wsbench listen PORT PATH CONNS SECONDS [HEADER]... [-- HEADER...]...
 *       CONNS connections opened (header sets as for hold: one per user, say), then for
 *       SECONDS (or until SIGTERM) only listens, pings answered.  Prints "open N failed F"
 *       once all handshakes are done, then one line per text message received:
 *       "m CONN ARRIVAL ID OWNER" (ARRIVAL: CLOCK_REALTIME in seconds, read right after the
 *       read() that completed the frame; ID and OWNER: the numbers after the payload's
 *       "id" and "owner_id" keys, -1 if absent), then one line of counters.
 *
 * HEADER is "Name: value" (Host, Cookie, Origin...).  The server's
 * Sec-WebSocket-Accept is verified, so a proxy that answered anything but a real
 * WebSocket upgrade fails the run.
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
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define BUFSZ (256 * 1024)

/* ---- SHA-1 and base64, for Sec-WebSocket-Accept --------------------------------- */
static uint32_t rol(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

static void sha1(const unsigned char *msg, size_t len, unsigned char out[20]) {
    uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
    size_t total = ((len + 8) / 64 + 1) * 64;
    unsigned char *m = calloc(total, 1);
    memcpy(m, msg, len);
    m[len] = 0x80;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++) m[total - 1 - i] = (unsigned char)(bits >> (8 * i));
    for (size_t off = 0; off < total; off += 64) {
        uint32_t w[80];
        for (int i = 0; i < 16; i++)
            w[i] = (uint32_t)m[off + 4 * i] << 24 | (uint32_t)m[off + 4 * i + 1] << 16 |
                   (uint32_t)m[off + 4 * i + 2] << 8 | m[off + 4 * i + 3];
        for (int i = 16; i < 80; i++) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
        uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
        for (int i = 0; i < 80; i++) {
            uint32_t f, k;
            if (i < 20) f = (b & c) | (~b & d), k = 0x5A827999;
            else if (i < 40) f = b ^ c ^ d, k = 0x6ED9EBA1;
            else if (i < 60) f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
            else f = b ^ c ^ d, k = 0xCA62C1D6;
            uint32_t t = rol(a, 5) + f + e + k + w[i];
            e = d, d = c, c = rol(b, 30), b = a, a = t;
        }
        h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
    }
    free(m);
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++) out[4 * i + j] = (unsigned char)(h[i] >> (24 - 8 * j));
}

static void base64(const unsigned char *in, size_t len, char *out) {
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < len ? (uint32_t)in[i + 1] << 8 : 0) |
                     (i + 2 < len ? in[i + 2] : 0);
        out[o++] = t[v >> 18 & 63];
        out[o++] = t[v >> 12 & 63];
        out[o++] = i + 1 < len ? t[v >> 6 & 63] : '=';
        out[o++] = i + 2 < len ? t[v & 63] : '=';
    }
    out[o] = 0;
}

static void accept_key(const char *key, char out[32]) {
    char buf[256];
    unsigned char digest[20];
    snprintf(buf, sizeof buf, "%s%s", key, GUID);
    sha1((unsigned char *)buf, strlen(buf), digest);
    base64(digest, 20, out);
}

/* The value of header `name` in the head `req` (NUL-terminated), copied into out. */
static int header(const char *req, const char *name, char *out, size_t outlen) {
    size_t n = strlen(name);
    for (const char *p = strstr(req, "\r\n"); p && p[2]; p = strstr(p + 2, "\r\n")) {
        const char *line = p + 2;
        if (strncasecmp(line, name, n) == 0 && line[n] == ':') {
            const char *v = line + n + 1, *end = strstr(v, "\r\n");
            while (*v == ' ') v++;
            size_t len = end ? (size_t)(end - v) : strlen(v);
            if (len >= outlen) return -1;
            memcpy(out, v, len);
            out[len] = 0;
            return 0;
        }
    }
    return -1;
}

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* A parsed frame in buf[0..len): returns its total size, 0 if incomplete. */
static size_t frame(const unsigned char *buf, size_t len, int *opcode, size_t *payload_off,
                    size_t *payload_len, const unsigned char **mask) {
    if (len < 2) return 0;
    size_t pl = buf[1] & 0x7f, off = 2;
    if (pl == 126) {
        if (len < 4) return 0;
        pl = (size_t)buf[2] << 8 | buf[3];
        off = 4;
    } else if (pl == 127) {
        if (len < 10) return 0;
        pl = 0;
        for (int i = 0; i < 8; i++) pl = pl << 8 | buf[2 + i];
        off = 10;
    }
    *mask = NULL;
    if (buf[1] & 0x80) {
        if (len < off + 4) return 0;
        *mask = buf + off;
        off += 4;
    }
    if (len < off + pl) return 0;
    *opcode = buf[0] & 0x0f;
    *payload_off = off;
    *payload_len = pl;
    return off + pl;
}

/* Header of a frame of `len` bytes into out; returns its size. */
static size_t frame_header(unsigned char *out, int b0, size_t len, int masked) {
    size_t n = 0;
    out[n++] = (unsigned char)b0;
    int m = masked ? 0x80 : 0;
    if (len < 126) out[n++] = (unsigned char)(m | len);
    else if (len < 65536) out[n++] = (unsigned char)(m | 126), out[n++] = len >> 8, out[n++] = len & 255;
    else {
        out[n++] = (unsigned char)(m | 127);
        for (int i = 7; i >= 0; i--) out[n++] = (unsigned char)(len >> (8 * i));
    }
    return n;
}

/* ---- server ---------------------------------------------------------------------- */
struct sconn {
    int fd, open;
    size_t inlen, outlen;
    unsigned char in[BUFSZ], out[BUFSZ];
};

static int flush_out(struct sconn *c) {
    size_t done = 0;
    while (done < c->outlen) {
        ssize_t w = write(c->fd, c->out + done, c->outlen - done);
        if (w < 0 && errno == EAGAIN) break;
        if (w <= 0) return -1;
        done += (size_t)w;
    }
    memmove(c->out, c->out + done, c->outlen - done);
    c->outlen -= done;
    return 0;
}

static int queue(struct sconn *c, const void *data, size_t len) {
    if (c->outlen + len > BUFSZ) return -1;
    memcpy(c->out + c->outlen, data, len);
    c->outlen += len;
    return 0;
}

/* Handle what is in c->in; -1 closes the connection. */
static int serve_input(struct sconn *c) {
    if (!c->open) {
        unsigned char *end = memmem(c->in, c->inlen, "\r\n\r\n", 4);
        if (!end) return c->inlen == BUFSZ ? -1 : 0;
        size_t head = (size_t)(end - c->in) + 4;
        char req[8192], key[100], acc[32], resp[256];
        if (head >= sizeof req) return -1;
        memcpy(req, c->in, head);
        req[head] = 0;
        if (header(req, "Sec-WebSocket-Key", key, sizeof key) < 0) {
            const char *bad = "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            queue(c, bad, strlen(bad));
            flush_out(c);
            return -1;
        }
        accept_key(key, acc);
        int n = snprintf(resp, sizeof resp,
                         "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                         "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n\r\n",
                         acc);
        queue(c, resp, (size_t)n);
        memmove(c->in, c->in + head, c->inlen - head);
        c->inlen -= head;
        c->open = 1;
    }
    size_t used = 0;
    for (;;) {
        int op;
        size_t po, pl;
        const unsigned char *mask;
        size_t n = frame(c->in + used, c->inlen - used, &op, &po, &pl, &mask);
        if (!n) break;
        unsigned char *p = c->in + used + po, hdr[10];
        if (mask)
            for (size_t i = 0; i < pl; i++) p[i] ^= mask[i & 3];
        if (op == 8) {  // close: answer it, then hang up
            size_t h = frame_header(hdr, 0x88, 0, 0);
            queue(c, hdr, h);
            flush_out(c);
            return -1;
        }
        int b0 = op == 9 ? 0x8A : c->in[used];  // ping -> pong, anything else echoed
        if (op != 10) {
            size_t h = frame_header(hdr, b0, pl, 0);
            if (queue(c, hdr, h) < 0 || queue(c, p, pl) < 0) return -1;
        }
        used += n;
    }
    memmove(c->in, c->in + used, c->inlen - used);
    c->inlen -= used;
    if (c->inlen == BUFSZ) return -1;  // one frame larger than the buffer
    return flush_out(c);
}

static int serve(int port) {
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) < 0 || listen(ls, 4096) < 0) {
        perror("wsbench serve");
        return 1;
    }
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            struct sconn *c = evs[i].data.ptr;
            if (!c) {
                int fd;
                while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct sconn *nc = calloc(1, sizeof *nc);
                    nc->fd = fd;
                    struct epoll_event e = {.events = EPOLLIN, .data.ptr = nc};
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &e);
                }
                continue;
            }
            int dead = 0;
            if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
                ssize_t r = read(c->fd, c->in + c->inlen, BUFSZ - c->inlen);
                if (r > 0) {
                    c->inlen += (size_t)r;
                    dead = serve_input(c) < 0;
                } else if (r == 0 || errno != EAGAIN) dead = 1;
            }
            if (!dead && (evs[i].events & EPOLLOUT)) dead = flush_out(c) < 0;
            if (dead) {
                close(c->fd);  // closing removes it from the epoll set
                free(c);
                continue;
            }
            struct epoll_event e = {.events = EPOLLIN | (c->outlen ? EPOLLOUT : 0), .data.ptr = c};
            epoll_ctl(ep, EPOLL_CTL_MOD, c->fd, &e);
        }
    }
}

/* ---- clients --------------------------------------------------------------------- */
static int wsconnect(int port, const char *path, char **headers, int nheaders) {
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    /* Longer than HAProxy's "timeout queue" (30 s), so its own answer is seen. */
    struct timeval tv = {.tv_sec = 40};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    unsigned char raw[16];
    char key[32], want[32], req[8192], got[64];
    for (int i = 0; i < 16; i++) raw[i] = (unsigned char)rand();
    base64(raw, 16, key);
    accept_key(key, want);
    size_t len = 0;
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\n", path), has_host = 0;
    for (int i = 0; i < nheaders; i++) {
        has_host |= strncasecmp(headers[i], "Host:", 5) == 0;
        n += snprintf(req + n, sizeof req - n, "%s\r\n", headers[i]);
    }
    if (!has_host) n += snprintf(req + n, sizeof req - n, "Host: 127.0.0.1:%d\r\n", port);
    n += snprintf(req + n, sizeof req - n,
                  "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                  "Sec-WebSocket-Key: %s\r\n\r\n",
                  key);
    if (write(fd, req, (size_t)n) != n) goto fail;
    /* Read the answer's head one byte at a time: nothing after it may be swallowed. */
    while (len < sizeof req - 1) {
        if (read(fd, req + len, 1) != 1) goto fail;
        len++;
        if (len >= 4 && memcmp(req + len - 4, "\r\n\r\n", 4) == 0) break;
    }
    req[len] = 0;
    if (strncmp(req, "HTTP/1.1 101", 12) != 0) goto fail;
    if (header(req, "Sec-WebSocket-Accept", got, sizeof got) < 0 || strcmp(got, want)) goto fail;
    return fd;
fail:
    if (!len) snprintf(req, sizeof req, "no answer (%s)", strerror(errno));
    req[strcspn(req, "\r\n")] = 0;
    fprintf(stderr, "wsbench: handshake failed: %s\n", req);
    close(fd);
    return -1;
}

/* A masked text frame carrying payload into out; returns its size. */
static size_t masked_frame(unsigned char *out, const unsigned char *payload, size_t len) {
    size_t h = frame_header(out, 0x81, len, 1);
    unsigned char *mask = out + h;
    for (int i = 0; i < 4; i++) mask[i] = (unsigned char)rand();
    for (size_t i = 0; i < len; i++) out[h + 4 + i] = payload[i] ^ mask[i & 3];
    return h + 4 + len;
}

static void make_payload(unsigned char *p, size_t size) {
    /* A Jupyter-ish JSON text message of `size` bytes. */
    const char *s = "{\"header\":{\"msg_type\":\"execute_request\",\"msg_id\":\"";
    for (size_t i = 0; i < size; i++) p[i] = i < strlen(s) ? (unsigned char)s[i] : 'a' + i % 26;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print_percentiles(double *v, size_t n) {
    if (!n) {
        printf(" samples=0\n");
        return;
    }
    qsort(v, n, sizeof *v, cmp_double);
    double sum = 0;
    for (size_t i = 0; i < n; i++) sum += v[i];
#define PCT(q) v[(size_t)((q) * (n - 1))]
    printf(" samples=%zu min=%.1f p50=%.1f p90=%.1f p99=%.1f p999=%.1f max=%.1f mean=%.1f\n", n,
           v[0], PCT(0.5), PCT(0.9), PCT(0.99), PCT(0.999), v[n - 1], sum / n);
}

static int rtt(int port, const char *path, long count, size_t size, char **h, int nh) {
    int fd = wsconnect(port, path, h, nh);
    if (fd < 0) {
        printf("errors=1 handshake=failed\n");
        return 1;
    }
    unsigned char *payload = malloc(size), *out = malloc(size + 14), *in = malloc(BUFSZ);
    make_payload(payload, size);
    double *lat = malloc(sizeof(double) * (size_t)count);
    long warmup = 200, errors = 0;
    double start = 0;
    for (long i = 0; i < warmup + count; i++) {
        if (i == warmup) start = now_us();
        size_t n = masked_frame(out, payload, size), len = 0, fl = 0, po = 0, pl = 0;
        int op = 0;
        const unsigned char *mask;
        double t0 = now_us();
        if (write(fd, out, n) != (ssize_t)n) {
            errors++;
            break;
        }
        while (!(fl = frame(in, len, &op, &po, &pl, &mask))) {
            ssize_t r = read(fd, in + len, BUFSZ - len);
            if (r <= 0) break;
            len += (size_t)r;
        }
        double t1 = now_us();
        if (!fl || fl != len || op != 1 || pl != size || memcmp(in + po, payload, size)) {
            errors++;
            break;
        }
        if (i >= warmup) lat[i - warmup] = t1 - t0;
    }
    double wall = now_us() - start;
    long done = errors ? 0 : count;
    printf("errors=%ld wall_per_rt=%.1f", errors, done ? wall / done : 0.0);
    print_percentiles(lat, (size_t)done);
    close(fd);
    return errors != 0;
}

struct cconn {
    int fd, pending;
    double next, sent;
    size_t len;
    unsigned char in[4096];
};

static int hold(int port, const char *path, int conns, double seconds, double interval_ms,
                size_t size, char **h, int nh) {
    struct cconn *c = calloc((size_t)conns, sizeof *c);
    int failed = 0, open = 0, nsets = 0, start[1024], count[1024];
    /* Header sets separated by "--": connection i uses set i % nsets. */
    for (int i = 0; i <= nh; i++) {
        if (i == nh || !strcmp(h[i], "--")) {
            if (nsets == 1024) {
                fprintf(stderr, "wsbench: at most 1024 header sets\n");
                return 2;
            }
            int first = nsets ? start[nsets - 1] + count[nsets - 1] + 1 : 0;
            start[nsets] = first;
            count[nsets++] = i - first;
        }
    }
    for (int i = 0; i < conns; i++) {
        int set = i % nsets;
        c[i].fd = wsconnect(port, path, h + start[set], count[set]);
        if (c[i].fd < 0) failed++;
        else open++;
    }
    printf("open %d failed %d\n", open, failed);
    fflush(stdout);
    int ep = epoll_create1(0);
    double interval = interval_ms * 1000, begin = now_us(), end = begin + seconds * 1e6;
    for (int i = 0; i < conns; i++) {
        if (c[i].fd < 0) continue;
        fcntl(c[i].fd, F_SETFL, O_NONBLOCK);
        c[i].next = begin + interval * i / conns;
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, c[i].fd, &e);
    }
    unsigned char *payload = malloc(size), *out = malloc(size + 14);
    make_payload(payload, size);
    size_t cap = 4000000, nlat = 0;
    double *lat = malloc(sizeof(double) * cap);
    long sent = 0, received = 0, late = 0, bad = 0, closed = 0;
    struct epoll_event evs[256];
    for (double t = now_us(); t < end; t = now_us()) {
        for (int i = 0; i < conns; i++) {
            if (c[i].fd < 0 || c[i].next > t) continue;
            c[i].next += interval;
            if (c[i].pending) {  // the last echo has not come back within the interval
                late++;
                continue;
            }
            size_t n = masked_frame(out, payload, size);
            if (write(c[i].fd, out, n) != (ssize_t)n) {  // small frames: all or nothing
                closed++;
                close(c[i].fd);
                c[i].fd = -1;
                continue;
            }
            c[i].pending = 1;
            c[i].sent = now_us();
            sent++;
        }
        int n = epoll_wait(ep, evs, 256, 1);
        double got = now_us();
        for (int k = 0; k < n; k++) {
            struct cconn *x = &c[evs[k].data.u32];
            if (x->fd < 0) continue;
            ssize_t r = read(x->fd, x->in + x->len, sizeof x->in - x->len);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN) continue;
                closed++;
                close(x->fd);
                x->fd = -1;
                continue;
            }
            x->len += (size_t)r;
            int op;
            size_t po, pl, fl;
            const unsigned char *mask;
            while ((fl = frame(x->in, x->len, &op, &po, &pl, &mask))) {
                if (op != 1 || pl != size || memcmp(x->in + po, payload, size) || !x->pending) bad++;
                else {
                    received++;
                    if (nlat < cap) lat[nlat++] = got - x->sent;
                }
                x->pending = 0;
                memmove(x->in, x->in + fl, x->len - fl);
                x->len -= fl;
            }
        }
    }
    int still = 0;
    for (int i = 0; i < conns; i++)
        if (c[i].fd >= 0) {
            unsigned char cl[6];
            masked_frame(cl, NULL, 0);
            cl[0] = 0x88;
            if (write(c[i].fd, cl, 6) == 6) still++;
            close(c[i].fd);
        }
    printf("open=%d failed=%d still_open=%d sent=%ld received=%ld late=%ld bad=%ld closed=%ld",
           open, failed, still, sent, received, late, bad, closed);
    print_percentiles(lat, nlat);
    return 0;
}

/* The integer after "key": in a JSON payload (not NUL-terminated); -1 if absent. */
static long json_int(const unsigned char *p, size_t len, const char *key) {
    char pat[64];
    int n = snprintf(pat, sizeof pat, "\"%s\":", key);
    const unsigned char *hit = memmem(p, len, pat, (size_t)n);
    if (!hit) return -1;
    size_t i = (size_t)(hit - p) + (size_t)n;
    while (i < len && p[i] == ' ') i++;
    if (i >= len || p[i] < '0' || p[i] > '9') return -1;
    long v = 0;
    for (; i < len && p[i] >= '0' && p[i] <= '9' && v < 1000000000000L; i++) v = v * 10 + (p[i] - '0');
    return v;
}

static volatile sig_atomic_t listen_stop;
static void on_term(int sig) { (void)sig; listen_stop = 1; }

struct lconn {
    int fd;
    size_t len;
    unsigned char in[16384];
};

static int listen_only(int port, const char *path, int conns, double seconds, char **h, int nh) {
    struct lconn *c = calloc((size_t)conns, sizeof *c);
    int failed = 0, open = 0, nsets = 0, *start = calloc((size_t)conns + 1, sizeof(int)),
        *count = calloc((size_t)conns + 1, sizeof(int));
    for (int i = 0; i <= nh; i++) {
        if (i == nh || !strcmp(h[i], "--")) {
            if (nsets > conns) {
                fprintf(stderr, "wsbench: more header sets than connections\n");
                return 2;
            }
            int first = nsets ? start[nsets - 1] + count[nsets - 1] + 1 : 0;
            start[nsets] = first;
            count[nsets++] = i - first;
        }
    }
    for (int i = 0; i < conns; i++) {
        int set = i % nsets;
        c[i].fd = wsconnect(port, path, h + start[set], count[set]);
        if (c[i].fd < 0) failed++;
        else open++;
    }
    printf("open %d failed %d\n", open, failed);
    fflush(stdout);
    int ep = epoll_create1(0);
    for (int i = 0; i < conns; i++) {
        if (c[i].fd < 0) continue;
        fcntl(c[i].fd, F_SETFL, O_NONBLOCK);
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        epoll_ctl(ep, EPOLL_CTL_ADD, c[i].fd, &e);
    }
    long received = 0, pings = 0, bad = 0, closed = 0;
    double end = now_us() + seconds * 1e6;
    struct epoll_event evs[256];
    signal(SIGTERM, on_term);
    signal(SIGINT, on_term);
    while (!listen_stop && now_us() < end) {
        int n = epoll_wait(ep, evs, 256, 10);
        for (int k = 0; k < n; k++) {
            int i = (int)evs[k].data.u32;
            struct lconn *x = &c[i];
            if (x->fd < 0) continue;
            ssize_t r = read(x->fd, x->in + x->len, sizeof x->in - x->len);
            struct timespec arrival;
            clock_gettime(CLOCK_REALTIME, &arrival);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN) continue;
                closed++;
                close(x->fd);
                x->fd = -1;
                continue;
            }
            x->len += (size_t)r;
            int op;
            size_t po, pl, fl;
            const unsigned char *mask;
            while ((fl = frame(x->in, x->len, &op, &po, &pl, &mask))) {
                const unsigned char *p = x->in + po;
                if (op == 1) {
                    received++;
                    printf("m %d %ld.%09ld %ld %ld\n", i, (long)arrival.tv_sec, arrival.tv_nsec,
                           json_int(p, pl, "id"), json_int(p, pl, "owner_id"));
                    fflush(stdout);  // the driver counts arrivals as they come
                } else if (op == 9) {  // ping: a masked pong with its payload
                    unsigned char pong[256];
                    if (pl <= 125) {
                        size_t pn = masked_frame(pong, p, pl);
                        pong[0] = 0x8A;
                        if (write(x->fd, pong, pn) == (ssize_t)pn) pings++;
                    }
                } else if (op == 8) {
                    closed++;
                } else bad++;
                memmove(x->in, x->in + fl, x->len - fl);
                x->len -= fl;
            }
            if (x->len == sizeof x->in) {  // one frame larger than the buffer
                bad++;
                close(x->fd);
                x->fd = -1;
            }
        }
    }
    int still = 0;
    for (int i = 0; i < conns; i++)
        if (c[i].fd >= 0) {
            unsigned char cl[6];
            masked_frame(cl, NULL, 0);
            cl[0] = 0x88;
            if (write(c[i].fd, cl, 6) == 6) still++;
            close(c[i].fd);
        }
    printf("open=%d failed=%d still_open=%d received=%ld pings=%ld bad=%ld closed=%ld\n", open,
           failed, still, received, pings, bad, closed);
    return 0;
}

int main(int argc, char **argv) {
    srand((unsigned)(now_us()));
    if (argc == 3 && !strcmp(argv[1], "serve")) return serve(atoi(argv[2]));
    if (argc >= 6 && !strcmp(argv[1], "rtt"))
        return rtt(atoi(argv[2]), argv[3], atol(argv[4]), (size_t)atol(argv[5]), argv + 6, argc - 6);
    if (argc >= 8 && !strcmp(argv[1], "hold"))
        return hold(atoi(argv[2]), argv[3], atoi(argv[4]), atof(argv[5]), atof(argv[6]),
                    (size_t)atol(argv[7]), argv + 8, argc - 8);
    if (argc >= 6 && !strcmp(argv[1], "listen"))
        return listen_only(atoi(argv[2]), argv[3], atoi(argv[4]), atof(argv[5]), argv + 6, argc - 6);
    fprintf(stderr,
            "usage: wsbench serve PORT | rtt PORT PATH COUNT SIZE [HEADER]... |"
            " hold PORT PATH CONNS SECONDS INTERVAL_MS SIZE [HEADER]... [-- HEADER...]... |"
            " listen PORT PATH CONNS SECONDS [HEADER]... [-- HEADER...]...\n");
    return 2;
}
