/* metrics.c: `vramshim metrics`, the user's processes under the shim in
 * the Prometheus text exposition format (version 0.0.4), printed once or
 * served over HTTP with `--listen ADDR:PORT`.
 *
 * Main entry point: `vs_tool_metrics`. Every scrape takes fresh snapshot
 * copies of all processes (`vs_snapshot_list`, which also removes the
 * snapshots of processes that are gone), then writes metric by metric, as
 * the format wants each metric's samples together under one HELP and TYPE.
 * Per-device figures (`device_bytes`, `limit_bytes`) are labelled with pid,
 * program and device; the host and disk tiers and the counters belong to the
 * process and are labelled with pid and program.
 *
 * The server is plain sockets, one connection at a time: a client gets
 * `VS_METRICS_IO_TIMEOUT_S` in all to send its request line and headers (at
 * most `VS_METRICS_REQUEST_MAX` bytes), as long again for each write of the
 * answer, then the connection is closed. GET and HEAD of /metrics (any query) are answered;
 * other paths get 404, other methods 405, malformed requests 400.
 */
#include "tool.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "dump.h"
#include "snapshot_reader.h"

#define VS_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
#define VS_METRICS_REQUEST_MAX 8192
#define VS_METRICS_IO_TIMEOUT_S 5

static const char vs_usage_metrics[] =
    "usage: vramshim metrics [--listen ADDR:PORT]\n"
    "\n"
    "Prints, in the Prometheus text format, the figures of every process of yours\n"
    "running under the shim: vramshim_device_bytes and vramshim_limit_bytes per\n"
    "process and device; vramshim_host_bytes, vramshim_disk_bytes, the eviction and\n"
    "restore counters and the bytes moved each way per process.\n"
    "\n"
    "  --listen ADDR:PORT  serve them at http://ADDR:PORT/metrics instead, one\n"
    "                      request at a time, until interrupted (127.0.0.1:9400,\n"
    "                      :9400 for every address, [::1]:9400; port 0 picks one)\n"
    "  -h, --help          this help\n";

/* X(name, type, help, per device, value expression over `h` (header), `d` (device)) */
#define VS_METRICS_LIST(X)                                                                         \
    X(device_bytes, "gauge", "Bytes of the process's allocations resident on the device.", true,  \
      d->resident_bytes)                                                                           \
    X(limit_bytes, "gauge", "The device memory limit of the process (0: not limited).", true,     \
      d->limit_bytes)                                                                              \
    X(host_bytes, "gauge", "Bytes of the process's allocations evicted to host memory.", false,   \
      h->totals.host_bytes)                                                                        \
    X(disk_bytes, "gauge", "Bytes of the process's allocations spilled to disk.", false,          \
      h->totals.disk_bytes)                                                                        \
    X(host_limit_bytes, "gauge", "Host memory the process may hold evicted bytes in.", false,     \
      h->host_limit_bytes)                                                                         \
    X(allocations, "gauge", "Live allocations the shim tracks.", false, h->totals.allocations)    \
    X(evictions_total, "counter", "Allocations evicted from the device.", false,                  \
      h->totals.evictions)                                                                         \
    X(restores_total, "counter", "Allocations restored to the device.", false,                    \
      h->totals.restores)                                                                          \
    X(evicted_bytes_total, "counter", "Bytes evicted, device to host.", false,                    \
      h->totals.bytes_evicted)                                                                     \
    X(restored_bytes_total, "counter", "Bytes restored, host to device.", false,                  \
      h->totals.bytes_restored)                                                                    \
    X(launches_total, "counter", "Kernel and graph launches seen.", false, h->totals.launches)    \
    X(failed_allocations_total, "counter", "Allocations refused as out of memory.", false,        \
      h->totals.failed_allocations)

typedef struct vs_metrics_set_s {
    vs_snapshot_copy_t *copies;
    size_t count, cap;
    bool out_of_memory;
} vs_metrics_set_t;

static void vs_metrics_collect_one(pid_t pid, void *arg)
{
    vs_metrics_set_t *set = arg;
    char msg[512];
    if (set->count == set->cap) {
        size_t cap = set->cap ? set->cap * 2 : 16;
        vs_snapshot_copy_t *grown = realloc(set->copies, cap * sizeof(*grown));
        if (!grown) {
            set->out_of_memory = true;
            return;
        }
        set->copies = grown;
        set->cap = cap;
    }
    int rc = vs_snapshot_read_pid(pid, &set->copies[set->count], msg, sizeof(msg));
    if (rc == 0)
        set->count++;
    else if (rc != -VS_READ_ERR_NO_PROCESS)
        vs_tool_error("skipping process %d: %s", (int)pid, msg);
}

static void vs_metrics_free(vs_metrics_set_t *set)
{
    for (size_t i = 0; i < set->count; i++)
        vs_snapshot_copy_free(&set->copies[i]);
    free(set->copies);
}

/* The program's name as a label value: every byte that is not printable
 * ASCII replaced with '?', as `ps`, `dump` and `top` show it (a name is any
 * bytes its process chose: terminal escapes, a carriage return, or bytes
 * that are not UTF-8, which would make Prometheus reject the whole scrape),
 * then backslash and double quote escaped, as the text format wants. */
static void vs_metrics_program_label(FILE *out, const vs_snapshot_header_t *h)
{
    char program[sizeof h->program + 1];
    vs_format_program(program, sizeof program, h);
    for (const char *s = program; *s; s++) {
        if (*s == '\\' || *s == '"')
            fprintf(out, "\\%c", *s);
        else
            fputc(*s, out);
    }
}

static void vs_metrics_sample(FILE *out, const char *name, const vs_snapshot_header_t *h,
                              const vs_snapshot_device_t *d, uint64_t value)
{
    fprintf(out, "vramshim_%s{pid=\"%lld\",program=\"", name, (long long)h->pid);
    vs_metrics_program_label(out, h);
    if (d)
        fprintf(out, "\",device=\"%" PRIu64, d->ordinal);
    fprintf(out, "\"} %" PRIu64 "\n", value);
}

/* The whole exposition for the processes in `set`. 0 or -EIO. */
static int vs_metrics_write(FILE *out, const vs_metrics_set_t *set)
{
    fputs("# HELP vramshim_processes Processes of this user running under the shim.\n"
          "# TYPE vramshim_processes gauge\n",
          out);
    fprintf(out, "vramshim_processes %zu\n", set->count);
#define VS_METRICS_X(name, type, help, per_device, value)                                          \
    fputs("# HELP vramshim_" #name " " help "\n# TYPE vramshim_" #name " " type "\n", out);      \
    for (size_t i = 0; i < set->count; i++) {                                                      \
        const vs_snapshot_header_t *h = set->copies[i].view.header;                                \
        if (per_device) {                                                                          \
            for (uint32_t k = 0; k < h->device_count && k < VS_SNAPSHOT_MAX_DEVICES; k++) {        \
                const vs_snapshot_device_t *d = &h->devices[k];                                    \
                vs_metrics_sample(out, #name, h, d, (value));                                      \
            }                                                                                      \
        } else {                                                                                   \
            const vs_snapshot_device_t *d = NULL;                                                  \
            (void)d;                                                                               \
            vs_metrics_sample(out, #name, h, NULL, (value));                                       \
        }                                                                                          \
    }
    VS_METRICS_LIST(VS_METRICS_X)
#undef VS_METRICS_X
    return ferror(out) ? -EIO : 0;
}

/* A scrape's body: malloc'd text, its length in *len; NULL on failure. */
static char *vs_metrics_render(size_t *len)
{
    vs_metrics_set_t set = {0};
    char *text = NULL;
    int n = vs_snapshot_list(vs_metrics_collect_one, &set, NULL);
    if (n < 0) {
        vs_tool_error("cannot list " VS_SNAPSHOT_SHM_DIR ": %s", strerror(-n));
        goto out;
    }
    if (set.out_of_memory) {
        vs_tool_error("out of memory reading the snapshots");
        goto out;
    }
    FILE *out = open_memstream(&text, len);
    if (!out)
        goto out;
    int rc = vs_metrics_write(out, &set);
    if (fclose(out) != 0 || rc < 0) {
        free(text);
        text = NULL;
    }
out:
    vs_metrics_free(&set);
    return text;
}

/* Sends all of `buf`; false when the client has gone or timed out. */
static bool vs_metrics_send(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return false;
        buf += n;
        len -= (size_t)n;
    }
    return true;
}

static void vs_metrics_respond(int fd, int status, const char *reason, const char *type,
                               const char *extra_header, const char *body, size_t body_len,
                               bool head)
{
    char header[512];
    int n = snprintf(header, sizeof(header),
                     "HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
                     "Connection: close\r\n\r\n",
                     status, reason, type, body_len, extra_header ? extra_header : "");
    if (vs_metrics_send(fd, header, (size_t)n) && !head)
        vs_metrics_send(fd, body, body_len);
}

static uint64_t vs_metrics_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Reads the request up to the end of its headers, within one deadline for
 * the whole request (a client trickling bytes cannot hold the server), and
 * answers it. */
static void vs_metrics_serve_one(int fd)
{
    static const char not_found[] = "not found: the metrics are at /metrics\n";
    static const char bad_method[] = "method not allowed: use GET\n";
    static const char bad_request[] = "bad request\n";
    char req[VS_METRICS_REQUEST_MAX + 1];
    size_t used = 0;
    struct timeval tv = {.tv_sec = VS_METRICS_IO_TIMEOUT_S};
    (void)setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    uint64_t deadline = vs_metrics_now_ms() + VS_METRICS_IO_TIMEOUT_S * 1000u;
    for (;;) {
        uint64_t now = vs_metrics_now_ms();
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        if (now >= deadline || poll(&pfd, 1, (int)(deadline - now)) == 0)
            return; /* too slow: nothing to answer */
        ssize_t n = recv(fd, req + used, VS_METRICS_REQUEST_MAX - used, MSG_DONTWAIT);
        if (n < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK))
            continue;
        if (n <= 0)
            return; /* gone */
        used += (size_t)n;
        req[used] = '\0';
        if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
            break;
        if (used == VS_METRICS_REQUEST_MAX) {
            vs_metrics_respond(fd, 431, "Request Header Fields Too Large", "text/plain",
                               NULL, bad_request, sizeof(bad_request) - 1, false);
            return;
        }
    }
    char method[16], target[2048], version[16];
    if (sscanf(req, "%15s %2047s %15s", method, target, version) != 3 ||
        strncmp(version, "HTTP/", 5) != 0) {
        vs_metrics_respond(fd, 400, "Bad Request", "text/plain", NULL, bad_request,
                           sizeof(bad_request) - 1, false);
        return;
    }
    bool head = strcmp(method, "HEAD") == 0;
    if (!head && strcmp(method, "GET") != 0) {
        vs_metrics_respond(fd, 405, "Method Not Allowed", "text/plain", "Allow: GET, HEAD\r\n",
                           bad_method, sizeof(bad_method) - 1, false);
        return;
    }
    size_t path_len = strcspn(target, "?");
    if (path_len != strlen("/metrics") || strncmp(target, "/metrics", path_len) != 0) {
        vs_metrics_respond(fd, 404, "Not Found", "text/plain", NULL, not_found,
                           sizeof(not_found) - 1, head);
        return;
    }
    size_t len = 0;
    char *body = vs_metrics_render(&len);
    if (!body) {
        static const char failed[] = "cannot read the snapshots\n";
        vs_metrics_respond(fd, 500, "Internal Server Error", "text/plain", NULL, failed,
                           sizeof(failed) - 1, head);
        return;
    }
    vs_metrics_respond(fd, 200, "OK", VS_METRICS_CONTENT_TYPE, NULL, body, len, head);
    free(body);
}

/* "HOST:PORT", "[V6]:PORT" or ":PORT" into host (NULL: every address) and
 * port. -EINVAL when malformed. */
static int vs_metrics_split_listen(char *text, const char **host, const char **port)
{
    char *colon = strrchr(text, ':');
    if (!colon || !colon[1] || strspn(colon + 1, "0123456789") != strlen(colon + 1) ||
        strlen(colon + 1) > 5 || atoi(colon + 1) > 65535)
        return -EINVAL;
    *colon = '\0';
    *port = colon + 1;
    if (text[0] == '[') {
        size_t n = strlen(text);
        if (n < 3 || text[n - 1] != ']')
            return -EINVAL;
        text[n - 1] = '\0';
        text++;
    } else if (strchr(text, ':')) {
        return -EINVAL; /* an IPv6 address needs its brackets */
    }
    *host = *text ? text : NULL;
    return 0;
}

/* Binds and listens; the socket, or -1 after one error line. */
static int vs_metrics_listen(const char *spec)
{
    char text[256];
    const char *host, *port;
    if (strlen(spec) >= sizeof(text) ||
        vs_metrics_split_listen(strcpy(text, spec), &host, &port) < 0) {
        vs_tool_error("--listen %s: expected ADDR:PORT (127.0.0.1:9400, :9400, [::1]:9400) "
                      "with a port from 0 to 65535",
                      spec);
        return -2;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int rc = getaddrinfo(host, port, &hints, &res);
    if (rc != 0) {
        vs_tool_error("--listen %s: cannot resolve %s: %s", spec, host ? host : "*",
                      gai_strerror(rc));
        return -2;
    }
    int fd = -1, err = 0;
    for (struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        int one = 1;
        (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 16) == 0)
            break;
        err = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        vs_tool_error("cannot listen on %s: %s", spec, strerror(err));
        return -1;
    }
    return fd;
}

/* The address actually bound (the port 0 asked for is now a real one). */
static void vs_metrics_announce(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";
    if (getsockname(fd, (struct sockaddr *)&ss, &len) == 0)
        (void)getnameinfo((struct sockaddr *)&ss, len, host, sizeof(host), port, sizeof(port),
                          NI_NUMERICHOST | NI_NUMERICSERV);
    bool v6 = ss.ss_family == AF_INET6;
    fprintf(stderr, "vramshim: serving metrics at http://%s%s%s:%s/metrics\n", v6 ? "[" : "",
            host, v6 ? "]" : "", port);
    fflush(stderr);
}

int vs_tool_metrics(int argc, char **argv)
{
    static const struct option options[] = {
        {"listen", required_argument, NULL, 'l'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *listen_spec = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (c) {
        case 'l':
            listen_spec = optarg;
            break;
        case 'h':
            fputs(vs_usage_metrics, stdout);
            return VS_TOOL_EXIT_OK;
        default:
            fputs(vs_usage_metrics, stderr);
            return VS_TOOL_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        vs_tool_error("metrics: unexpected argument '%s'", argv[optind]);
        fputs(vs_usage_metrics, stderr);
        return VS_TOOL_EXIT_USAGE;
    }
    if (!listen_spec) {
        size_t len;
        char *body = vs_metrics_render(&len);
        if (!body)
            return VS_TOOL_EXIT_ERROR;
        bool ok = fwrite(body, 1, len, stdout) == len && fflush(stdout) == 0;
        free(body);
        if (!ok) {
            vs_tool_error("cannot write the metrics: %s", strerror(errno));
            return VS_TOOL_EXIT_ERROR;
        }
        return VS_TOOL_EXIT_OK;
    }
    int fd = vs_metrics_listen(listen_spec);
    if (fd < 0)
        return fd == -2 ? VS_TOOL_EXIT_USAGE : VS_TOOL_EXIT_ERROR;
    vs_metrics_announce(fd);
    for (;;) {
        int client = accept4(fd, NULL, NULL, SOCK_CLOEXEC);
        if (client < 0) {
            if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE ||
                errno == ENOBUFS || errno == ENOMEM || errno == EPROTO) {
                if (errno != EINTR && errno != ECONNABORTED)
                    sleep(1); /* out of resources: let them come back */
                continue;
            }
            vs_tool_error("cannot accept a connection: %s", strerror(errno));
            close(fd);
            return VS_TOOL_EXIT_ERROR;
        }
        vs_metrics_serve_one(client);
        close(client);
    }
}
