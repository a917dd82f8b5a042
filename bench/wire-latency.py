#!/usr/bin/env python3
"""Request-to-response times as the wire saw them, from a pcap of keep-alive HTTP/1.1 traffic.

Usage: wire-latency.py CAPTURE.pcap SERVER_PORT

For every connection, a request is a client-to-server segment whose payload starts with an HTTP
method; its response ends with the last server-to-client data segment before that connection's
next request (no pipelining, as wrk and richpush-bench send). Prints one line:

    wire COUNT MEAN P10 P25 P50 P75 P90 P99    (microseconds, request sent to response's last byte)

The capture must use a snap length that keeps the TCP header and a few payload bytes (-s 128).
"""
import struct
import sys


def packets(path):
    with open(path, "rb") as f:
        header = f.read(24)
        magic = struct.unpack("<I", header[:4])[0]
        if magic == 0xA1B2C3D4:
            endian, scale = "<", 1e-6
        elif magic == 0xA1B23C4D:
            endian, scale = "<", 1e-9
        else:
            raise SystemExit(f"{path}: not a little-endian pcap file")
        linktype = struct.unpack(endian + "I", header[20:24])[0]
        offset = {1: 14, 113: 16, 276: 20}.get(linktype)  # Ethernet, Linux cooked v1, v2
        if offset is None:
            raise SystemExit(f"{path}: link type {linktype} is not handled")
        while True:
            record = f.read(16)
            if len(record) < 16:
                return
            seconds, fraction, captured, _ = struct.unpack(endian + "IIII", record)
            data = f.read(captured)
            ip = data[offset:]
            if len(ip) < 20 or ip[0] >> 4 != 4:
                continue
            ihl = (ip[0] & 0x0F) * 4
            total = struct.unpack("!H", ip[2:4])[0]
            if ip[9] != 6:
                continue
            tcp = ip[ihl:]
            if len(tcp) < 20:
                continue
            sport, dport = struct.unpack("!HH", tcp[:4])
            data_offset = (tcp[12] >> 4) * 4
            payload_length = total - ihl - data_offset
            yield seconds + fraction * scale, sport, dport, payload_length, tcp[data_offset:data_offset + 8]


def main():
    path, port = sys.argv[1], int(sys.argv[2])
    methods = (b"GET ", b"HEAD", b"POST", b"PUT ", b"DELE")
    pending = {}   # client port -> time of its request
    last = {}      # client port -> time of the newest response segment of that request
    latencies = []
    for time, sport, dport, length, head in packets(path):
        if length <= 0:
            continue
        if dport == port and head[:4] in methods:
            if sport in pending and sport in last:
                latencies.append(last[sport] - pending[sport])
            pending[sport] = time
            last.pop(sport, None)
        elif sport == port and dport in pending:
            last[dport] = time
    for client, start in pending.items():
        if client in last:
            latencies.append(last[client] - start)
    if not latencies:
        raise SystemExit("no request/response pairs found")
    latencies.sort()
    n = len(latencies)

    def pct(p):
        return latencies[min(n - 1, int(p / 100 * n))] * 1e6

    mean = sum(latencies) / n * 1e6
    print("wire %d %.0f %.0f %.0f %.0f %.0f %.0f %.0f" % (n, mean, pct(10), pct(25), pct(50), pct(75), pct(90), pct(99)))


main()
