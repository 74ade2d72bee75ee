"""A Redis user's session through redis-py, printed one line per call.

Run against Redis and against the cache: the two transcripts must be the same. redis-py 5 and
later can speak RESP3 (redis-py 8 does by default, sending HELLO 3 first); the session runs once
per protocol the installed redis-py speaks. Usage: redis_py_session.py PORT
"""

import sys
import time

import redis

PORT = int(sys.argv[1])


def show(name, call):
    try:
        result = call()
    except Exception as error:  # the exception's class and text are part of the transcript
        result = f"{type(error).__name__}: {error}"
    print(f"{name}: {result!r}")


def session(r):
    show("ping", r.ping)
    show("flushall", r.flushall)
    show("set", lambda: r.set("a", "1"))
    show("get", lambda: r.get("a"))
    show("get missing", lambda: r.get("missing"))
    show("set nx existing", lambda: r.set("a", "2", nx=True))
    show("set xx missing", lambda: r.set("b", "2", xx=True))
    show("set ex", lambda: r.set("e", "1", ex=100))
    show("ttl", lambda: r.ttl("e"))
    show("set px", lambda: r.set("p", "1", px=100_000))
    show("pttl near", lambda: 99_000 < r.pttl("p") <= 100_000)
    show("mset", lambda: r.mset({f"m{i}": i for i in range(50)}))
    show("mget", lambda: r.mget([f"m{i}" for i in range(5)] + ["missing"]))
    show("exists", lambda: r.exists("m1", "m2", "missing", "m1"))
    show("delete", lambda: r.delete("m1", "m2", "missing"))
    show("unlink", lambda: r.unlink("m3"))
    show("expire", lambda: r.expire("m4", 100))
    show("ttl after expire", lambda: r.ttl("m4"))
    show("ttl missing", lambda: r.ttl("missing"))
    show("ttl without expiry", lambda: r.ttl("m5"))
    show("pexpire", lambda: r.pexpire("m5", 100))
    time.sleep(0.3)
    show("expired", lambda: r.get("m5"))
    show("incr", lambda: r.incr("n"))
    show("incrby", lambda: r.incrby("n", 10))
    show("decr", lambda: r.decr("n"))
    show("decrby", lambda: r.decrby("n", 5))
    show("incr text", lambda: (r.set("s", "abc"), r.incr("s")))
    show("incr overflow", lambda: (r.set("o", str(2**63 - 1)), r.incr("o")))
    show("dbsize", r.dbsize)
    show("info has keyspace_hits", lambda: "keyspace_hits" in r.info())
    show("info memory has maxmemory", lambda: "maxmemory" in r.info("memory"))
    pipe = r.pipeline(transaction=False)
    show("pipeline", lambda: pipe.set("q", 1).get("q").incr("q").get("missing").execute())
    value = bytes(range(256)) * 3906  # 999,936 bytes: under the cache's item limit
    show("large value", lambda: (r.set("big", value), r.get("big") == value))
    show("unknown command", lambda: r.execute_command("BOGUS", "x"))
    show("get without a key", lambda: r.execute_command("GET"))
    show("set without a value", lambda: r.execute_command("SET", "a"))
    show("ex not a number", lambda: r.execute_command("SET", "a", "b", "EX", "soon"))
    show("ex zero", lambda: r.execute_command("SET", "a", "b", "EX", "0"))
    show("nx and xx", lambda: r.execute_command("SET", "a", "b", "NX", "XX"))
    show("after errors", lambda: r.get("a"))
    show("select 0", lambda: r.execute_command("SELECT", "0"))
    show("echo", lambda: r.echo("hi"))
    show("flushdb", r.flushdb)
    show("dbsize after flush", r.dbsize)


protocols = [2]
try:
    redis.Redis(port=PORT, protocol=3)
    protocols.append(3)
except TypeError:  # redis-py before 5 speaks RESP2 only
    pass
print(f"protocols: {protocols}", file=sys.stderr)
for protocol in protocols:
    print(f"# RESP{protocol}")
    if protocol == 2:
        session(redis.Redis(port=PORT, socket_timeout=10))
    else:
        session(redis.Redis(port=PORT, socket_timeout=10, protocol=3))
