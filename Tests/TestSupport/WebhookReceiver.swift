import Foundation

/// A webhook receiver nobody here wrote the checks of: Python's `http.server`, verifying each
/// `X-RichPush-Signature` with Python's `hmac` as a receiver would, appending each event it takes
/// to a JSON-lines file. While a file `fail` exists beside it, it answers 503; while `stall`
/// exists, it holds each request 30 s. Each request is a line of `requests` as it arrives:
/// `POST` and its `traceparent` header (`-` without).
///
/// It unblocks SIGTERM first: a process spawned from the test process's threads inherits their
/// signal mask, in which SIGTERM is blocked, so `Process.terminate()` left every receiver
/// running after its test (five a suite).
public let webhookReceiver = #"""
import hashlib, hmac, http.server, json, os, signal, sys, time
signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
signal.signal(signal.SIGTERM, signal.SIG_DFL)
port, directory, secret = int(sys.argv[1]), sys.argv[2], sys.argv[3].encode()
class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with open(os.path.join(directory, "requests"), "a") as f: f.write("POST " + self.headers.get("traceparent", "-") + "\n")
        if os.path.exists(os.path.join(directory, "stall")):
            time.sleep(30)
        if os.path.exists(os.path.join(directory, "fail")):
            self.send_response(503); self.end_headers(); return
        fields = dict(part.split("=", 1) for part in self.headers.get("X-RichPush-Signature", "").split(","))
        expected = hmac.new(secret, fields.get("t", "").encode() + b"." + body, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, fields.get("v1", "")) or abs(time.time() - int(fields.get("t", "0"))) > 300:
            with open(os.path.join(directory, "bad"), "a") as f: f.write("bad signature\n")
            self.send_response(401); self.end_headers(); return
        document = json.loads(body)
        events = document["events"] if "events" in document else [document]
        with open(os.path.join(directory, "events.jsonl"), "a") as f:
            for event in events: f.write(json.dumps(event) + "\n")
        self.send_response(204); self.end_headers()
    def log_message(self, *args): pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()
"""#


/// Starts `webhookReceiver` on a free port, writing beside it in `directory`; the caller ends it.
public func startWebhookReceiver(in directory: URL, secret: String) throws -> (Process, Int) {
    let script = directory.appendingPathComponent("receiver.py")
    try webhookReceiver.write(to: script, atomically: true, encoding: .utf8)
    let port = freePort()
    let receiver = Process()
    receiver.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    receiver.arguments = ["python3", script.path, String(port), directory.path, secret]
    receiver.standardOutput = FileHandle.nullDevice
    receiver.standardError = FileHandle.nullDevice
    try receiver.run()
    return (receiver, port)
}
