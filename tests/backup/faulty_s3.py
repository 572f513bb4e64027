"""An S3 stand-in that injects faults: a proxy in front of the moto server that forwards every
request byte for byte (the Host header too, so the SigV4 signature still checks) unless a rule
matches it, and then answers a 500, stalls, or cuts the connection in the middle of the body.

Standard library only; a thread of the test process.
"""

from __future__ import annotations

import http.client
import http.server
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Fault:
    """``what`` happens to the first ``times`` requests whose method is ``method`` and whose path
    ends with ``suffix``: ``500``, ``stall`` (no answer for ``seconds``) or ``cut`` (the status
    line, headers and half the body, then the connection closes)."""

    method: str
    suffix: str
    what: str
    times: int = 1
    seconds: float = 5.0
    hits: int = field(default=0)


class FaultyS3:
    def __init__(self, upstream: str) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self.faults: list[Fault] = []
        self._lock = threading.Lock()
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                return

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                fault = proxy._match(self.command, urllib.parse.urlsplit(self.path).path)
                if fault is not None and fault.what == "500":
                    payload = b"<Error><Code>InternalError</Code></Error>"
                    self.send_response(500)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    self.wfile.write(payload)
                    return
                if fault is not None and fault.what == "stall":
                    time.sleep(fault.seconds)
                    self.close_connection = True
                    return
                status, headers, payload = proxy._forward(
                    self.command, self.path, dict(self.headers.items()), body
                )
                self.send_response(status)
                for key, value in headers:
                    if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(payload)))
                if fault is not None and fault.what == "cut":
                    self.send_header("Connection", "close")
                    self.end_headers()
                    self.wfile.write(payload[: len(payload) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.end_headers()
                self.wfile.write(payload)

            def do_GET(self) -> None:
                self._handle()

            def do_PUT(self) -> None:
                self._handle()

            def do_DELETE(self) -> None:
                self._handle()

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def _match(self, method: str, path: str) -> Fault | None:
        with self._lock:
            for fault in self.faults:
                if (
                    fault.method == method
                    and path.endswith(fault.suffix)
                    and fault.hits < fault.times
                ):
                    fault.hits += 1
                    return fault
        return None

    def _forward(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
            for key, value in headers.items():
                connection.putheader(key, value)
            connection.endheaders(body or None)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()


@contextmanager
def faulty_s3(upstream: str) -> Iterator[FaultyS3]:
    proxy = FaultyS3(upstream)
    proxy._thread.start()
    try:
        yield proxy
    finally:
        proxy.server.shutdown()
        proxy.server.server_close()
