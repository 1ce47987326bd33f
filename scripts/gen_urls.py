#!/usr/bin/env python3
"""Writes URL-like lines with a known share of duplicates, reproducibly.

    scripts/gen_urls.py LINES DUP_FRACTION SEED > urls.txt

Distinct lines are `https://<host>/<path>/<id>?ref=<n>` (about 69 bytes);
each duplicate repeats a uniformly chosen earlier line. Prints the number of
distinct lines on stderr.
"""
import random
import sys

lines, dup, seed = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
hosts = [f"www.example-{i:04d}.com" for i in range(5000)]
words = ["news", "article", "product", "blog", "category", "item", "page", "story"]
out = sys.stdout
buf = []
distinct = []
for _ in range(lines):
    if distinct and rng.random() < dup:
        line = distinct[rng.randrange(len(distinct))]
    else:
        n = len(distinct)
        line = (f"https://{hosts[rng.randrange(5000)]}/{words[n % 8]}/"
                f"{rng.getrandbits(40):012x}/{n}?ref=feed-{n % 977}")
        distinct.append(line)
    buf.append(line)
    if len(buf) >= 65536:
        out.write("\n".join(buf) + "\n")
        buf.clear()
if buf:
    out.write("\n".join(buf) + "\n")
print(len(distinct), file=sys.stderr)
