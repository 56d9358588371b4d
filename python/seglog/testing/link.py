"""A network link that can be cut: a TCP forwarder on 127.0.0.1 between one process and
a server, for tests that cut a broker off from ZooKeeper (or from anyone else) while
both processes run on, as a network partition would."""

from __future__ import annotations

import socket
import threading
from types import TracebackType

__all__ = ["Link"]

_CHUNK = 64 * 1024


class Link:
    """Forwards every connection made to :attr:`address` to ``target`` (``host:port``,
    which may be set later).

    :meth:`cut` closes the connections open through the link and, until :meth:`heal`,
    closes each new one as soon as it is accepted: to both ends the other has gone
    away, as after a partition that a TCP keepalive or a timeout noticed. Bytes are
    forwarded unchanged and in order; a link that is not cut adds no fault of its own.
    """

    def __init__(self, target: str | None = None) -> None:
        self._target: tuple[str, int] | None = None
        if target is not None:
            self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._closed = False
        self._accepting = threading.Thread(target=self._accept, name=f"link-{self.port}", daemon=True)
        self._accepting.start()

    def __repr__(self) -> str:
        return f"Link({self.address} -> {self.target}, cut={self._cut})"

    @property
    def target(self) -> str | None:
        """``host:port`` connections are forwarded to; until one is set (a server not
        started yet), connections are closed as on a cut link."""
        return None if self._target is None else f"{self._target[0]}:{self._target[1]}"

    @target.setter
    def target(self, target: str) -> None:
        host, _, port = target.rpartition(":")
        self._target = (host.strip("[]") or "127.0.0.1", int(port))

    def __enter__(self) -> Link:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    @property
    def port(self) -> int:
        return int(self._listener.getsockname()[1])

    @property
    def address(self) -> str:
        """``127.0.0.1:PORT``: where to connect instead of the target."""
        return f"127.0.0.1:{self.port}"

    @property
    def is_cut(self) -> bool:
        return self._cut

    def cut(self) -> None:
        """Breaks every connection through the link and refuses new ones until :meth:`heal`."""
        with self._lock:
            self._cut = True
            sockets = list(self._open)
            self._open.clear()
        for s in sockets:
            _close(s)

    def heal(self) -> None:
        """Lets new connections through again (the broken ones stay broken)."""
        with self._lock:
            self._cut = False

    def close(self) -> None:
        """Stops forwarding: the listener and every connection close."""
        with self._lock:
            self._closed = True
        self.cut()
        _close(self._listener)
        self._accepting.join(timeout=5)

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                target = self._target
                refused = self._cut or self._closed or target is None
            if refused or target is None:
                _close(client)
                continue
            try:
                server = socket.create_connection(target, timeout=5)
                server.settimeout(None)
            except OSError:
                _close(client)
                continue
            with self._lock:
                if self._cut or self._closed:
                    refused = True
                else:
                    self._open.update((client, server))
            if refused:
                _close(client)
                _close(server)
                continue
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while chunk := src.recv(_CHUNK):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            with self._lock:
                self._open.discard(src)
                self._open.discard(dst)
            _close(src)
            _close(dst)


def _close(s: socket.socket) -> None:
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    s.close()
