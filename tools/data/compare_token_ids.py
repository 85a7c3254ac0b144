#!/usr/bin/env python3
"""Compares two token-id files (whitespace-separated integers) and reports the result.

    compare_token_ids.py LABEL EXPECTED ACTUAL

Prints "LABEL: N ids identical" and exits 0, or prints the first position where they differ
with the ids around it on both sides and exits 1.
"""

import sys


def read_ids(path):
    with open(path, encoding="ascii") as f:
        return [int(token) for token in f.read().split()]


def main() -> int:
    if len(sys.argv) != 4:
        print(__doc__, file=sys.stderr)
        return 2
    label, expected_path, actual_path = sys.argv[1:]
    expected, actual = read_ids(expected_path), read_ids(actual_path)
    if expected == actual:
        print(f"{label}: {len(expected)} ids identical")
        return 0
    first = next((i for i, (e, a) in enumerate(zip(expected, actual)) if e != a), min(len(expected), len(actual)))
    lo, hi = max(0, first - 8), first + 8
    print(f"{label}: MISMATCH at id {first} (expected {len(expected)} ids, got {len(actual)})")
    print(f"  expected[{lo}:{hi}] = {expected[lo:hi]}")
    print(f"  actual  [{lo}:{hi}] = {actual[lo:hi]}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
