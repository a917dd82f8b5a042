#!/usr/bin/env python3
"""Sends one push to an APNs-style endpoint the way aioapns connects: TLS with no ALPN offered,
then HTTP/2 with prior knowledge, through the hyper-h2 library (PyPI `h2`). Prints the status,
the negotiated ALPN protocol (None), the response body, the apns-id sent and the one echoed, how
many DATA frames the answer had and whether it ended on its HEADERS frame, as one JSON line.

Usage: h2-push.py PORT CA_PEM JWT TOPIC DEVICE_TOKEN PAYLOAD_JSON
"""
import json
import socket
import ssl
import sys
import uuid

import h2.config
import h2.connection
import h2.events

port, ca, jwt, topic, token, payload = sys.argv[1:7]
context = ssl.create_default_context(cafile=ca)  # no set_alpn_protocols: no ALPN, as aioapns
sock = context.wrap_socket(socket.create_connection(("127.0.0.1", int(port)), timeout=60), server_hostname="localhost")
conn = h2.connection.H2Connection(config=h2.config.H2Configuration(client_side=True, header_encoding="utf-8"))
conn.initiate_connection()
sock.sendall(conn.data_to_send())
body = payload.encode()
apns_id = str(uuid.uuid4())  # lowercase, as aioapns sends it
conn.send_headers(1, [
    (":method", "POST"), (":scheme", "https"), (":authority", "localhost"), (":path", "/3/device/" + token),
    ("authorization", "bearer " + jwt), ("apns-topic", topic), ("apns-push-type", "alert"), ("apns-priority", "10"), ("apns-id", apns_id),
    ("content-type", "application/json"), ("content-length", str(len(body))),
])
conn.send_data(1, body, end_stream=True)
sock.sendall(conn.data_to_send())
status, data, done, echoed, frames, ended_on_headers = None, b"", False, None, 0, False
while not done:
    chunk = sock.recv(65536)
    if not chunk:
        break
    for event in conn.receive_data(chunk):
        if isinstance(event, h2.events.ResponseReceived):
            status = dict(event.headers).get(":status")
            echoed = dict(event.headers).get("apns-id")
            ended_on_headers = event.stream_ended is not None
        elif isinstance(event, h2.events.DataReceived):
            data += event.data
            frames += 1
            conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
            done = True
    sock.sendall(conn.data_to_send())
print(json.dumps({"status": status, "alpn": sock.selected_alpn_protocol(), "body": data.decode(errors="replace"),
                  "sentId": apns_id, "echoedId": echoed, "dataFrames": frames, "endedOnHeaders": ended_on_headers}))
