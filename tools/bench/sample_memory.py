"""Runs a command and samples the memory of every process it starts, every 10 ms.

A process's footprint is the memory it has allocated, resident or swapped out (RssAnon + VmSwap
in /proc/PID/status), whether or not the machine has room to keep it all resident; files it maps
to read (a checkpoint it verifies) are not counted. Writes one JSON line per process named
`xtrain` (each rank) with its peak footprint, its peak resident memory (VmRSS, mapped files
included) and when the footprint peaked, then exits with the command's status.

    python3 tools/bench/sample_memory.py OUT.json -- COMMAND ARGS...
"""
import json
import os
import subprocess
import sys
import time


def descendants(root):
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            found.append(child)
            todo.append(child)
    return found


def status_kib(pid):
    values = {}
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in ("Name", "VmRSS", "RssAnon", "VmSwap"):
                    values[key] = rest.split()[0]
    except OSError:
        return None
    if "RssAnon" not in values:
        return None
    return values.get("Name", ""), int(values["VmRSS"]), int(values["RssAnon"]) + int(values.get("VmSwap", 0))


def main():
    out, command = sys.argv[1], sys.argv[sys.argv.index("--") + 1:]
    start = time.monotonic()
    process = subprocess.Popen(command)
    peaks = {}
    while process.poll() is None:
        for pid in descendants(process.pid):
            sample = status_kib(pid)
            if sample is None or sample[0] != "xtrain":
                continue
            resident, footprint = sample[1] / 1024, sample[2] / 1024
            peak = peaks.setdefault(pid, {"pid": pid, "footprint_mib": 0.0, "resident_mib": 0.0})
            peak["resident_mib"] = max(peak["resident_mib"], resident)
            if footprint > peak["footprint_mib"]:
                peak["footprint_mib"] = footprint
                peak["at_s"] = round(time.monotonic() - start, 2)
        time.sleep(0.01)
    with open(out, "w") as f:
        for peak in sorted(peaks.values(), key=lambda p: p["pid"]):
            f.write(json.dumps(peak) + "\n")
    sys.exit(process.returncode)


if __name__ == "__main__":
    main()
