// OpenSSL (the system's libssl) for BenchKit's load threads: a TLS client over a non-blocking
// socket. Handles are opaque: Swift never sees OpenSSL's types, and the process's other TLS
// library (BoringSSL inside swift-nio-ssl, whose symbols are prefixed) never meets these.
#ifndef CTLS_H
#define CTLS_H

#include <stddef.h>

/// Results of a step that did not move bytes.
enum {
    CTLS_ERROR = -1,
    CTLS_WANT_READ = -2,
    CTLS_WANT_WRITE = -3,
    /// The peer closed the TLS session (close_notify) or the socket.
    CTLS_CLOSED = -4,
};

/// A client context: certificates checked against `ca_file` (or the system's store when NULL)
/// unless `insecure`; `alpn` in wire format (length-prefixed names), or NULL. On failure NULL,
/// with OpenSSL's reason in `error`.
void *ctls_context_new(int insecure, const char *ca_file, const unsigned char *alpn, unsigned alpn_length,
                       char *error, size_t error_size);
void ctls_context_free(void *context);

/// A session on connected socket `fd`, naming `host` by SNI (and checking the certificate names
/// it, when verifying); offers `resume` (a session of an earlier connection) when not NULL.
void *ctls_new(void *context, int fd, const char *host, void *resume);
/// The handshake's next step: 1 when done, else CTLS_WANT_READ, CTLS_WANT_WRITE or CTLS_ERROR.
int ctls_handshake(void *ssl);
/// Bytes read (> 0) or a CTLS_ result.
int ctls_read(void *ssl, void *buffer, int size);
/// Bytes written (all of them: a short write is not allowed) or a CTLS_ result; after
/// CTLS_WANT_*, call again with the same bytes.
int ctls_write(void *ssl, const void *buffer, int size);
/// Whether the handshake settled on `h2` by ALPN.
int ctls_is_h2(void *ssl);
/// Bytes of a record already read and decrypted, waiting for ctls_read.
int ctls_pending(void *ssl);
/// Whether the handshake resumed a session.
int ctls_resumed(void *ssl);
/// The session to offer the next connection (free with ctls_session_free), or NULL.
void *ctls_session(void *ssl);
void ctls_session_free(void *session);
/// Sends close_notify without waiting for the peer's and frees the session.
void ctls_free(void *ssl);
/// Why the last step failed: the certificate check's verdict, else OpenSSL's error queue.
void ctls_error(void *ssl, char *error, size_t error_size);

#endif
