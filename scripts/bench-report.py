#!/usr/bin/env python3
"""Prints the hook/floor ratios of the last `cargo bench` run from target/criterion.

For every group with `hook` and `floor` benches (see hooks/benches/hooks.rs) and every size:
the mean time of each, their ratio, and the hook time per object relative to the smallest size
(how cost grows with size: 1.0 means linear).
"""
import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")


def mean_ns(path):
    with open(path / "new" / "estimates.json") as f:
        return json.load(f)["mean"]["point_estimate"]


print(f"| group | size | hook | floor | hook/floor | hook per object vs smallest |")
print(f"| --- | ---: | ---: | ---: | ---: | ---: |")
for group in sorted(p for p in root.iterdir() if (p / "hook").is_dir() and (p / "floor").is_dir()):
    sizes = sorted(int(p.name) for p in (group / "hook").iterdir() if p.name.isdigit())
    base = None
    for n in sizes:
        hook = mean_ns(group / "hook" / str(n))
        floor = mean_ns(group / "floor" / str(n))
        per = hook / n
        base = base or per
        fmt = lambda ns: f"{ns / 1e6:.3f} ms" if ns >= 1e5 else f"{ns / 1e3:.1f} µs"
        print(f"| {group.name} | {n} | {fmt(hook)} | {fmt(floor)} | {hook / floor:.2f} | {per / base:.2f} |")
