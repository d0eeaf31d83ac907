"""pqs-timer's deferred RST close: the server must log a completed handshake for every attempt
the client counted ok, even when our Finished is still on its way (or unread) when the client
is done.

The slow path is a loopback relay between pqs-timer and pqs-server that delays every
client->server byte by DELAY and, when the client resets its connection, resets the server side
at once and drops what it still holds: exactly what a RST does to the receiver's unread queue
(Linux discards it). A timer that resets right after SSL_connect loses its Finished there every
time (the server logs tcp_reset); the deferred close must lose none, leave no TIME_WAIT and
not add a relay delay to the run per attempt.
"""
import collections
import select
import socket
import struct
import threading
import time

from testbed_helpers import Server, run_timer
from test_server import time_wait_count

DELAY = 0.005  # client -> server, per chunk
DELAY_NO_TICKETS = 0.002  # without tickets only the final wait (>= 25 ms) covers the last one


def _rst(sock):
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass


class SlowUpstreamRelay:
    """127.0.0.1:port -> target; client->server bytes are held DELAY seconds. One thread and one
    FIFO for all connections (one shared link: what was sent first is delivered first), and a
    client reset is forwarded as a reset at once, dropping what the link still holds."""

    def __init__(self, target_port, delay=DELAY):
        self.target = ("127.0.0.1", target_port)
        self.delay = delay
        self.lsock = socket.socket()
        self.lsock.bind(("127.0.0.1", 0))
        self.lsock.listen(256)
        self.lsock.setblocking(False)
        self.port = self.lsock.getsockname()[1]
        self.resets_with_held_data = 0
        self.stop = False
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self):
        peer = {}                  # socket -> its partner
        client_side = set()        # client sockets
        fifo = collections.deque()  # (due, client socket, bytes), in send order
        while not self.stop:
            now = time.monotonic()
            while fifo and fifo[0][0] <= now:
                _, c, data = fifo.popleft()
                s = peer.get(c)
                if s is not None:
                    try:
                        s.sendall(data)
                    except OSError:
                        self._drop(c, peer, client_side, fifo)
            timeout = max(0.0, fifo[0][0] - now) if fifo else 0.05
            rd, _, _ = select.select([self.lsock, *peer], [], [], timeout)
            for so in rd:
                if so is self.lsock:
                    try:
                        c, _ = self.lsock.accept()
                        s = socket.create_connection(self.target)
                    except OSError:
                        continue
                    for x in (c, s):
                        x.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    peer[c], peer[s] = s, c
                    client_side.add(c)
                    continue
                if so not in peer:
                    continue  # dropped earlier in this round
                try:
                    data = so.recv(65536)
                except OSError:  # ECONNRESET
                    data = None
                if so in client_side:
                    if data:
                        fifo.append((time.monotonic() + self.delay, so, data))
                        continue
                    if data is None and any(e[1] is so for e in fifo):
                        self.resets_with_held_data += 1  # the RST overtakes what the link holds
                    self._drop(so, peer, client_side, fifo)
                else:
                    if data:
                        try:
                            peer[so].sendall(data)
                            continue
                        except OSError:
                            pass
                    self._drop(peer[so], peer, client_side, fifo)
        for so in list(peer):
            _rst(so)

    @staticmethod
    def _drop(c, peer, client_side, fifo):
        """Reset both sides of the connection whose client socket is c."""
        s = peer.pop(c, None)
        if s is not None:
            peer.pop(s, None)
            _rst(s)
        client_side.discard(c)
        _rst(c)
        for e in [e for e in fifo if e[1] is c]:
            fifo.remove(e)

    def close(self):
        self.stop = True
        self.thread.join(timeout=5)
        self.lsock.close()


def _check(srv, relay, r, n):
    assert r.returncode == 0, r.stderr
    att = r.attempts
    assert len(att) == n and all(a["ok"] for a in att), [a.get("error") for a in att if not a["ok"]]
    time.sleep(0.3)  # the relay forwards the last resets
    conns = srv.conns()
    failed = [(c.get("error"), c.get("message")) for c in conns if not c["ok"]]
    assert len(conns) == n, f"{len(conns)} server records for {n} attempts"
    assert not failed, f"server logged failed handshakes for ok attempts: {failed[:5]}"
    assert relay.resets_with_held_data == 0
    assert r.header["close"] == "rst_deferred"


def test_server_logs_every_ok_attempt_through_a_slow_upstream(tmp_path):
    n = 60
    with Server(tmp_path, "--groups", "X25519MLKEM768", "--threads", "4") as srv:
        relay = SlowUpstreamRelay(srv.port)
        try:
            t0 = time.monotonic()
            r = run_timer("--connect", f"127.0.0.1:{relay.port}", "--ca", srv.ca,
                          "--groups", "X25519MLKEM768", "--samples", n)
            wall = time.monotonic() - t0
        finally:
            relay.close()
        _check(srv, relay, r, n)
    hs = sum(a["handshake_ns"] for a in r.attempts) / 1e9
    run = r.summary["run_ns"] / 1e9
    # nothing synchronous per attempt: the run is the handshakes plus per-attempt bookkeeping
    # (well under one relay delay per attempt), plus one final wait for the last socket
    assert run < hs + n * DELAY * 0.5 + 0.05, (run, hs)
    assert r.summary["rst_guard_closes"] == 0
    assert wall < 60


def test_deferred_close_with_concurrency_and_no_tickets(tmp_path):
    """No ticket arrives, so nothing proves the server read our Finished: the socket is reset
    after the next handshake (or by the stall guard), never before."""
    n = 80
    with Server(tmp_path, "--groups", "x25519", "--threads", "8", "--tickets", "0") as srv:
        relay = SlowUpstreamRelay(srv.port, DELAY_NO_TICKETS)
        try:
            r = run_timer("--connect", f"127.0.0.1:{relay.port}", "--ca", srv.ca,
                          "--groups", "x25519", "--samples", n, "--concurrency", 3)
        finally:
            relay.close()
        _check(srv, relay, r, n)
    assert time_wait_count(relay.port) == 0 and time_wait_count(srv.port) < 5


def test_fewer_server_workers_than_connections_does_not_stall(tmp_path):
    """Deferred sockets hold server workers: with --threads < 2 x concurrency the next handshake
    waits for a worker, and the pending socket must then be reset (as soon as the server's
    tickets show it read our Finished) instead of waiting for a timeout."""
    with Server(tmp_path, "--groups", "x25519", "--threads", "2") as srv:
        r = run_timer("--connect", srv.addr, "--ca", srv.ca, "--groups", "x25519", "--samples", 200,
                      "--concurrency", 4)
        conns = srv.conns()
    assert r.summary["ok"] == 200
    assert sum(c["ok"] for c in conns) == 200
    assert r.summary["handshake_ns_median"] < 50_000_000
