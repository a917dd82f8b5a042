#!/usr/bin/env python3
"""What JSON Schema's `format: date-time` makes of texts, to compare RichPush's reading with.

    scripts/rfc3339-reference.py < texts.json

Reads a JSON list of strings on standard input and prints a JSON list with, for each,
{"valid": V, "epoch": E}: V is jsonschema's verdict on `format: date-time`, the one schemathesis
checks with (rfc3339-validator on the text upper-cased, so `t` and `z` pass as RFC 3339 §5.6 lets
them), E the instant as seconds since 1970 (a float, its fraction read from the text's digits)
when valid, from Python's datetime, else null.

One quirk is Python's, not RFC 3339's: the validator's pattern ends in `$`, which also matches
before a final newline, so "…Z\n" passes it. RichPush refuses that (nothing follows the zone).

Tests/RichPushCoreTests/RFC3339Tests.swift runs it (through Tests/TestSupport/RFC3339Reference.swift).
"""

import datetime
import json
import re
import sys
from decimal import Decimal

from rfc3339_validator import validate_rfc3339


def epoch(text: str):
    upper = text.upper()
    fraction = re.search(r"\.(\d+)", upper)
    whole = re.sub(r"\.\d+", "", upper).replace("Z", "+00:00")
    try:
        moment = datetime.datetime.fromisoformat(whole)
        seconds = (moment - datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)).total_seconds()
    except (ValueError, OverflowError):
        return None
    return float(Decimal(int(seconds)) + (Decimal("0." + fraction.group(1)) if fraction else 0))


def main() -> int:
    texts = json.load(sys.stdin)
    answers = []
    for text in texts:
        valid = bool(validate_rfc3339(text.upper()))  # as jsonschema's format checker calls it
        answers.append({"valid": valid, "epoch": epoch(text) if valid else None})
    json.dump(answers, sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
