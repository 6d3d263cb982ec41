#!/usr/bin/env python3
"""Each controller's spec, written again in Python from ../shared/spec alone, against a running
server: random requests, the spec model's answer and the server's compared (docs/RELIABILITY.md).
Prints how many cases reached each outcome; exits 1 on any difference, listing up to ten."""
import argparse
import sys
import time
import urllib.error
import urllib.request

import app_discovery
import cas
import cert_rotation
import customize
import delete_graph
import mesh_root_certificate
from common import TALLY


def wait_ready(base, seconds=30):
    """Polls `/readyz` until the server answers 200 (`make differential` has just started it)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            with urllib.request.urlopen(base + "/readyz") as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, ConnectionError):
            if time.monotonic() > deadline:
                raise
        time.sleep(0.1)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("base", help="the server's base URL, e.g. http://127.0.0.1:8089")
    parser.add_argument("--count", type=int, default=2000,
                        help="random requests per comparison (a tenth for the manager's pairs)")
    parser.add_argument("--seed", type=int, default=0, help="the first case's seed")
    args = parser.parse_args()
    wait_ready(args.base)
    pool = cas.make_pool()
    differences = []
    differences += delete_graph.run(args.base, args.seed, args.count)
    differences += app_discovery.run(args.base, args.seed, args.count)
    differences += mesh_root_certificate.run(args.base, args.seed, args.count, pool)
    differences += customize.run(args.base, args.seed, args.count)
    differences += cert_rotation.run(args.base, args.seed, max(1, args.count // 10), pool)
    for outcome, n in sorted(TALLY.items()):
        print(f"{n:8} {outcome}")
    for d in differences[:10]:
        print("DIFFERENCE", d[:2000])
    print(f"spec models: {len(differences)} differences")
    sys.exit(1 if differences else 0)


main()
