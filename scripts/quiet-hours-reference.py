#!/usr/bin/env python3
"""Quiet hours by Python's zoneinfo, the reference RichPush's own are checked against.

Reads (from the file named as the argument, else stdin) {"zone": "America/New_York", "windows": [{"from": "22:00", "to": "08:00"}, ...],
"instants": [epoch seconds, ...]} on stdin and prints, for each window, a list with one entry
per instant: null when the instant is outside the window in that zone's wall-clock time, else
the epoch second the window ends: the first time after the instant the wall clock reads "to" (of a
reading the clocks show twice, the first after the instant; one they skip is read with fold 0).
"""
import json
import sys
from datetime import datetime, time, timedelta, timezone
from zoneinfo import ZoneInfo


def end(instant, zone, start, stop):
    local = datetime.fromtimestamp(instant, timezone.utc).astimezone(zone)
    now = local.time().replace(microsecond=0)
    inside = start <= now < stop if start < stop else (now >= start or now < stop)
    if not inside:
        return None
    day = local.date() + (timedelta(days=1) if start > stop and now >= start else timedelta())
    wall = datetime.combine(day, stop, tzinfo=zone)  # fold 0
    # The readings that exist (both folds of a repeated time; none of a skipped one, read at fold 0):
    # the first after the instant.
    real = [w.astimezone(timezone.utc).timestamp() for w in (wall, wall.replace(fold=1))
            if w.astimezone(timezone.utc).astimezone(zone).replace(tzinfo=None) == w.replace(tzinfo=None)]
    if not real:
        return wall.astimezone(timezone.utc).timestamp()
    after = sorted(t for t in set(real) if t > instant)
    return after[0] if after else max(real)


def main():
    asked = json.load(open(sys.argv[1]) if len(sys.argv) > 1 else sys.stdin)
    zone = ZoneInfo(asked["zone"])
    answers = []
    for window in asked["windows"]:
        start = time.fromisoformat(window["from"])
        stop = time.fromisoformat(window["to"])
        answers.append([end(t, zone, start, stop) for t in asked["instants"]])
    json.dump(answers, sys.stdout)


if __name__ == "__main__":
    main()
