"""A memcached user's session through pymemcache, printed one line per call.

Run against memcached and against the cache: the two transcripts must be the same (the test
normalises what is each server's own: the version, CAS values). Usage: pymemcache_session.py PORT
"""

import sys
import time

from pymemcache.client.base import Client

client = Client(("127.0.0.1", int(sys.argv[1])), connect_timeout=5, timeout=10)


def show(name, call):
    try:
        result = call()
    except Exception as error:  # the exception's class and text are part of the transcript
        result = f"{type(error).__name__}: {error}"
    print(f"{name}: {result!r}")


show("flush_all", client.flush_all)
show("set", lambda: client.set("k1", b"v1", noreply=False))
show("get", lambda: client.get("k1"))
show("gets value", lambda: client.gets("k1")[0])
show("cas current", lambda: client.cas("k1", b"v2", client.gets("k1")[1], noreply=False))
show("cas stale", lambda: client.cas("k1", b"v3", b"999999", noreply=False))
show("get after cas", lambda: client.get("k1"))
show("add existing", lambda: client.add("k1", b"x", noreply=False))
show("add new", lambda: client.add("k2", b"x", noreply=False))
show("replace missing", lambda: client.replace("missing", b"x", noreply=False))
show("append", lambda: client.append("k2", b"yz", noreply=False))
show("prepend", lambda: client.prepend("k2", b"w", noreply=False))
show("get appended", lambda: client.get("k2"))
show("flags", lambda: client.raw_command(b"get k2", b"END\r\n"))
show("set flags", lambda: client.set("f", b"1", flags=12345, noreply=False))
show("get flags", lambda: client.raw_command(b"get f", b"END\r\n"))
many = {f"m{i}": str(i).encode() * (i % 50 + 1) for i in range(200)}
show("set_many", lambda: client.set_many(many, noreply=False))
show("get_many", lambda: client.get_many(list(many) + ["missing"]) == many)
show("gets_many", lambda: sorted(client.gets_many(["m1", "m2", "missing"])))
show("delete", lambda: client.delete("k1", noreply=False))
show("delete missing", lambda: client.delete("k1", noreply=False))
show("delete_many", lambda: client.delete_many(list(many), noreply=False))
show("get deleted", lambda: client.get_many(list(many)))
show("incr missing", lambda: client.incr("n", 1, noreply=False))
show("set number", lambda: client.set("n", b"10", noreply=False))
show("incr", lambda: client.incr("n", 5, noreply=False))
show("decr below zero", lambda: client.decr("n", 100, noreply=False))
show("incr to the top", lambda: client.incr("n", 2**64 - 1, noreply=False))
show("incr wraps", lambda: client.incr("n", 1, noreply=False))
# (memcached pads a number that got shorter with spaces, "0" then 19 of them; the cache does not)
show("set text", lambda: client.set("s", b"abc", noreply=False))
show("incr text", lambda: client.incr("s", 1, noreply=False))
show("touch", lambda: client.touch("n", 100, noreply=False))
show("touch missing", lambda: client.touch("missing", 100, noreply=False))
show("set expiring", lambda: client.set("e", b"1", expire=1, noreply=False))
show("get before expiry", lambda: client.get("e"))
time.sleep(2.1)
show("get after expiry", lambda: client.get("e"))
show("set negative expiry", lambda: client.raw_command(b"set neg 0 -1 1\r\nx", b"\r\n"))
show("get negative expiry", lambda: client.get("neg"))
show("noreply set", lambda: client.set("nr", b"v", noreply=True))
show("get noreply", lambda: client.get("nr"))
show("key of 250 bytes", lambda: client.set("k" * 250, b"1", noreply=False))
show("get key of 250", lambda: client.get("k" * 250))
show("key of 251 bytes", lambda: client.set("k" * 251, b"1", noreply=False))
show("key with a space", lambda: client.set("a b", b"1", noreply=False))
show("utf-8 key", lambda: client.set("ключ", b"1", noreply=False))
# Values near the 1 MiB item limit: both keep 1,000,000 bytes and refuse 1 MiB and more.
for size in [500_000, 1_000_000, 1 << 20, 2 << 20]:
    value = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    show(f"set {size} bytes", lambda: client.set(f"big{size}", value, noreply=False))
    show(f"get {size} bytes", lambda: client.get(f"big{size}") == value)
show("refused value leaves the connection usable", lambda: client.get("k2"))
# Malformed commands.
show("unknown command", lambda: client.raw_command(b"bogus", b"\r\n"))
show("length not a number", lambda: client.raw_command(b"set a 0 0 notanumber", b"\r\n"))
show("data longer than its length", lambda: client.raw_command(b"set a 0 0 1\r\nxyz", b"\r\n"))
show("after malformed", lambda: client.get("k2"))
stats = client.stats()
show("stats", lambda: sorted(k for k in (b"get_hits", b"get_misses", b"curr_items", b"evictions",
                                          b"limit_maxbytes", b"cmd_get", b"cmd_set") if k in stats))
show("verbosity", lambda: client.raw_command(b"verbosity 1", b"\r\n"))
show("quit", client.quit)
