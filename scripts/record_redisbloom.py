#!/usr/bin/env python3
"""Records RedisBloom's exact replies to the commands of issue 37 (sizing at
every error rate, BF.DEBUG, filters too large to create, dump headers and
chunks that are refused), for crates/seen/tests/server/drop_in.rs to replay
against `seen serve`.

    python3 scripts/record_redisbloom.py /path/to/redisbloom.so \
        > crates/seen/tests/server/vectors/redisbloom-2.8-more.json

Starts its own redis-server (on a free port, no persistence) with the
module loaded, and stops it. Each case is a list of commands sent in order
on one RESP2 connection after FLUSHALL; every reply is kept byte for byte
(latin-1 decoded). Binary arguments are latin-1 decoded too.
"""
import json
import socket
import struct
import subprocess
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def encode(args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def fill(self):
        chunk = self.s.recv(1 << 20)
        if not chunk:
            raise EOFError
        self.buf += chunk

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        i = self.buf.index(b"\r\n") + 2
        return i

    def one(self, start):
        """End offset of the reply starting at `start` (reading more as needed)."""
        while len(self.buf) <= start or b"\r\n" not in self.buf[start:]:
            self.fill()
        end = self.buf.index(b"\r\n", start) + 2
        kind, head = self.buf[start:start + 1], self.buf[start + 1:end - 2]
        if kind == b"$":
            n = int(head)
            if n < 0:
                return end
            while len(self.buf) < end + n + 2:
                self.fill()
            return end + n + 2
        if kind in (b"*", b"%", b"~"):
            n = int(head) * (2 if kind == b"%" else 1)
            for _ in range(max(n, 0)):
                end = self.one(end)
            return end
        return end

    def call(self, args):
        self.s.sendall(encode(args))
        end = self.one(0)
        raw, self.buf = self.buf[:end], self.buf[end:]
        return raw


def header_of(conn, key):
    raw = conn.call(["BF.SCANDUMP", key, "0"])
    # *2 :iter $len data
    body = raw.split(b"\r\n", 3)[3]
    n = int(raw.split(b"\r\n")[2][1:])
    return body[:n]


def chunks_of(conn, key):
    out, it = [], 0
    while True:
        raw = conn.call(["BF.SCANDUMP", key, str(it)])
        parts = raw.split(b"\r\n", 3)
        it = int(parts[1][1:])
        n = int(parts[2][1:])
        if it == 0:
            return out
        out.append((it, parts[3][:n]))


HEADER = struct.Struct("<QIII")
LINK = struct.Struct("<QQQddIQB")


def with_header(header, **fields):
    size, nfilters, options, growth = HEADER.unpack_from(header)
    values = dict(size=size, nfilters=nfilters, options=options, growth=growth)
    values.update({k: v for k, v in fields.items() if k in values})
    out = bytearray(header)
    HEADER.pack_into(out, 0, values["size"], values["nfilters"], values["options"], values["growth"])
    if "link0" in fields:
        link = list(LINK.unpack_from(header, HEADER.size))
        for name, v in fields["link0"].items():
            link[["bytes", "bits", "size", "error", "bpe", "hashes", "entries", "n2"].index(name)] = v
        LINK.pack_into(out, HEADER.size, *link)
    return bytes(out)


def cases(conn):
    rates = ["0.99", "0.9", "0.5", "0.25", "0.1", "0.05", "0.01", "0.001", "0.0001", "0.000001", "0.000000001"]
    for rate in rates:
        for cap in ["1", "3", "10", "100", "1000", "12345"]:
            yield f"sizing {rate} {cap}", [
                ["BF.RESERVE", "k", rate, cap, "NONSCALING"],
                ["BF.DEBUG", "k"],
                ["BF.INFO", "k"],
            ]
    yield "high error rates", [
        ["BF.RESERVE", "bf1", "0.99", "3", "NONSCALING"],
        ["BF.RESERVE", "a", "0.9", "1", "NONSCALING"],
        ["BF.INSERT", "c", "ERROR", "0.99", "CAPACITY", "3", "NONSCALING", "ITEMS", "x"],
        ["BF.DEBUG", "bf1"], ["BF.DEBUG", "a"], ["BF.DEBUG", "c"],
        ["BF.ADD", "bf1", "y"], ["BF.EXISTS", "bf1", "y"], ["BF.CARD", "bf1"],
    ]
    items = [f"i{i}" for i in range(100)]
    for expansion in ["1", "2", "3"]:
        yield f"growth expansion {expansion}", [
            ["BF.RESERVE", "g", "0.01", "10", "EXPANSION", expansion],
            ["BF.MADD", "g", *items],
            ["BF.DEBUG", "g"],
            ["BF.INFO", "g"],
        ]
    yield "debug of the default filter", [["BF.ADD", "d", "x"], ["BF.DEBUG", "d"]]
    yield "debug errors", [
        ["BF.DEBUG", "missing"],
        ["BF.DEBUG"],
        ["BF.DEBUG", "a", "b"],
        ["SET", "str", "x"],
        ["BF.DEBUG", "str"],
    ]
    # Not recorded: a filter too large to allocate. RedisBloom 2.8.20 in
    # Redis 7.0 (which lacks RedisModule_TryCalloc) aborts the server on
    # it; its source answers "ERR Insufficient memory to create filter"
    # (src/rebloom.c), which the test checks instead.


def dump_cases(conn):
    """Cases built from a real dump: BF.RESERVE src 0.01 5 plus 50 adds."""
    conn.call(["FLUSHALL"])
    conn.call(["BF.RESERVE", "src", "0.01", "5"])
    conn.call(["BF.MADD", "src", *[f"i{i}" for i in range(50)]])
    header = header_of(conn, "src")
    chunks = chunks_of(conn, "src")[1:]
    huge = 2**64 - 1
    bad_headers = {
        "sizes 2^64-1": with_header(header, size=huge, link0={"size": huge}),
        "options 0xFFFFFFFF": with_header(header, options=0xFFFFFFFF),
        "no links": with_header(header, nfilters=0)[:HEADER.size],
        "truncated": header[:-1],
        "a byte more": header + b"\0",
        "error rate 0": with_header(header, link0={"error": 0.0}),
        "error rate 1": with_header(header, link0={"error": 1.0}),
        "bits not 8 x bytes": with_header(header, link0={"bits": 7}),
        "hashes not from bpe": with_header(header, link0={"hashes": 99}),
        "n2 64": with_header(header, link0={"n2": 64}),
        "item count off": with_header(header, size=1),
        "growth 0": with_header(header, growth=0),
    }
    for name, h in bad_headers.items():
        yield f"bad header: {name}", [
            ["BF.LOADCHUNK", "k1", "1", h],
            ["EXISTS", "k1"],
        ]
    it, data = chunks[0]
    yield "bad chunks", [
        ["BF.LOADCHUNK", "k2", "1", header],
        ["BF.LOADCHUNK", "k2", "0", data],
        ["BF.LOADCHUNK", "k2", "-1", data],
        ["BF.LOADCHUNK", "k2", str(len(data) - 1), data],
        ["BF.LOADCHUNK", "k2", "1000000000", data],
        ["BF.LOADCHUNK", "k2", str(it + 1), data],
        ["BF.LOADCHUNK", "k2", str(it), data],
        ["BF.LOADCHUNK", "k2", "x", data],
        ["BF.CARD", "k2"],
    ]
    good = [["BF.LOADCHUNK", "k3", "1", header]] + [["BF.LOADCHUNK", "k3", str(i), d] for i, d in chunks]
    yield "a good dump", good + [["BF.INFO", "k3"], ["BF.DEBUG", "k3"], ["BF.EXISTS", "k3", "i7"]]


def main():
    module = sys.argv[1]
    port = free_port()
    server = subprocess.Popen(
        ["redis-server", "--port", str(port), "--save", "", "--appendonly", "no", "--loadmodule", module],
        stdout=subprocess.DEVNULL,
    )
    try:
        for _ in range(500):
            try:
                conn = Conn(port)
                if conn.call(["PING"]) == b"+PONG\r\n":
                    break
            except OSError:
                time.sleep(0.01)
        version = conn.call(["INFO", "server"]).split(b"redis_version:")[1].split(b"\r\n")[0].decode()
        modules = conn.call(["MODULE", "LIST"]).decode("latin-1")
        out = {
            "produced_by": f"scripts/record_redisbloom.py: {module} in Redis {version}; each case on one RESP2 connection after FLUSHALL; replies are the exact bytes sent (latin-1 decoded)",
            "module_list": modules,
            "cases": [],
        }
        for source in (cases, dump_cases):
            conn.call(["FLUSHALL"])
            for name, commands in source(conn):
                conn.call(["FLUSHALL"])
                steps = []
                for cmd in commands:
                    raw = conn.call(cmd)
                    args = [a.decode("latin-1") if isinstance(a, bytes) else a for a in cmd]
                    steps.append({"cmd": args, "reply_raw": raw.decode("latin-1")})
                out["cases"].append({"name": name, "steps": steps})
        json.dump(out, sys.stdout, indent=1)
        print()
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
