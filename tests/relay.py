"""A TCP relay a test puts between a browser and the served stack, to cut the network under
an upload: every open connection closed at once (``cut``), as a Wi-Fi drop or a proxy
restart would; new connections go through again. It counts the bytes it carried toward
the server, so a test can tell how much was sent twice."""

from __future__ import annotations

import selectors
import socket
import threading

from tests.livestack import free_port

BUFFER = 256 * 1024


class Relay:
    def __init__(self, target_port: int, host: str = "127.0.0.1"):
        self.target = (host, target_port)
        self.port = free_port()
        self.url = f"http://{host}:{self.port}"
        self.bytes_up = 0
        self.cuts = 0
        self._lock = threading.Lock()
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._listener = socket.create_server((host, self.port))
        self._stopped = threading.Event()
        self._accepting = threading.Thread(target=self._accept, daemon=True)
        self._accepting.start()

    def _accept(self) -> None:
        while not self._stopped.is_set():
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                self._pairs.append((client, server))
            threading.Thread(target=self._pump, args=(client, server), daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        selector = selectors.DefaultSelector()
        selector.register(client, selectors.EVENT_READ, server)
        selector.register(server, selectors.EVENT_READ, client)
        try:
            while True:
                for key, _ in selector.select(timeout=1):
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    data = source.recv(BUFFER)
                    if not data:
                        return
                    key.data.sendall(data)
                    if source is client:
                        with self._lock:
                            self.bytes_up += len(data)
                if self._stopped.is_set():
                    return
        except OSError:
            return
        finally:
            selector.close()
            for sock in (client, server):
                try:
                    sock.close()
                except OSError:
                    pass
            with self._lock:
                if (client, server) in self._pairs:
                    self._pairs.remove((client, server))

    def cut(self) -> int:
        """Close every connection open now (both ends, at once); returns how many."""
        with self._lock:
            pairs = list(self._pairs)
            self._pairs.clear()
            self.cuts += 1
        for pair in pairs:
            for sock in pair:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        return len(pairs)

    def close(self) -> None:
        self._stopped.set()
        self._listener.close()
        self.cut()
