"""What pymemcache's stats() reads from a server after a workload, one line per stat.

Usage: pymemcache_stats.py PORT sizes|evict
  sizes: 300 items of 10-byte values and 20 of 5000-byte values, keys of 8 bytes (two size classes).
  evict: 30,000 items of 1000-byte values, more than a server of a few MB keeps.
Prints "items NAME VALUE", "slabs NAME VALUE" and "stats NAME VALUE" lines: what
stats("items"), stats("slabs") and stats() returned.
"""

import sys

from pymemcache.client.base import Client

client = Client(("127.0.0.1", int(sys.argv[1])), connect_timeout=5, timeout=30)
workload = sys.argv[2]
if workload == "sizes":
    client.set_many({f"small{i:03}": b"s" * 10 for i in range(300)}, noreply=False)
    client.set_many({f"large{i:03}": b"L" * 5000 for i in range(20)}, noreply=False)
elif workload == "evict":
    value = b"e" * 1000
    for start in range(0, 30000, 500):
        batch = {f"evict{i}": value for i in range(start, start + 500)}
        client.set_many(batch, noreply=False)
else:
    sys.exit(f"unknown workload {workload}")


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


for section, stats in (
    ("items", client.stats("items")),
    ("slabs", client.stats("slabs")),
    ("stats", client.stats()),
):
    for name, value in stats.items():
        print(section, text(name), text(value))
