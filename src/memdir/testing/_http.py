"""The HTTP plumbing under the fake provider servers.

A small HTTP/1.1 server on 127.0.0.1, one daemon thread per connection, that hands each
request to its owner and can be stopped promptly: ``close()`` cuts the open keep-alive
connections (an SDK client that was never closed would otherwise hold a handler thread
forever) and joins every thread, so no socket outlives the server.
"""

from __future__ import annotations

import contextlib
import io
import socket
import socketserver
import sys
import threading
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

__all__ = ["Exchange", "LocalServer"]

_JOIN_TIMEOUT = 5.0  # seconds; handler threads only ever wait on sockets and the stop event


class Exchange(BaseHTTPRequestHandler):
    """One connection's requests; each is passed to the owning server's callback."""

    protocol_version = "HTTP/1.1"  # keep-alive, as the SDKs' connection pools expect
    # A stream's headers and frames go out as separate writes; with Nagle's algorithm each
    # would wait for the client's delayed ACK of the one before, ~40 ms a write.
    disable_nagle_algorithm = True
    server: LocalServer

    def do_POST(self) -> None:
        self.server.on_request(self)

    do_GET = do_PUT = do_DELETE = do_PATCH = do_POST  # noqa: N815 - answered with 404s

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: test output is no place for an access log."""

    def read_body(self) -> bytes:
        """The request body, exactly as the client sent it."""
        length = int(self.headers.get("content-length") or 0)
        return self.rfile.read(length) if length > 0 else b""

    def send_bytes(
        self,
        status: int,
        payload: bytes,
        headers: Mapping[str, str],
        *,
        content_type: str = "application/json",
        cut_at: int | None = None,
    ) -> None:
        """Answer with ``payload``; with ``cut_at``, send that many bytes then hang up.

        Headers and body leave in one write, so an answer that fits the socket's buffer is
        queued whole before the client can see its status. A client that raises on the
        status (urllib on a 400) can still read the body after the server is stopped and
        its connections cut.
        """
        wire, buffer = self.wfile, io.BytesIO()
        self.wfile = buffer
        try:
            self.send_response(status)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(payload)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(payload if cut_at is None else payload[:cut_at])
        finally:
            self.wfile = wire
        wire.write(buffer.getvalue())
        if cut_at is not None:
            self.close_connection = True

    def send_stream(
        self, frames: Iterable[bytes], headers: Mapping[str, str], *, complete: bool = True
    ) -> None:
        """Answer with Server-Sent Events, one chunk per frame.

        Chunked encoding lets a cut-off stream look like one: without the final empty
        chunk the client's HTTP layer knows the body is incomplete and raises.
        """
        self.send_response(200)
        self.send_header("content-type", "text/event-stream; charset=utf-8")
        self.send_header("cache-control", "no-cache")
        self.send_header("transfer-encoding", "chunked")
        for name, value in headers.items():
            self.send_header(name, value)
        self.end_headers()
        for frame in frames:
            self.wfile.write(b"%x\r\n%s\r\n" % (len(frame), frame))
        if complete:
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.close_connection = True

    def hang_up(self) -> None:
        """Close the connection without answering."""
        self.close_connection = True


class LocalServer(HTTPServer):
    """An HTTP server bound to 127.0.0.1 on a free port, for one owner callback."""

    def __init__(self, on_request: Callable[[Exchange], None], on_error: Callable[[str], None]):
        self.on_request = on_request
        self._on_error = on_error
        self._lock = threading.Lock()
        self._connections: set[socket.socket] = set()
        self._threads: set[threading.Thread] = set()
        super().__init__(("127.0.0.1", 0), Exchange)

    def server_bind(self) -> None:
        """Bind without HTTPServer's FQDN lookup, a DNS call a loopback server never needs."""
        socketserver.TCPServer.server_bind(self)
        host, port = self.server_address[:2]
        self.server_name = str(host)
        self.server_port = int(port)

    @property
    def port(self) -> int:
        """The port the server listens on."""
        return self.server_port

    def process_request(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any
    ) -> None:
        """Serve the new connection on its own daemon thread, tracked so close() can join it."""
        assert isinstance(request, socket.socket)  # a TCP server gets stream sockets
        thread = threading.Thread(
            target=self._serve_connection,
            args=(request, client_address),
            name=f"fake-server-{self.server_port}-connection",
            daemon=True,
        )
        with self._lock:
            self._connections.add(request)
            self._threads.add(thread)
        thread.start()

    def _serve_connection(self, request: socket.socket, client_address: Any) -> None:
        try:
            self.finish_request(request, client_address)
        except Exception:
            self.handle_error(request, client_address)
        finally:
            with self._lock:
                self._connections.discard(request)
                self._threads.discard(threading.current_thread())
            self.shutdown_request(request)

    def handle_error(
        self, request: socket.socket | tuple[bytes, socket.socket], client_address: Any
    ) -> None:
        """Report a failure to the owner; a client that hung up is not one."""
        error = sys.exc_info()[1]
        # Timeouts, cancelled streams and stop() all end in a reset or broken pipe here.
        if not isinstance(error, OSError):
            self._on_error(f"the fake server failed: {error!r}")

    def close(self) -> None:
        """Cut every open connection, wait for their threads, and close the listening socket."""
        with self._lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by its own thread
                connection.shutdown(socket.SHUT_RDWR)
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(_JOIN_TIMEOUT)
        self.server_close()
