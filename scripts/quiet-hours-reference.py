#!/usr/bin/env python3
"""Quiet hours by Python's zoneinfo, the reference RichPush's own are checked against.

Reads (from the file named as the argument, else stdin) {"zone": "America/New_York", "windows": [{"from": "22:00", "to": "08:00"}, ...],
"instants": [epoch seconds, ...]} on stdin and prints, for each window, a list with one entry
per instant: null when the instant is outside the window in that zone's wall-clock time, else
the epoch second the window ends (the next time the wall clock reads "to"; a reading the clocks
skip or show twice is read with fold 0, as zoneinfo does).
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
    return wall.astimezone(timezone.utc).timestamp()


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
