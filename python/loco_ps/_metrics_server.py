"""The /metrics endpoint of a worker created with metrics_port=...

A small HTTP server of Python's standard library on a daemon thread, serving
the Prometheus text that the worker renders in C++ (the same families as
loco-worker's endpoint: metrics/metrics_text.h). It is Python's rather than
prometheus-cpp's because the C++ server's threads ask for a fixed 100 KiB
stack, which the static TLS of libraries a trainer loads (the CUDA runtime,
cuBLASLt) can eat up; the project's executables raise that floor, a Python
process cannot (metrics/thread_stack_floor.h).

loco_ps._core.Worker creates and closes it; it is not part of the API.
"""

import http.server
import socket
import threading

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True  # a scrape in progress never holds up close() or exit


class _Server6(_Server):
    address_family = socket.AF_INET6


def _handler(render):
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 (the name http.server calls)
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "only /metrics is served here")
                return
            body = render().encode()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):  # scrapes every few seconds: no line each
            pass

    return Handler


class MetricsServer:
    """Serves `render()` (a str) on http://host:port/metrics from now until
    close(). Port 0 binds any free port (`address` says which). Raises
    OSError when the address cannot be bound."""

    def __init__(self, render, host, port):
        server_class = _Server6 if ":" in host.strip("[]") else _Server
        self._server = server_class((host.strip("[]"), port), _handler(render))
        self._thread = threading.Thread(target=self._server.serve_forever,
                                        kwargs={"poll_interval": 0.05},
                                        name="loco_ps-metrics", daemon=True)
        self._thread.start()

    @property
    def address(self):
        """"host:port" as bound, with brackets around an IPv6 host."""
        host, port = self._server.server_address[:2]
        return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def close(self):
        """Stops serving and lets the port go. Idempotent."""
        if self._thread is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()
        self._thread = None
