#include "ctls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <stdio.h>
#include <string.h>

static void last_error(char *error, size_t size) {
    unsigned long code = ERR_get_error();
    if (code == 0) {
        snprintf(error, size, "unknown TLS error");
    } else {
        ERR_error_string_n(code, error, size);
    }
    ERR_clear_error();
}

void *ctls_context_new(int insecure, const char *ca_file, const unsigned char *alpn, unsigned alpn_length,
                       char *error, size_t error_size) {
    SSL_CTX *context = SSL_CTX_new(TLS_client_method());
    if (!context) { last_error(error, error_size); return NULL; }
    SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION);
    // OpenSSL 3 reports an EOF without close_notify as an error; many servers close so, and a
    // response that runs to the close ends there (SSL_ERROR_ZERO_RETURN with this option).
    SSL_CTX_set_options(context, SSL_OP_IGNORE_UNEXPECTED_EOF);
    SSL_CTX_set_mode(context, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    // Sessions are offered only where the caller asks (ctls_new's resume), as wrk does.
    SSL_CTX_set_session_cache_mode(context, SSL_SESS_CACHE_CLIENT | SSL_SESS_CACHE_NO_INTERNAL_STORE);
    if (insecure) {
        SSL_CTX_set_verify(context, SSL_VERIFY_NONE, NULL);
    } else {
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, NULL);
        int loaded = ca_file ? SSL_CTX_load_verify_locations(context, ca_file, NULL) : SSL_CTX_set_default_verify_paths(context);
        if (loaded != 1) { last_error(error, error_size); SSL_CTX_free(context); return NULL; }
    }
    if (alpn && alpn_length > 0 && SSL_CTX_set_alpn_protos(context, alpn, alpn_length) != 0) {
        last_error(error, error_size);
        SSL_CTX_free(context);
        return NULL;
    }
    return context;
}

void ctls_context_free(void *context) { SSL_CTX_free((SSL_CTX *)context); }

void *ctls_new(void *context, int fd, const char *host, void *resume) {
    SSL *ssl = SSL_new((SSL_CTX *)context);
    if (!ssl) return NULL;
    if (SSL_set_fd(ssl, fd) != 1) { SSL_free(ssl); return NULL; }
    SSL_set_connect_state(ssl);
    if (host && host[0]) {
        // SNI only for names (RFC 6066 forbids literal addresses); the check covers both.
        int literal = strchr(host, ':') != NULL || (strspn(host, "0123456789.") == strlen(host));
        if (!literal) SSL_set_tlsext_host_name(ssl, host);
        if (SSL_get_verify_mode(ssl) & SSL_VERIFY_PEER) {
            // A name or address the check cannot take fails the connection: it never goes
            // unchecked.
            int named = literal ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), host) : SSL_set1_host(ssl, host);
            if (named != 1) { SSL_free(ssl); return NULL; }
        }
    }
    if (resume) SSL_set_session(ssl, (SSL_SESSION *)resume);
    return ssl;
}

static int result(SSL *ssl, int value) {
    switch (SSL_get_error(ssl, value)) {
    case SSL_ERROR_WANT_READ: return CTLS_WANT_READ;
    case SSL_ERROR_WANT_WRITE: return CTLS_WANT_WRITE;
    case SSL_ERROR_ZERO_RETURN: return CTLS_CLOSED;
    default:
        // SSL_ERROR_SYSCALL (a reset, say) or SSL_ERROR_SSL. After a fatal error SSL_shutdown
        // must not be called (its manual): ctls_free then sends nothing.
        SSL_set_quiet_shutdown(ssl, 1);
        return CTLS_ERROR;
    }
}

int ctls_handshake(void *ssl) {
    int value = SSL_do_handshake((SSL *)ssl);
    if (value == 1) return 1;
    int r = result((SSL *)ssl, value);
    return r == CTLS_CLOSED ? CTLS_ERROR : r;
}

int ctls_read(void *ssl, void *buffer, int size) {
    int value = SSL_read((SSL *)ssl, buffer, size);
    return value > 0 ? value : result((SSL *)ssl, value);
}

int ctls_write(void *ssl, const void *buffer, int size) {
    int value = SSL_write((SSL *)ssl, buffer, size);
    return value > 0 ? value : result((SSL *)ssl, value);
}

int ctls_is_h2(void *ssl) {
    const unsigned char *protocol = NULL;
    unsigned length = 0;
    SSL_get0_alpn_selected((SSL *)ssl, &protocol, &length);
    return length == 2 && memcmp(protocol, "h2", 2) == 0;
}

int ctls_pending(void *ssl) { return SSL_pending((SSL *)ssl); }

int ctls_resumed(void *ssl) { return SSL_session_reused((SSL *)ssl); }

void *ctls_session(void *ssl) { return SSL_get1_session((SSL *)ssl); }

void ctls_session_free(void *session) { SSL_SESSION_free((SSL_SESSION *)session); }

void ctls_free(void *ssl) {
    // A session whose handshake never finished has nothing to close.
    if (SSL_is_init_finished((SSL *)ssl)) SSL_shutdown((SSL *)ssl);
    SSL_free((SSL *)ssl);
    ERR_clear_error();
}

void ctls_error(void *ssl, char *error, size_t error_size) {
    long verdict = ssl ? SSL_get_verify_result((SSL *)ssl) : X509_V_OK;
    if (verdict != X509_V_OK) {
        snprintf(error, error_size, "certificate verify failed: %s", X509_verify_cert_error_string(verdict));
        ERR_clear_error();
        return;
    }
    last_error(error, error_size);
}
