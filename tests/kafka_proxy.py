"""A TCP proxy between Kafka clients and a broker that can cut a connection after a
request reached the broker but before its response reached the client: what a network
fault or a broker stall looks like to a producer, which then retries."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable

PRODUCE = 0


def _read_frame(sock: socket.socket) -> bytes | None:
    head = b""
    while len(head) < 4:
        chunk = sock.recv(4 - len(head))
        if not chunk:
            return None
        head += chunk
    (size,) = struct.unpack(">i", head)
    body = bytearray()
    while len(body) < size:
        chunk = sock.recv(min(1 << 20, size - len(body)))
        if not chunk:
            return None
        body += chunk
    return head + bytes(body)


class CuttingProxy:
    """Listens on 127.0.0.1 (port 0) and forwards each client connection to
    ``upstream`` ("host:port", changeable while running). When ``cut_next_produce`` is
    set, the next Produce request is forwarded and its response swallowed, and the
    client's connection is closed: the broker has appended, the client never hears."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.upstream = ""
        self.cut_next_produce = threading.Event()
        self.cuts = 0
        self.on_cut: Callable[[], None] | None = None
        self._closed = False
        self._threads: list[threading.Thread] = []
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(client,), daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, client: socket.socket) -> None:
        host, port = self.upstream.rsplit(":", 1)
        try:
            broker = socket.create_connection((host, int(port)), timeout=30)
        except OSError:
            client.close()
            return
        try:
            while True:
                request = _read_frame(client)
                if request is None:
                    return
                (api_key,) = struct.unpack(">h", request[4:6])
                cut = api_key == PRODUCE and self.cut_next_produce.is_set()
                if cut:
                    self.cut_next_produce.clear()
                broker.sendall(request)
                response = _read_frame(broker)
                if response is None:
                    return
                if cut:
                    self.cuts += 1
                    if self.on_cut is not None:
                        self.on_cut()
                    return
                client.sendall(response)
        except OSError:
            return
        finally:
            client.close()
            broker.close()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
