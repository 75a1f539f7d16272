#!/usr/bin/env python3
"""Reads `perf script` output of the kernel's fuse:fuse_request_send and
fuse:fuse_request_end tracepoints (stdin) and prints, per FUSE opcode, how many requests
the kernel sent and how long each took to be answered (from send to end: the daemon's work
plus the trip through /dev/fuse), largest total first. It shows where a workload's time
goes on a FUSE mount: which requests the kernel asks for, and which are slow to answer."""
import collections
import re
import sys

EVENT = re.compile(r"\s(\d+\.\d+):\s+fuse:fuse_request_(send|end): connection (\d+) req (\d+)(?: opcode \d+ \((\w+)\))?")
sent = {}
latencies = collections.defaultdict(list)
for line in sys.stdin:
    match = EVENT.search(line)
    if not match:
        continue
    seconds, kind, connection, request, opcode = float(match[1]), match[2], match[3], match[4], match[5]
    if kind == "send":
        sent[(connection, request)] = (seconds, opcode.removeprefix("FUSE_"))
    elif (connection, request) in sent:
        start, opcode = sent.pop((connection, request))
        latencies[opcode].append((seconds - start) * 1e6)

total = 0.0
for opcode, values in sorted(latencies.items(), key=lambda item: -sum(item[1])):
    values.sort()
    total += sum(values)
    print(f"    {opcode:<14} {len(values):6d} requests, answered in {sum(values) / len(values):7.1f} µs mean, "
          f"{values[len(values) // 2]:7.1f} µs median, {sum(values) / 1e3:7.1f} ms in all")
print(f"    {'all':<14} {sum(len(v) for v in latencies.values()):6d} requests, {total / 1e3:.1f} ms in all")
