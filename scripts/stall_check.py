#!/usr/bin/env python3
"""How long other clients wait while `seen serve` runs a heavy command.

Starts the given `seen` binary on a free port in a temporary data
directory, and for each heavy command below measures, from a second
connection that sends `BF.EXISTS small x` in a loop meanwhile, the longest
wait for an answer:

- `BF.RESERVE` of a filter of about 1 GiB (its memory is zeroed);
- a `BF.ADD` that grows a chain by a sub-filter of about 600 MB;
- `BF.INFO` of a 1 GiB filter, over and over while `BGSAVE` copies it
  (the longest is shown, and other clients' longest wait over the save).

Usage: scripts/stall_check.py [path/to/seen] [rounds]
(default: target/release/seen, 3 rounds). Standard library only.
"""

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port))
        self.buf = b""

    def cmd(self, *args):
        args = [a if isinstance(a, bytes) else str(a).encode() for a in args]
        out = b"*%d\r\n" % len(args)
        for a in args:
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.reply()

    def reply(self):
        # Enough RESP for these replies: simple strings, errors, integers,
        # bulk strings and flat arrays of those.
        line = self.line()
        if line[:1] == b"*":
            return [self.reply() for _ in range(int(line[1:]))]
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            while len(self.buf) < n + 2:
                self.fill()
            data, self.buf = self.buf[:n], self.buf[n + 2 :]
            return data
        return line

    def line(self):
        while b"\r\n" not in self.buf:
            self.fill()
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def fill(self):
        chunk = self.s.recv(1 << 16)
        if not chunk:
            raise ConnectionError("server closed the connection")
        self.buf += chunk


class Looker:
    """Sends BF.EXISTS in a loop, noting when each request began and ended."""

    def __init__(self, port):
        self.c = Conn(port)
        self.spans = []
        self.lock = threading.Lock()
        self.stop = False
        self.t = threading.Thread(target=self.run)
        self.t.start()

    def run(self):
        while not self.stop:
            t = time.perf_counter()
            assert self.c.cmd("BF.EXISTS", "small", "x") == b":1"
            with self.lock:
                self.spans.append((t, time.perf_counter()))

    def worst_during(self, start, end):
        """The longest request that overlapped [start, end]."""
        # Wait for a request begun after `end`, so that one in flight
        # across it is counted.
        while True:
            with self.lock:
                if self.spans and self.spans[-1][0] > end:
                    spans, self.spans = self.spans, []
                    break
            if not self.t.is_alive():
                raise RuntimeError("the looking client stopped")
            time.sleep(0.001)
        return max(b - a for a, b in spans if b >= start and a <= end)

    def close(self):
        self.stop = True
        self.t.join()


def round_once(seen, port):
    d = tempfile.mkdtemp(prefix="seen-stall-")
    srv = subprocess.Popen(
        [seen, "serve", "--dir", d, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(200):
            try:
                c = Conn(port)
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError("the server did not start")
        c.cmd("BF.RESERVE", "small", "0.01", "1000")
        c.cmd("BF.ADD", "small", "x")
        c.cmd("BF.RESERVE", "chain", "0.01", "1000", "EXPANSION", "400000")
        n = 0
        while c.cmd("BF.INFO", "chain", "ITEMS") != [b":1000"]:
            c.cmd("BF.ADD", "chain", "item%d" % n)
            n += 1
        looker = Looker(port)
        time.sleep(0.3)
        results = []

        t = time.perf_counter()
        assert c.cmd("BF.RESERVE", "big", "0.0001", "450000000") == b"+OK"
        e = time.perf_counter()
        results.append(("BF.RESERVE of 1 GiB", e - t, looker.worst_during(t, e)))

        t = time.perf_counter()
        assert c.cmd("BF.ADD", "chain", "the one that grows it") == b":1"
        e = time.perf_counter()
        results.append(("BF.ADD growing a chain", e - t, looker.worst_during(t, e)))

        c.cmd("BF.MADD", "big", *["i%d" % j for j in range(1000)])
        info = Conn(port)
        t = time.perf_counter()
        assert c.cmd("BGSAVE").startswith(b"+Background saving")
        longest = 0.0
        while b"bgsave_in_progress:1" in c.cmd("INFO", "persistence"):
            i = time.perf_counter()
            info.cmd("BF.INFO", "big", "ITEMS")
            longest = max(longest, time.perf_counter() - i)
        e = time.perf_counter()
        results.append(("longest BF.INFO in BGSAVE", longest, looker.worst_during(t, e)))
        looker.close()
        return results
    finally:
        srv.kill()
        srv.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    seen = sys.argv[1] if len(sys.argv) > 1 else "target/release/seen"
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    seen = os.path.abspath(seen)
    print("%-24s %12s %28s" % ("command", "took (ms)", "longest other BF.EXISTS (ms)"))
    for _ in range(rounds):
        for name, took, worst in round_once(seen, free_port()):
            print("%-24s %12.0f %28.1f" % (name, took * 1000, worst * 1000))


if __name__ == "__main__":
    main()
