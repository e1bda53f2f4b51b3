#!/usr/bin/env python3
"""A local user attacking `mpistat serve` (tests/tests/site/serve.rs runs it as a user made with
useradd). Bounded in bytes and time; ends by itself.

    serve-attacker.py TARGET flood MIB        one connection, MIB MiB without a newline
    serve-attacker.py TARGET fields MIB       one connection, MIB MiB of header fields
    serve-attacker.py TARGET idle N SECONDS   N connections that send nothing, held SECONDS
    serve-attacker.py TARGET slow N SECONDS   N connections sending a request head one byte a
                                              second, held SECONDS

TARGET is HOST:PORT or unix:PATH. Prints `ready N` once N connections are open (idle, slow),
then one line of what happened.
"""

import resource
import socket
import sys
import time


def connect(target):
    if target.startswith("unix:"):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(target[5:])
    else:
        host, port = target.rsplit(":", 1)
        s = socket.create_connection((host, int(port)))
    return s


def send_stream(target, first, chunk, mib):
    """Send `first`, then `chunk` until `mib` MiB went or the server closed the connection."""
    s = connect(target)
    total = 0
    limit = mib * 1024 * 1024
    try:
        s.sendall(first)
        total += len(first)
        while total < limit:
            s.sendall(chunk)
            total += len(chunk)
        how = "all sent"
    except OSError as e:
        how = "closed by the server (%s)" % e.strerror
    print("sent %d bytes: %s" % (total, how), flush=True)


def hold(target, count, seconds, dribble):
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    conns = []
    for _ in range(count):
        try:
            s = connect(target)
            s.setblocking(False)
            conns.append(s)
        except OSError:
            break
    print("ready %d" % len(conns), flush=True)
    head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 100000
    end = time.monotonic() + seconds
    sent = 0
    while time.monotonic() < end:
        if dribble:
            for s in conns:
                try:
                    s.send(head[sent:sent + 1])
                except OSError:
                    pass
            sent += 1
        time.sleep(1)
    closed = 0
    for s in conns:
        try:
            s.recv(1)
            closed += 1  # an answer (408, 503) or the end: the server let go of it
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
    print("held %d connections for %d s: %d closed by the server" % (len(conns), seconds, closed),
          flush=True)


def main():
    target, mode = sys.argv[1], sys.argv[2]
    if mode == "flood":
        send_stream(target, b"GET /", b"A" * 65536, int(sys.argv[3]))
    elif mode == "fields":
        send_stream(target, b"GET / HTTP/1.1\r\n", b"X-Field: value\r\n" * 4096, int(sys.argv[3]))
    elif mode in ("idle", "slow"):
        hold(target, int(sys.argv[3]), int(sys.argv[4]), mode == "slow")
    else:
        sys.exit("unknown mode " + mode)


main()
