#!/usr/bin/env python3
"""Reads cluster members' JSON logs (accessory-bridge --log-format json) for the scripts.

  cluster_log.py owners LOG...                  each slot and the member serving it now ("slot member" lines)
  cluster_log.py gaps SINCE SLOTS LOG...        for each slot of SLOTS (comma-separated), the seconds from SINCE (Unix
                                                time) until it was served again ("slot seconds" lines; none: not yet)
  cluster_log.py rebuilds SINCE LOG...          the slots started after SINCE: "slot start_ms accessories rebuild_ms"
"""
import json
import sys
from datetime import datetime


def events(paths):
    for path in paths:
        try:
            lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
        except OSError:
            continue
        for line in lines:
            if '"a slot"' not in line and "a slot" not in line and "rebuilt" not in line:
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            event["t"] = datetime.fromisoformat(event["time"].replace("Z", "+00:00")).timestamp()
            yield event


def owners(paths):
    owner = {}
    for event in sorted(events(paths), key=lambda e: e["t"]):
        slot, member = event.get("slot"), event.get("cluster.member")
        if event.get("message") == "serving a slot":
            owner[slot] = member
        elif event.get("message") == "stopped a slot" and owner.get(slot) == member:
            del owner[slot]
    for slot in sorted(owner, key=int):
        print(slot, owner[slot])


def gaps(since, slots, paths):
    wanted = set(slots.split(",")) if slots else set()
    seen = {}
    for event in sorted(events(paths), key=lambda e: e["t"]):
        if event.get("message") == "serving a slot" and event["t"] > since and event.get("slot") in wanted:
            seen.setdefault(event["slot"], event["t"] - since)
    for slot in sorted(seen, key=int):
        print(slot, f"{seen[slot]:.3f}")


def rebuilds(since, paths):
    rebuilt = {}
    for event in sorted(events(paths), key=lambda e: e["t"]):
        if event["t"] <= since:
            continue
        slot = event.get("slot")
        if event.get("message") == "rebuilt from the retained states":
            rebuilt[slot] = (event.get("accessories", "?"), event.get("rebuild_ms", "?"))
        elif event.get("message") == "serving a slot" and slot in rebuilt:
            accessories, rebuild_ms = rebuilt.pop(slot)
            print(slot, event.get("start_ms", "?"), accessories, rebuild_ms)


if __name__ == "__main__":
    command = sys.argv[1]
    if command == "owners":
        owners(sys.argv[2:])
    elif command == "gaps":
        gaps(float(sys.argv[2]), sys.argv[3], sys.argv[4:])
    elif command == "rebuilds":
        rebuilds(float(sys.argv[2]), sys.argv[3:])
    else:
        sys.exit(__doc__)
