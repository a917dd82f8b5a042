#!/usr/bin/env python3
"""An OTLP/HTTP trace receiver, with OpenTelemetry's own protobuf definitions (PyPI's opentelemetry-proto).

    scripts/otlp-receiver.py PORT OUT.jsonl

Takes POST /v1/traces (application/x-protobuf, an ExportTraceServiceRequest, gzip or not), answers
200 with an empty ExportTraceServiceResponse, and appends one JSON line per span to OUT.jsonl:
{"service","traceId","spanId","parentSpanId","name","kind","attributes":{…},"status"}, ids in hex.
Anything else is 404; a body that does not decode is 400 (and written to OUT.jsonl as
{"error": …}, so that a test sees it). Tests/CLITests/TracesCLITests.swift runs it as the
collector two `serve` nodes export to.
"""
import gzip
import json
import signal
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest, ExportTraceServiceResponse


def value(any_value):
    kind = any_value.WhichOneof("value")
    if kind is None:
        return None
    if kind in ("array_value", "kvlist_value"):
        return str(getattr(any_value, kind))
    return getattr(any_value, kind)


class Handler(BaseHTTPRequestHandler):
    def do_POST(self):
        if self.path != "/v1/traces":
            self.send_error(404)
            return
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        lines = []
        try:
            request = ExportTraceServiceRequest()
            request.ParseFromString(body)
            for resource_spans in request.resource_spans:
                resource = {a.key: value(a.value) for a in resource_spans.resource.attributes}
                for scope_spans in resource_spans.scope_spans:
                    for span in scope_spans.spans:
                        lines.append({
                            "service": resource.get("service.name"),
                            "traceId": span.trace_id.hex(),
                            "spanId": span.span_id.hex(),
                            "parentSpanId": span.parent_span_id.hex(),
                            "name": span.name,
                            "kind": span.kind,
                            "attributes": {a.key: value(a.value) for a in span.attributes},
                            "status": span.status.code,
                        })
        except Exception as error:  # a body that is not an ExportTraceServiceRequest
            lines.append({"error": repr(error)})
            self.send_error(400)
        else:
            answer = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)
        with open(sys.argv[2], "a") as out:
            for line in lines:
                out.write(json.dumps(line) + "\n")

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    # Spawned from a test process's thread it inherits a mask with SIGTERM blocked: unblocked, so terminate() ends it.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
