"""The documents' side of scripts/docs-examples.py: their ```sh blocks with their marks and
checks, and the loopback ports their examples name (moved when one is taken here)."""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SHELL_LANGUAGES = {"sh", "bash", "shell"}
MARK = re.compile(r"^\s*<!--\s*example:\s*(.*?)\s*-->\s*$")
FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w+-]*)")
CHECK = re.compile(r"(?:^|\s)#\s?(=>|~>)\s?(.*)$")


# --- Parsing -------------------------------------------------------------------------------------

@dataclass
class Block:
    path: Path
    line: int                      # the line of the first command (1-based), after the fence
    text: str
    skip: str | None = None
    fails: str | None = None
    needs: list[str] = field(default_factory=list)
    timeout: float | None = None

    def where(self, offset: int = 0) -> str:
        return f"{self.path_label}:{self.line + offset}"

    @property
    def path_label(self) -> str:
        try:
            return str(self.path.resolve().relative_to(REPO))
        except ValueError:
            return str(self.path)


def parse_marks(comment: str, where: str) -> dict:
    marks: dict = {}
    parts, depth, current = [], 0, ""
    for c in comment:          # `;` separates marks, outside a reason's parentheses
        depth += {"(": 1, ")": -1}.get(c, 0)
        if c == ";" and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += c
    parts.append(current)
    for part in filter(None, (p.strip() for p in parts)):
        m = re.fullmatch(r"(skip|fails|needs)\s*\((.+)\)", part, re.S)
        if m:
            marks[m.group(1)] = m.group(2).strip()
            continue
        m = re.fullmatch(r"timeout\s+(\d+(?:\.\d+)?)", part)
        if m:
            marks["timeout"] = float(m.group(1))
            continue
        raise SystemExit(f"{where}: unknown example mark {part!r} (skip (why), fails (why), needs (commands), timeout SECONDS)")
    return marks


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").split("\n")
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, language = m.groups()
        start = i
        i += 1
        body = []
        while i < len(lines) and not (lines[i].strip().startswith(fence[0] * len(fence)) and lines[i].strip().strip(fence[0]) == ""):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        i += 1
        if language not in SHELL_LANGUAGES:
            continue
        marks = {}
        before = start - 1
        if before >= 0 and MARK.match(lines[before]):
            marks = parse_marks(MARK.match(lines[before]).group(1), f"{path}:{before + 1}")
        blocks.append(Block(path, start + 2, "\n".join(body), marks.get("skip"), marks.get("fails"),
                            marks.get("needs", "").replace(",", " ").split(), marks.get("timeout")))
    # A mark that is not right before a shell fence is a mistake.
    for n, line in enumerate(lines):
        if MARK.match(line) and not any(b.line - 2 == n + 1 for b in blocks):
            raise SystemExit(f"{path}:{n + 1}: an example mark must be on the line right before a ```sh fence")
    return blocks


def commands_of(text: str) -> list[tuple[int, int]]:
    """Splits a block into commands: (first line, last line), 0-based, inclusive. A command ends at
    a new line outside quotes, not after a backslash; a here-document's lines belong to it."""
    lines = text.split("\n")
    spans = []
    i = 0
    quote = None
    while i < len(lines):
        start = i
        heredocs: list[str] = []
        while True:
            line = lines[i]
            j = 0
            continued = False
            while j < len(line):
                c = line[j]
                if quote == "'":
                    if c == "'":
                        quote = None
                elif quote == '"':
                    if c == "\\":
                        j += 1
                    elif c == '"':
                        quote = None
                elif c == "\\":
                    if j == len(line) - 1:
                        continued = True
                    j += 1
                elif c in "'\"":
                    quote = c
                elif c == "#" and (j == 0 or line[j - 1] in " \t;|&("):
                    break
                elif c == "<" and line.startswith("<<", j) and not line.startswith("<<<", j):
                    m = re.match(r"<<-?\s*(['\"]?)(\w+)\1", line[j:])
                    if m:
                        heredocs.append(m.group(2))
                        j += m.end() - 1
                j += 1
            if quote or continued:
                i += 1
                if i >= len(lines):
                    break
                continue
            for delimiter in heredocs:
                i += 1
                while i < len(lines) and lines[i].strip() != delimiter:
                    i += 1
            break
        spans.append((start, min(i, len(lines) - 1)))
        i += 1
    return spans


def strip_check(line: str) -> tuple[str, str | None, str | None]:
    """The line without its `# => …` / `# ~> …` comment, the kind and the expected text."""
    m = CHECK.search(line)
    if not m:
        return line, None, None
    return line[: m.start()].rstrip(), m.group(1), m.group(2).strip()


# --- Ports ---------------------------------------------------------------------------------------

DEFAULT_PORTS = {"serve": 8080, "apns-sandbox": 2197, "fcm-sandbox": 8093, "webpush-sandbox": 8094}
# Where a port is named: a loopback URL or address, --port N, --metrics-port N, "port": N (a --config file).
PORT_REFERENCE = re.compile(r"(?<=(?:localhost|127\.0\.0\.1):)(\d{4,5})\b|(?<=--port )(\d{4,5})\b"
                            r"|(?<=--metrics-port )(\d{4,5})\b|(?<=\"port\": )(\d{4,5})\b")


def ports_of(blocks: list[Block]) -> set[int]:
    ports = set()
    for block in blocks:
        if block.skip:
            continue
        ports.update(int(next(filter(None, groups))) for groups in PORT_REFERENCE.findall(block.text))
        for command, port in DEFAULT_PORTS.items():
            if re.search(rf"\brichpush {command}\b", block.text):
                ports.add(port)
    return ports


def taken(port: int) -> bool:
    """True when a server could not listen on the port here (as servers do, with SO_REUSEADDR)."""
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return True
    return False


def free_ports(count: int) -> list[int]:
    """`count` different free loopback ports (each held until all are chosen)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def move_ports(text: str, moved: dict[int, int]) -> str:
    def replace(m: re.Match) -> str:
        port = int(m.group(0))
        return str(moved.get(port, port))
    return PORT_REFERENCE.sub(replace, text)
