#define _GNU_SOURCE
#include "CShims.h"
#include <dlfcn.h>
#include <pthread.h>
#include <string.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <unistd.h>

/* libmicrohttpd unescapes the path in place by default; CouchDB's URL grammar
   needs the raw path (`%2F` in a document id is not a `/`), so routes decode
   each segment themselves. */
static size_t keep_escaped(void *cls, struct MHD_Connection *c, char *s) {
    (void)cls; (void)c;
    return strlen(s);
}

struct MHD_Daemon *couchette_mhd_start(const couchette_mhd_options *o,
                                       MHD_AccessHandlerCallback handler, void *handler_context,
                                       MHD_RequestCompletedCallback completed, void *completed_context,
                                       MHD_NotifyConnectionCallback notify, void *notify_context) {
    struct sockaddr_in address;
    memset(&address, 0, sizeof(address));
    address.sin_family = AF_INET;
    address.sin_port = htons(o->port);
    address.sin_addr.s_addr = o->bind_address;
    return MHD_start_daemon(o->flags, o->port, NULL, NULL, handler, handler_context,
                            MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address,
                            MHD_OPTION_THREAD_POOL_SIZE, o->thread_pool_size,
                            MHD_OPTION_CONNECTION_LIMIT, o->connection_limit,
                            MHD_OPTION_CONNECTION_TIMEOUT, o->connection_timeout_seconds,
                            MHD_OPTION_CONNECTION_MEMORY_LIMIT, o->connection_memory_limit,
                            MHD_OPTION_NOTIFY_COMPLETED, completed, completed_context,
                            MHD_OPTION_NOTIFY_CONNECTION, notify, notify_context,
                            MHD_OPTION_UNESCAPE_CALLBACK, keep_escaped, NULL,
                            MHD_OPTION_END);
}

int couchette_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info ? info->connect_fd : -1;
}

uint32_t couchette_mhd_connection_ipv4(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!info || !info->client_addr || info->client_addr->sa_family != AF_INET) return 0;
    return ((const struct sockaddr_in *)info->client_addr)->sin_addr.s_addr;
}

uint16_t couchette_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info ? info->port : 0;
}

typedef struct MHD_Response *(*create_from_buffer)(size_t, void *, enum MHD_ResponseMemoryMode);
static create_from_buffer library_create_from_buffer;
static pthread_once_t library_lookup = PTHREAD_ONCE_INIT;
static couchette_mhd_error_page_builder error_page_builder;

static void find_library_create_from_buffer(void) {
    library_create_from_buffer = (create_from_buffer)dlsym(RTLD_NEXT, "MHD_create_response_from_buffer");
    // Loaded before the object holding this file (a shared library build): ask it by name.
    if (library_create_from_buffer == NULL || library_create_from_buffer == MHD_create_response_from_buffer) {
        void *library = dlopen("libmicrohttpd.so.12", RTLD_LAZY | RTLD_NOLOAD);
        library_create_from_buffer = library ? (create_from_buffer)dlsym(library, "MHD_create_response_from_buffer") : NULL;
    }
}

void couchette_mhd_set_error_page_builder(couchette_mhd_error_page_builder builder) {
    __atomic_store_n(&error_page_builder, builder, __ATOMIC_RELEASE);
}

struct MHD_Response *MHD_create_response_from_buffer(size_t size, void *buffer, enum MHD_ResponseMemoryMode mode) {
    pthread_once(&library_lookup, find_library_create_from_buffer);
    couchette_mhd_error_page_builder builder = __atomic_load_n(&error_page_builder, __ATOMIC_ACQUIRE);
    if (builder != NULL && mode == MHD_RESPMEM_PERSISTENT && size >= 6 && memcmp(buffer, "<html>", 6) == 0) {
        return builder(buffer, size);
    }
    return library_create_from_buffer ? library_create_from_buffer(size, buffer, mode) : NULL;
}

void couchette_release_pages(void *start, size_t length) {
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t first = ((uintptr_t)start + page - 1) & ~(page - 1);
    uintptr_t end = ((uintptr_t)start + length) & ~(page - 1);
    if (end > first) madvise((void *)first, end - first, MADV_DONTNEED);
}

CURLcode couchette_curl_set_long(CURL *h, CURLoption o, long v) { return curl_easy_setopt(h, o, v); }
CURLcode couchette_curl_set_string(CURL *h, CURLoption o, const char *v) { return curl_easy_setopt(h, o, v); }
CURLcode couchette_curl_set_pointer(CURL *h, CURLoption o, void *v) { return curl_easy_setopt(h, o, v); }
CURLcode couchette_curl_set_offset(CURL *h, CURLoption o, curl_off_t v) { return curl_easy_setopt(h, o, v); }
CURLcode couchette_curl_get_long(CURL *h, CURLINFO i, long *v) { return curl_easy_getinfo(h, i, v); }
CURLMcode couchette_curl_multi_set_long(CURLM *m, CURLMoption o, long v) { return curl_multi_setopt(m, o, v); }
