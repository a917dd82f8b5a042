#!/usr/bin/env python3
"""An HTTP/2 server (prior knowledge, plain TCP) through hyper-h2 (PyPI `h2`), a peer nobody here
wrote, that answers `/ok` with a 200 and never answers `/stall`: the streams a load tool leaves
open when its run ends. Prints "listening" once it accepts connections, and serves until killed.

Usage: h2-stall.py PORT
"""
import socket
import sys
import threading

import h2.config
import h2.connection
import h2.events


def serve(sock):
    conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=False, header_encoding="utf-8"))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    while True:
        data = sock.recv(65536)
        if not data:
            return
        for event in conn.receive_data(data):
            if isinstance(event, h2.events.RequestReceived):
                path = dict(event.headers).get(":path", "")
                if path == "/ok":
                    conn.send_headers(event.stream_id, [(":status", "200"), ("content-length", "2")])
                    conn.send_data(event.stream_id, b"ok", end_stream=True)
        sock.sendall(conn.data_to_send())


listener = socket.socket()
listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
listener.bind(("127.0.0.1", int(sys.argv[1])))
listener.listen(64)
print("listening", flush=True)
while True:
    client, _ = listener.accept()
    threading.Thread(target=serve, args=(client,), daemon=True).start()
