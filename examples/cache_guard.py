"""A cache guard: answer "certainly absent" before the database is asked.

    seen serve --dir ./seen-data &
    python3 examples/cache_guard.py 6379

Lookups of keys that were never created (typos, scans, attacks) stop at the
Bloom filter; only keys that may exist reach the database. The test suite
runs this file against a real `seen serve`.
"""
import sys

import redis

r = redis.Redis(port=int(sys.argv[1]) if len(sys.argv) > 1 else 6379)
database = {}  # stands in for the real, slow database
database_reads = 0


def create_user(user_id: str, record: dict) -> None:
    database[user_id] = record
    r.bf().add("users:exist", user_id)  # after the write, before any read


def get_user(user_id: str):
    global database_reads
    if not r.bf().exists("users:exist", user_id):
        return None  # certainly absent: the database is not asked
    database_reads += 1
    return database.get(user_id)  # present, or rarely a false positive


r.delete("users:exist")
r.bf().reserve("users:exist", 0.001, 100_000)
for i in range(1000):
    create_user(f"user:{i}", {"id": i})

assert all(get_user(f"user:{i}") == {"id": i} for i in range(1000))
assert database_reads == 1000
misses = sum(get_user(f"ghost:{i}") is None for i in range(10_000))
assert misses == 10_000
print(f"10000 lookups of absent keys, {database_reads - 1000} reached the database")
assert database_reads - 1000 < 50  # at 0.1%, about 10 expected
