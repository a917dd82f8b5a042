#!/usr/bin/env python3
"""A TLS client that keeps sessions and offers them again, for session resumption across nodes
(`serve --tls-ticket-keys`, docs/operations.md#several-nodes-behind-one-name). Python's `ssl`
module (OpenSSL) is the peer: a TLS client nobody here wrote.

Usage: tls-resume.py CA_PEM [HOST]     (HOST: 127.0.0.1; the certificate must name it)

Reads commands from standard input, one a line, and answers each with one line on standard
output, at once:

    new NAME PORT 1.3|1.2    a full handshake (no session offered) with TLS 1.3 or 1.2 only, a
                             GET /health, and the session kept as NAME:
                             "new TLSv1.3 ticket" ("no-ticket" when the server sent none)
    resume NAME PORT         the same with NAME's session offered: "resumed TLSv1.3" when the
                             server took it, "full TLSv1.3" when it made a full handshake

A failure answers "error: ..." and the script goes on. Each connection gives up after 20 s.
For instance: printf 'new a 8443 1.3\\nresume a 8444\\n' | scripts/tls-resume.py cert.pem
Python 3 standard library only.
"""
import socket
import ssl
import sys

ca = sys.argv[1]
host = sys.argv[2] if len(sys.argv) > 2 else "127.0.0.1"


def make_context(version):
    context = ssl.create_default_context(cafile=ca)
    if version == "1.3":
        context.minimum_version = ssl.TLSVersion.TLSv1_3
    else:
        context.maximum_version = ssl.TLSVersion.TLSv1_2
    return context


# A session can be offered only through the context it was made with: one per version.
contexts = {version: make_context(version) for version in ("1.3", "1.2")}
# NAME -> (version, session)
sessions = {}


def exchange(port, context, session=None):
    """One GET /health on a new connection; the socket's session once the answer is in, whether
    the handshake resumed, and the version spoken."""
    raw = socket.create_connection((host, int(port)), timeout=20)
    try:
        sock = context.wrap_socket(raw, server_hostname=host, session=session)
    except BaseException:
        raw.close()
        raise
    try:
        sock.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        # The answer, whole (by its Content-Length): TLS 1.3's NewSessionTicket comes before it,
        # so the session taken after it holds a ticket.
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(4096)
            if not chunk:
                raise ConnectionError("the connection closed before the answer's head: %r" % data)
            data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        while len(body) < length:
            chunk = sock.recv(4096)
            if not chunk:
                break
            body += chunk
        status = head.split(b"\r\n")[0]
        if status.split(b" ")[1:2] != [b"200"]:
            raise ConnectionError("the answer is not a 200: %r" % status)
        kept, reused, version = sock.session, sock.session_reused, sock.version()
        # A close as a careful client makes it (close_notify), bounded: the server may have gone.
        try:
            sock.settimeout(2)
            sock.unwrap()
        except (OSError, ValueError):
            pass
        return kept, reused, version
    finally:
        sock.close()


for line in sys.stdin:
    words = line.split()
    if not words:
        continue
    try:
        if words[0] == "new" and len(words) == 4 and words[3] in contexts:
            name, port, version = words[1:]
            session, _, spoken = exchange(port, contexts[version])
            sessions[name] = (version, session)
            print("new %s %s" % (spoken, "ticket" if session is not None and session.has_ticket else "no-ticket"), flush=True)
        elif words[0] == "resume" and len(words) == 3 and words[1] in sessions:
            name, port = words[1:]
            version, session = sessions[name]
            _, reused, spoken = exchange(port, contexts[version], session)
            print("%s %s" % ("resumed" if reused else "full", spoken), flush=True)
        else:
            print("error: not a command: %s" % line.strip(), flush=True)
    except (OSError, ssl.SSLError, ValueError) as error:
        print("error: %s" % error, flush=True)
