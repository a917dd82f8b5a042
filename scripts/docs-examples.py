#!/usr/bin/env python3
"""Runs the shell examples of README.md and docs/ as written, and checks the answers they show.

    scripts/docs-examples.py [--bin PATH] [--bench PATH] [--timeout S] [--require-needs] [--keep]
                             [--verbose] [--list] [FILE.md ...]

With no FILE, README.md and every docs/**/*.md, in that order. Each ```sh block of a document
runs, in the order of the document, in one bash per document (so a server, a file or a variable
made by one block is there for the next), with `set -e -o pipefail`: the first command that fails
fails the block, and the document stops there. Each document runs in a fresh temp directory, as
the repository's root is for a reader: it holds copies of media/ and Tests/OpenAPI/, `richpush`
and `richpush-bench` on PATH (the built binaries: --bin or env RICHPUSH_BIN, default
.build/debug/richpush, richpush-bench beside it), and a `swift` that maps
`swift run [-c release] NAME ARGS` to the built NAME (and `swift build` to nothing). The document
runs in a process group of its own, killed at the end, so every server a block started in the
background stops with it. `DocsExamplesTests` (Tests/CLITests) runs this over every document.

Marks in a document (HTML comments, invisible when rendered):

    <!-- example: skip (why) -->    on the line before a fence: the block is not run; reported as skipped
    <!-- example: fails (why) -->   the block is known to fail (a bug in the code, named in why): it runs
                                    in a subshell, and is reported; once it passes, the run fails until
                                    the mark goes
    <!-- example: needs (schemathesis) -->
                                    commands the block needs beyond bash, curl, python3, openssl and
                                    richpush: without them it is skipped, saying so (with
                                    --require-needs, env RICHPUSH_REQUIRE_ENGINES=1, it fails instead)
    <!-- example: timeout 120 -->   this block's limit in seconds (default --timeout, 60)

Several go in one comment separated by `;`. In a block, a comment after a command checks its
standard output (or on its own line right after it, for a command of several lines):

    curl -s localhost:8080/health   # => {"status":"ok"}         exactly this (trailing white space aside)
    curl -s ... /api/notifications  # ~> [{"id":1,…"read":true   these pieces, in this order (… or ... between them)

Other comments are prose, not checked. Ports: a document's examples use fixed loopback ports
(8080, 2197, ...); when one of them is taken on this machine, every port of that document is
moved to a free one (in the text of its blocks, and for `serve` and the sandboxes' defaults) and
the report says so.

Exit status: 0 when every block that runs passes (skipped and known-failing ones aside), 1 when
any fails, 2 on a usage error. Python 3 standard library only.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_examples_text import (CHECK, DEFAULT_PORTS, FENCE, MARK, PORT_REFERENCE, SHELL_LANGUAGES, Block,  # noqa: E402
                                blocks_of, commands_of, free_ports, move_ports, parse_marks, ports_of, strip_check, taken)
# --- Making the script ---------------------------------------------------------------------------

PRELUDE = r"""
set -e -o pipefail
__rp_mark() { printf '%s\n' "$*" >> "$__RP_MARKS"; }
trap '__rp_mark "fail $__rp_block ${BASH_SOURCE[0]:-?} $LINENO $?"' ERR
__rp_expect() {   # DOC-LINE KIND EXPECTED ACTUAL
    if "$__RP_PYTHON" -c '
import sys
kind, expected, actual = sys.argv[1], sys.argv[2].strip(), sys.argv[3].rstrip()
if kind == "=>":
    sys.exit(0 if actual == expected else 1)
at = 0
for piece in expected.replace("...", "\u2026").split("\u2026"):
    piece = piece.strip()
    if not piece:
        continue
    found = actual.find(piece, at)
    if found < 0:
        sys.exit(1)
    at = found + len(piece)
' "$2" "$3" "$4"; then
        __rp_mark "check $__rp_block"
        return 0
    fi
    __rp_mark "mismatch $__rp_block $1"
    {
        printf '%s: the output differs from what the document shows\n' "$1"
        printf '  document (%s): %s\n' "$2" "$3"
        printf '  output: %s\n' "$4"
    } >> "$__RP_MISMATCHES"
    return 1
}
"""

SWIFT_SHIM = r"""#!/usr/bin/env bash
# docs-examples: `swift run [-c CONF] NAME ARGS…` runs the built NAME; `swift build` builds nothing.
case "$1" in
    run)
        shift
        while [[ $# -gt 0 && $1 == -* ]]; do
            case "$1" in
                -c|--configuration|--product|--package-path) shift 2 ;;
                *) shift ;;
            esac
        done
        name=$1; shift
        exec "$name" "$@" ;;
    build)
        echo "docs-examples: swift $*: not built here, richpush is $__RP_RICHPUSH" >&2
        exit 0 ;;
    *)
        echo "docs-examples: swift $*: not run by the examples (mark the block skip)" >&2
        exit 1 ;;
esac
"""

# `richpush` on PATH: the built binary, exec'd so that `$!` of `richpush serve &` is the server.
# When ports are moved, a sandbox started without --port is given its moved default.
RICHPUSH_WRAPPER = r"""#!/usr/bin/env bash
if [[ -n $__RP_PORTS && " $* " != *" --port "* ]]; then
    moved() { for pair in $__RP_PORTS; do [[ ${pair%%=*} == "$1" ]] && echo "${pair#*=}"; done; }
    case "$1" in
        serve) [[ " $* " != *" --config "* ]] && port=$(moved 8080) ;;   # a --config file's port is moved in its text
        apns-sandbox) port=$(moved 2197) ;;
        fcm-sandbox) port=$(moved 8093) ;;
        webpush-sandbox) port=$(moved 8094) ;;
        healthcheck) [[ -n $(moved 8080) ]] && export RICHPUSH_PORT=$(moved 8080) ;;
    esac
    if [[ -n $port ]]; then set -- "$@" --port "$port"; fi
fi
exec "$__RP_RICHPUSH" "$@"
"""


def render_block(block: Block, number: int, text: str, directory: Path) -> tuple[Path, list[int], int]:
    """Writes the block as a file to source; maps its lines to the document's. Returns the file,
    the map (file line → document line) and how many checks it holds."""
    lines = text.split("\n")
    out: list[str] = []
    origin: list[int] = []
    checks = 0

    def emit(line: str, doc_line: int) -> None:
        out.append(line)
        origin.append(doc_line)

    spans = commands_of(text)
    k = 0
    while k < len(spans):
        first, last = spans[k]
        command = lines[first : last + 1]
        body, kind, expected = strip_check(command[-1])
        command = command[:-1] + [body]
        # Checks on lines of their own right after the command belong to it.
        pieces = [expected] if kind else []
        while k + 1 < len(spans) and spans[k + 1][0] == spans[k + 1][1]:
            alone = lines[spans[k + 1][0]]
            stripped, more_kind, more = strip_check(alone)
            if not more_kind or stripped.strip():
                break
            if kind and more_kind != kind:
                raise SystemExit(f"{block.where(spans[k + 1][0])}: a command's checks must all be => or all ~>")
            kind = more_kind
            pieces.append(more)
            k += 1
        doc_first = block.line + first
        if kind and "".join(command).strip():
            checks += 1
            expected_text = ("\n" if kind == "=>" else " … ").join(pieces)
            emit("__rp_out=$(", doc_first)
            for n, line in enumerate(command):
                emit(line, doc_first + n)
            emit(")", block.line + last)
            emit(f"printf '%s\\n' \"$__rp_out\"", block.line + last)
            emit(f"__rp_expect {shlex.quote(block.where(last))} {shlex.quote(kind)} {shlex.quote(expected_text)} \"$__rp_out\"", block.line + last)
        else:
            if kind:
                raise SystemExit(f"{block.where(first)}: a check (# {kind}) with no command before it")
            for n, line in enumerate(command):
                emit(line, doc_first + n)
        k += 1
    path = directory / f"block-{number}.sh"
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
    return path, origin, checks


# --- Running -------------------------------------------------------------------------------------

RUNNING: "subprocess.Popen | None" = None   # the document's shell, whose group a signal must stop too


def interrupted(signum, frame) -> None:
    """SIGTERM or SIGINT (a test's timeout, Ctrl-C): the servers of the document running stop too."""
    if RUNNING is not None:
        try:
            os.killpg(RUNNING.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    print(f"docs-examples: stopped by signal {signum}", file=sys.stderr)
    os._exit(1)


def become_subreaper() -> None:
    """Orphans of a document (a server whose shell is gone) become this process's children, so
    they are reaped here and none is left a zombie in a container without an init."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def stop_group(process: "subprocess.Popen") -> None:
    """Stops the document's process group (its shell and everything started in the background):
    SIGTERM, then SIGKILL for what is left after 10 s."""
    for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            break
        deadline = time.monotonic() + wait
        gone = False
        while time.monotonic() < deadline and not gone:
            process.poll()
            reap()
            try:
                os.killpg(process.pid, 0)
                time.sleep(0.05)
            except ProcessLookupError:
                gone = True
        if gone:
            break
    try:
        process.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass
    reap()


@dataclass
class Outcome:
    block: Block
    status: str                   # ok, failed, skipped, not run, known failure, fixed
    seconds: float = 0.0
    checks: int = 0
    detail: str = ""


@dataclass
class DocumentRun:
    path: Path
    outcomes: list[Outcome] = field(default_factory=list)
    seconds: float = 0.0
    note: str = ""


# What a document's directory holds of the repository, copied (never linked: an example that writes
# beside them must not write into the repository).
COPIED = ["media", "Tests/OpenAPI"]


def prepare_directory(work: Path, richpush: Path, bench: Path | None) -> Path:
    """The document's working directory, as the repository's root is for a reader: copies of
    COPIED, and the tools on PATH. Returns the directory of the runner's own files."""
    for entry in COPIED:
        shutil.copytree(REPO / entry, work / entry)
    own = work / ".docs-examples"
    own.mkdir()
    (own / "richpush").write_text(RICHPUSH_WRAPPER)
    (own / "swift").write_text(SWIFT_SHIM)
    for tool in ("richpush", "swift"):
        (own / tool).chmod(0o755)
    if bench and bench.exists():
        (own / "richpush-bench").symlink_to(bench)
    return own


def run_document(path: Path, richpush: Path, bench: Path | None, default_timeout: float, keep: bool,
                 verbose: bool, require_needs: bool) -> DocumentRun:
    result = DocumentRun(path)
    blocks = blocks_of(path)
    missing: dict[int, list[str]] = {}
    provided = {"richpush", "swift"} | ({"richpush-bench"} if bench and bench.exists() else set())
    for number, block in enumerate(blocks, 1):
        absent = [tool for tool in block.needs if tool not in provided and shutil.which(tool) is None]
        if absent and not block.skip:
            missing[number] = absent
    if all(b.skip or n in missing for n, b in enumerate(blocks, 1)):
        result.outcomes = [outcome_without_running(n, b, missing, require_needs) for n, b in enumerate(blocks, 1)]
        return result

    moved: dict[int, int] = {}
    used = ports_of([b for n, b in enumerate(blocks, 1) if n not in missing])
    busy = sorted(p for p in used if taken(p))
    if busy:
        moved = dict(zip(sorted(used), free_ports(len(used))))
        result.note = (f"{'port' if len(busy) == 1 else 'ports'} {', '.join(map(str, busy))} {'is' if len(busy) == 1 else 'are'} taken here, "
                       f"so this run moved " + ", ".join(f"{a}→{b}" for a, b in moved.items()))

    work = Path(tempfile.mkdtemp(prefix="richpush-docs-"))
    own = prepare_directory(work, richpush, bench)
    marks, mismatches, log = own / "marks", own / "mismatches", own / "output.log"
    marks.touch()
    mismatches.touch()

    script = [PRELUDE]
    maps: dict[str, tuple[Block, list[int]]] = {}
    for number, block in enumerate(blocks, 1):
        if block.skip or number in missing:
            continue
        text = move_ports(block.text, moved) if moved else block.text
        file, origin, _ = render_block(block, number, text, own)
        maps[str(file)] = (block, origin)
        banner = f"──── {block.where()} (block {number})"
        script.append(f"__rp_block={number}; __rp_mark begin {number}; printf '\\n%s\\n' {shlex.quote(banner)}")
        if block.fails:
            # In a subshell, so that the document goes on after it (what it sets is lost).
            # (-E: the subshell keeps the ERR trap that names the failing line.)
            script.append(f"set +e -E; ( set -e; source {shlex.quote(str(file))} ); __rp_rc=$?; set -e +E")
            script.append(f"__rp_mark end {number} $__rp_rc")
        else:
            script.append(f"source {shlex.quote(str(file))}")
            script.append(f"__rp_mark end {number} 0")
    script.append("__rp_mark finished")
    main = own / "main.sh"
    main.write_text("\n".join(script) + "\n")

    env = {k: v for k, v in os.environ.items() if not k.startswith(("RICHPUSH_", "__RP_", "AWS_"))}
    env.update({
        "PATH": f"{own}:{env.get('PATH', '/usr/bin:/bin')}",
        "__RP_RICHPUSH": str(richpush),
        "__RP_MARKS": str(marks),
        "__RP_MISMATCHES": str(mismatches),
        "__RP_PYTHON": sys.executable,
        "__RP_PORTS": " ".join(f"{a}={b}" for a, b in moved.items()),
    })
    env.pop("TERM", None)

    global RUNNING
    started = time.monotonic()
    with open(log, "wb") as output:
        process = subprocess.Popen(["bash", "--noprofile", "--norc", str(main)], cwd=work, env=env,
                                   stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                                   start_new_session=True)
    RUNNING = process
    seen = 0
    current: int | None = None
    block_started = started
    events: list[list[str]] = []
    seconds: dict[int, float] = {}
    timed_out: int | None = None
    finished = False
    while True:
        exited = process.poll() is not None   # then this last read sees every mark it wrote
        with open(marks, "rb") as f:
            f.seek(seen)
            new = f.read()
        whole = new[: new.rfind(b"\n") + 1]
        seen += len(whole)
        for line in whole.decode(errors="replace").splitlines():
            event = line.split()
            if not event:
                continue
            events.append(event)
            if event[0] == "begin":
                current = int(event[1])
                block_started = time.monotonic()
            elif event[0] == "end":
                seconds[int(event[1])] = time.monotonic() - block_started
                current = None
            elif event[0] == "finished":
                finished = True
        if exited:
            break
        if current is not None and time.monotonic() - block_started > (blocks[current - 1].timeout or default_timeout):
            timed_out = current
            seconds[current] = time.monotonic() - block_started
            break
        time.sleep(0.05)
    stop_group(process)
    RUNNING = None
    result.seconds = time.monotonic() - started
    output_text = log.read_text(errors="replace")
    mismatch_text = mismatches.read_text()

    def excerpt(number: int, limit: int = 60) -> str:
        banner = f"──── {blocks[number - 1].where()} (block {number})"
        at = output_text.find(banner)
        lines = (output_text[at:] if at >= 0 else output_text).splitlines()
        if len(lines) > limit:
            # A failure's own report in the middle (schemathesis's FAILURES or ERRORS section, whose
            # end is its summary) is kept too, up to 80 lines: the end alone names no request.
            start = next((i for i, line in enumerate(lines) if re.search(r"=+ (FAILURES|ERRORS) =+", line)), None)
            tail = len(lines) - limit + 1
            if start is not None and 1 <= start < tail:
                kept = lines[start:min(start + 80, tail)]
                skipped = tail - start - len(kept)
                lines = (lines[:1] + ([f"      … ({start - 1} lines)"] if start > 1 else []) + kept
                         + ([f"      … ({skipped} lines)"] if skipped else []) + lines[tail:])
            else:
                lines = lines[:1] + [f"      … ({len(lines) - limit} lines)"] + lines[-limit + 1:]
        return "\n".join("    | " + line for line in lines)

    ends: dict[int, int] = {}
    failures: dict[int, list[list[str]]] = {}
    checks: dict[int, int] = {}
    for event in events:
        if event[0] == "end":
            ends[int(event[1])] = int(event[2])
        elif event[0] in ("fail", "mismatch"):
            failures.setdefault(int(event[1]), []).append(event)
        elif event[0] == "check":
            checks[int(event[1])] = checks.get(int(event[1]), 0) + 1

    stopped = False
    for number, block in enumerate(blocks, 1):
        if block.skip or number in missing:
            result.outcomes.append(outcome_without_running(number, block, missing, require_needs))
            continue
        took, count = seconds.get(number, 0.0), checks.get(number, 0)
        if stopped:
            result.outcomes.append(Outcome(block, "not run", detail="an earlier block failed"))
        elif number in ends and block.fails:
            if ends[number] == 0:
                result.outcomes.append(Outcome(block, "fixed", took, count, f"marked `fails ({block.fails})`, but it passes: remove the mark"))
            else:
                why = describe(failures.get(number, []), maps, mismatch_text)
                result.outcomes.append(Outcome(block, "known failure", took, count, f"{block.fails}\n{why}"))
        elif ends.get(number) == 0:
            result.outcomes.append(Outcome(block, "ok", took, count))
        else:
            stopped = True
            if timed_out == number:
                why = f"    timed out after {block.timeout or default_timeout:.0f} s (<!-- example: timeout S --> gives it longer)"
            elif number in failures:
                why = describe(failures[number], maps, mismatch_text)
            else:
                why = f"    bash ended ({process.returncode}) inside the block"
            result.outcomes.append(Outcome(block, "failed", took, count, why + "\n" + excerpt(number)))
    if verbose:
        print(output_text)
    if keep:
        result.note += f"{'; ' if result.note else ''}kept {work}"
    else:
        shutil.rmtree(work, ignore_errors=True)
    return result


def outcome_without_running(number: int, block: Block, missing: dict, require_needs: bool) -> Outcome:
    if block.skip:
        return Outcome(block, "skipped", detail=block.skip)
    why = f"needs {', '.join(missing[number])}, which is not installed"
    return Outcome(block, "failed" if require_needs else "skipped", detail=why)


def describe(failures: list[list[str]], maps: dict, mismatch_text: str) -> str:
    """What failed: the check that differed, else the command that exited non-zero."""
    for event in failures:
        if event[0] == "mismatch":
            where = event[2]
            for entry in re.split(r"(?m)^(?=\S+:\d+: the output differs)", mismatch_text):
                if entry.startswith(where + ":"):
                    return "    " + entry.strip().replace("\n", "\n    ")
    for event in failures:
        source, line, status = event[2], int(event[3]), event[4] if len(event) > 4 else "?"
        if source in maps:
            block, origin = maps[source]
            doc_line = origin[line - 1] if 0 < line <= len(origin) else block.line
            return f"    {block.path_label}:{doc_line}: exit {status}: {block_line(block, doc_line)}"
    return "    a command failed"


def block_line(block: Block, doc_line: int) -> str:
    lines = block.text.split("\n")
    n = doc_line - block.line
    return lines[n].strip() if 0 <= n < len(lines) else ""


def main() -> int:
    parser = argparse.ArgumentParser(description="Run the shell examples of README.md and docs/ (see the script's header).")
    parser.add_argument("files", nargs="*", type=Path)
    parser.add_argument("--bin", type=Path, default=Path(os.environ.get("RICHPUSH_BIN", REPO / ".build/debug/richpush")),
                        help="the richpush binary (env RICHPUSH_BIN; default .build/debug/richpush)")
    parser.add_argument("--bench", type=Path, default=None, help="the richpush-bench binary (default: beside --bin)")
    parser.add_argument("--timeout", type=float, default=60, help="seconds a block may take (default 60)")
    parser.add_argument("--require-needs", action="store_true", default=os.environ.get("RICHPUSH_REQUIRE_ENGINES") == "1",
                        help="a block whose `needs` are not installed fails instead of being skipped (env RICHPUSH_REQUIRE_ENGINES=1)")
    parser.add_argument("--keep", action="store_true", help="keep each document's temp directory")
    parser.add_argument("--list", action="store_true", help="list the blocks and their marks, run nothing")
    parser.add_argument("--verbose", action="store_true", help="print every document's whole output")
    args = parser.parse_args()

    files = [f.resolve() for f in args.files] or [REPO / "README.md"] + sorted((REPO / "docs").rglob("*.md"))
    if args.list:
        for path in files:
            for block in blocks_of(path):
                state = (f"skip ({block.skip})" if block.skip else f"fails ({block.fails})" if block.fails
                         else f"needs ({' '.join(block.needs)})" if block.needs else "run")
                print(f"{block.where()}: {state}")
        return 0
    richpush = args.bin.resolve()
    if not os.access(richpush, os.X_OK):
        print(f"docs-examples: no richpush binary at {richpush} (build it, or pass --bin / RICHPUSH_BIN)", file=sys.stderr)
        return 2
    bench = (args.bench or richpush.parent / "richpush-bench").resolve()
    become_subreaper()
    signal.signal(signal.SIGTERM, interrupted)
    signal.signal(signal.SIGINT, interrupted)

    started = time.monotonic()
    total: dict[str, int] = {}
    failed = False
    for path in files:
        run = run_document(path, richpush, bench, args.timeout, args.keep, args.verbose, args.require_needs)
        counts: dict[str, int] = {}
        for o in run.outcomes:
            counts[o.status] = counts.get(o.status, 0) + 1
            total[o.status] = total.get(o.status, 0) + 1
        label = Block(path, 0, "").path_label
        summary = ", ".join(f"{n} {s}" for s, n in counts.items()) or "no shell blocks"
        print(f"{label}: {summary} in {run.seconds:.1f} s{(' (' + run.note + ')') if run.note else ''}")
        for o in run.outcomes:
            facts = [f"{o.seconds:.1f} s"] if o.status not in ("skipped", "not run") else []
            if o.checks:
                facts.append(f"{o.checks} check{'s' if o.checks != 1 else ''}")
            head = f"  {o.status:<13} {o.block.where()}" + (f" ({', '.join(facts)})" if facts else "")
            detail = o.detail.split("\n", 1)
            print(head + (f": {detail[0].strip()}" if detail[0].strip() else ""))
            if len(detail) > 1:
                print(detail[1])
            if o.status in ("failed", "fixed"):
                failed = True
        sys.stdout.flush()
    print(f"docs-examples: {', '.join(f'{n} {s}' for s, n in total.items())} in {time.monotonic() - started:.1f} s: "
          f"{'FAILED' if failed else 'passed'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
