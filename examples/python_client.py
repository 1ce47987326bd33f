"""Using seen from Python with redis-py, exactly as with RedisBloom.

    seen serve --dir ./seen-data &
    python3 examples/python_client.py            # port 6379, RESP2 then RESP3
    python3 examples/python_client.py 6380

The test suite runs this file against a real `seen serve`.
"""
import sys

import redis


def crawl_dedup(r: redis.Redis, key: str) -> None:
    # A crawler's frontier: only fetch URLs never seen before.
    r.delete(key)
    r.bf().reserve(key, 0.001, 100_000)
    urls = [f"https://example.com/page/{i % 700}" for i in range(1000)]
    fetched = [u for u in urls if r.bf().add(key, u)]
    assert len(fetched) == 700, len(fetched)
    assert r.bf().exists(key, urls[0])
    assert r.bf().card(key) == 700

    # Batches: one round trip for many URLs.
    fresh = r.bf().madd(key, "https://example.com/new", urls[1])
    assert list(fresh) == [1, 0], fresh
    assert list(r.bf().mexists(key, "https://example.com/new", "nope")) == [1, 0]

    info = r.bf().info(key)
    if isinstance(info, dict):  # RESP3: redis-py returns the map as is
        info = {k.decode() if isinstance(k, bytes) else k: v for k, v in info.items()}
        capacity, inserted = info["Capacity"], info["Number of items inserted"]
    else:
        capacity, inserted = info.capacity, info.insertedNum
    assert (capacity, inserted) == (100_000, 701), info

    # Forget everything after 30 days.
    assert r.expire(key, 30 * 24 * 3600)
    assert 0 < r.ttl(key) <= 30 * 24 * 3600
    assert r.type(key) in (b"MBbloom--", "MBbloom--")


def main() -> None:
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 6379
    for protocol in (2, 3):
        r = redis.Redis(host="127.0.0.1", port=port, protocol=protocol)
        assert r.ping()
        crawl_dedup(r, f"py:urls:resp{protocol}")
        # Binary-safe items.
        assert r.bf().add(f"py:bin:{protocol}", b"\x00\xff\r\n") in (1, True)
        assert r.bf().exists(f"py:bin:{protocol}", b"\x00\xff\r\n") in (1, True)
        # An error is an exception, and the connection stays usable.
        try:
            r.bf().reserve(f"py:urls:resp{protocol}", 0.01, 10)
            raise AssertionError("BF.RESERVE of an existing key must fail")
        except redis.ResponseError as e:
            assert "item exists" in str(e), e
        assert r.ping()
        print(f"RESP{protocol}: ok")


if __name__ == "__main__":
    main()
