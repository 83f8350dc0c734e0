#ifndef COUCHETTE_CSHIMS_H
#define COUCHETTE_CSHIMS_H

#include <stdint.h>
#include <stddef.h>
#include <microhttpd.h>
#include <curl/curl.h>

/// Options for starting a libmicrohttpd daemon, so Swift never calls the
/// variadic MHD_start_daemon itself.
typedef struct couchette_mhd_options {
    unsigned int flags;
    uint16_t port;
    /// IPv4 address in network byte order, or 0 for any.
    uint32_t bind_address;
    unsigned int thread_pool_size;
    unsigned int connection_limit;
    unsigned int connection_timeout_seconds;
    size_t connection_memory_limit;
} couchette_mhd_options;

struct MHD_Daemon *couchette_mhd_start(const couchette_mhd_options *options,
                                       MHD_AccessHandlerCallback handler, void *handler_context,
                                       MHD_RequestCompletedCallback completed, void *completed_context,
                                       MHD_NotifyConnectionCallback notify, void *notify_context);

/// A connection's socket (MHD_get_connection_info is variadic).
int couchette_mhd_connection_fd(struct MHD_Connection *connection);

/// A connection's IPv4 client address (network byte order), 0 if none.
uint32_t couchette_mhd_connection_ipv4(struct MHD_Connection *connection);

/// The port the daemon actually listens on (useful after binding port 0).
uint16_t couchette_mhd_bound_port(struct MHD_Daemon *daemon);

/// Builds the answer to a request libmicrohttpd refuses by itself (a malformed chunked body, a
/// Content-Length it cannot read, a head larger than its buffer), from the HTML page it would
/// send (`message`); NULL sends nothing (libmicrohttpd then closes the connection).
/// libmicrohttpd offers no way to change those pages:
/// CShims defines MHD_create_response_from_buffer, which the process's calls (libmicrohttpd's
/// own included) reach first; it forwards every call to libmicrohttpd's, except those for its
/// error pages (persistent buffers starting with "<html>") once a builder is set.
typedef struct MHD_Response *(*couchette_mhd_error_page_builder)(const char *message, size_t length);
void couchette_mhd_set_error_page_builder(couchette_mhd_error_page_builder builder);

/// Hands the whole pages inside [start, start + length) back to the kernel
/// (madvise MADV_DONTNEED): they read as zeros afterwards and take no memory until
/// written again. Only for writable private memory whose contents are not needed.
void couchette_release_pages(void *start, size_t length);

/// Typed wrappers for curl_easy_setopt.
CURLcode couchette_curl_set_long(CURL *handle, CURLoption option, long value);
CURLcode couchette_curl_set_string(CURL *handle, CURLoption option, const char *value);
CURLcode couchette_curl_set_pointer(CURL *handle, CURLoption option, void *value);
CURLcode couchette_curl_set_offset(CURL *handle, CURLoption option, curl_off_t value);
CURLcode couchette_curl_get_long(CURL *handle, CURLINFO info, long *value);

/// Typed wrapper for curl_multi_setopt (connection limits of a multi handle).
CURLMcode couchette_curl_multi_set_long(CURLM *multi, CURLMoption option, long value);

#endif
