/*
 * Reference (a) of scripts/bench: the ceiling for any request.
 *
 * A minimal libmicrohttpd server that answers every request with one fixed JSON body
 * of a given size, with the same threading model and options as Couchette's listener
 * (Sources/CouchServer/Listener.swift and Sources/CShims/CShims.c):
 * MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO,
 * a thread pool of the same size, the same connection limit, timeout and memory limit.
 * Like Couchette it builds one response per request (copying the body) and answers on
 * the second access-handler call: answering on the first makes libmicrohttpd close the
 * connection after every response.
 *
 * Usage: mhd_fixed PORT THREADS BODY_BYTES
 * Prints "mhd_fixed listening on http://127.0.0.1:PORT/" on its first line (PORT may be
 * 0: the bound port is printed), then serves until SIGINT or SIGTERM.
 */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *body;
static size_t body_size;
static volatile sig_atomic_t stopping = 0;

static void on_signal(int signal_number) {
    (void)signal_number;
    stopping = 1;
}

static enum MHD_Result answer(void *context, struct MHD_Connection *connection, const char *url,
                              const char *method, const char *version, const char *upload,
                              size_t *upload_size, void **state) {
    (void)context; (void)url; (void)method; (void)version; (void)upload;
    static int marker;
    if (*state == NULL) {       /* first call: headers only */
        *state = &marker;
        return MHD_YES;
    }
    if (*upload_size > 0) {     /* discard any request body */
        *upload_size = 0;
        return MHD_YES;
    }
    struct MHD_Response *response =
        MHD_create_response_from_buffer(body_size, body, MHD_RESPMEM_MUST_COPY);
    if (response == NULL) return MHD_NO;
    MHD_add_response_header(response, "Content-Type", "application/json");
    MHD_add_response_header(response, "ETag", "\"1-0123456789abcdef0123456789abcdef\"");
    MHD_add_response_header(response, "Server", "mhd_fixed (reference)");
    MHD_add_response_header(response, "Cache-Control", "must-revalidate");
    enum MHD_Result result = MHD_queue_response(connection, MHD_HTTP_OK, response);
    MHD_destroy_response(response);
    return result;
}

/* Builds a valid JSON object of exactly `size` bytes (size >= 16). */
static char *make_body(size_t size) {
    char *text = malloc(size + 1);
    if (text == NULL) return NULL;
    const char *head = "{\"fill\":\"";
    const char *tail = "\"}";
    size_t fill = size - strlen(head) - strlen(tail);
    strcpy(text, head);
    memset(text + strlen(head), 'x', fill);
    strcpy(text + strlen(head) + fill, tail);
    return text;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s PORT THREADS BODY_BYTES\n", argv[0]);
        return 2;
    }
    unsigned port = (unsigned)atoi(argv[1]);
    unsigned threads = (unsigned)atoi(argv[2]);
    long size = atol(argv[3]);
    if (threads == 0 || size < 16 || size > 64 * 1024 * 1024) {
        fprintf(stderr, "THREADS must be positive and BODY_BYTES between 16 and 64 MiB\n");
        return 2;
    }
    body_size = (size_t)size;
    body = make_body(body_size);

    struct sockaddr_in address;
    memset(&address, 0, sizeof(address));
    address.sin_family = AF_INET;
    address.sin_port = htons((uint16_t)port);
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME | MHD_USE_TURBO;
    struct MHD_Daemon *daemon = MHD_start_daemon(
        flags, (uint16_t)port, NULL, NULL, answer, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address,
        MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_LIMIT, 8192u,
        MHD_OPTION_CONNECTION_TIMEOUT, 300u,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(64 * 1024),
        MHD_OPTION_END);
    if (daemon == NULL) {
        fprintf(stderr, "cannot start libmicrohttpd on port %u\n", port);
        return 1;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    printf("mhd_fixed listening on http://127.0.0.1:%u/ (%u threads, %zu-byte body)\n",
           info ? info->port : port, threads, body_size);
    fflush(stdout);

    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    while (!stopping) pause();
    MHD_stop_daemon(daemon);
    free(body);
    return 0;
}
