#!/usr/bin/env python3
"""Fetches a hot image over one HTTP/2 connection in the ways a client may, through hyper-h2
(PyPI `h2`), a peer nobody here wrote, and prints what came back as one JSON object:

- "window": a client whose streams' window is 4,096 bytes, granting more as each DATA frame is
  read, so an answer larger than the window waits on the server for the client's updates;
- "burst": twenty GETs written at once;
- "reset": a GET the client resets after its first DATA frame, then another GET on the same
  connection;
- "split": a GET whose request ends in an empty DATA frame, not on its HEADERS;
- "cold": a GET the hot routes do not answer (`/health`), between the others;
- "goaway": whether the server sent GOAWAY (it should not have).

Each answer is {"status", "sha256", "frames" (its DATA frames), "headers"}.

Usage: h2-hot.py PORT CA_PEM PATH AUTHORIZATION
"""
import hashlib
import json
import socket
import ssl
import sys

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.settings

port, ca, path, authorization = sys.argv[1:5]
context = ssl.create_default_context(cafile=ca)
context.set_alpn_protocols(["h2"])
sock = context.wrap_socket(socket.create_connection(("127.0.0.1", int(port)), timeout=30), server_hostname="localhost")
assert sock.selected_alpn_protocol() == "h2", sock.selected_alpn_protocol()
conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
conn.initiate_connection()
conn.update_settings({h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: 4096})
sock.sendall(conn.data_to_send())

answers, goaway = {}, False


def request_headers(target):
    return [(":method", "GET"), (":scheme", "https"), (":authority", "localhost"), (":path", target), ("authorization", authorization)]


def pump(until, reset_after_first_data=None):
    """Reads and answers frames until `until()` holds; resets `reset_after_first_data` on its first DATA."""
    global goaway
    while not until():
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("the server closed the connection")
        for event in conn.receive_data(chunk):
            if isinstance(event, h2.events.ResponseReceived):
                answers[event.stream_id] = {"status": int(dict(event.headers)[":status"]), "body": b"", "frames": 0,
                                            "headers": {k: v for k, v in event.headers if not k.startswith(":")}, "ended": False}
            elif isinstance(event, h2.events.DataReceived):
                answer = answers[event.stream_id]
                answer["body"] += event.data
                answer["frames"] += 1
                if event.stream_id == reset_after_first_data:
                    conn.reset_stream(event.stream_id, h2.errors.ErrorCodes.CANCEL)
                    answer["ended"] = "reset"
                elif event.flow_controlled_length:
                    conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                answers[event.stream_id]["ended"] = True
            elif isinstance(event, h2.events.ConnectionTerminated):
                goaway = True
                raise SystemExit("GOAWAY: %s" % event)
        sock.sendall(conn.data_to_send())


def ended(*streams):
    return lambda: all(answers.get(s, {}).get("ended") for s in streams)


def report(stream):
    answer = answers[stream]
    return {"status": answer["status"], "sha256": hashlib.sha256(answer["body"]).hexdigest(), "frames": answer["frames"],
            "headers": answer["headers"]}


result = {}
conn.send_headers(1, request_headers(path), end_stream=True)
sock.sendall(conn.data_to_send())
pump(ended(1))
result["window"] = report(1)

burst = list(range(3, 43, 2))
for stream in burst:
    conn.send_headers(stream, request_headers(path), end_stream=True)
sock.sendall(conn.data_to_send())
pump(ended(*burst))
result["burst"] = [report(s) for s in burst]

conn.send_headers(43, request_headers(path), end_stream=True)
sock.sendall(conn.data_to_send())
pump(ended(43), reset_after_first_data=43)
conn.send_headers(45, request_headers("/health"), end_stream=True)
conn.send_headers(47, request_headers(path), end_stream=True)
sock.sendall(conn.data_to_send())
pump(ended(45, 47))
result["reset"] = {"first_frames": answers[43]["frames"], "after": report(47)}
result["cold"] = report(45)

conn.send_headers(49, request_headers(path), end_stream=False)
sock.sendall(conn.data_to_send())
conn.send_data(49, b"", end_stream=True)
sock.sendall(conn.data_to_send())
pump(ended(49))
result["split"] = report(49)
result["goaway"] = goaway
conn.close_connection()
sock.sendall(conn.data_to_send())
sock.close()
print(json.dumps(result))
