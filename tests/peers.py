"""Real peers on loopback for the effect tests: a payments API honouring Idempotency-Key, and an
SMTP server counting messages. Both run in threads of the test process; attempts in child
processes reach them over TCP like any client would.
"""

from __future__ import annotations

import email
import json
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from airflow_idempotent.testing.ports import free_port


class HttpPeer:
    """``POST /payments`` creates one payment per Idempotency-Key; a repeated key gets the original
    response (``Idempotent-Replayed: true``), a key still in flight gets 409.
    ``GET /payments/by-key/<key>`` answers 200 with the payment, or 404.

    ``fail_next``: statuses answered to the next POSTs *without* creating anything (a refusal).
    ``lose_next``: statuses answered to the next POSTs *after* creating the payment (a lost answer).
    """

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.lock = threading.Lock()
        self.payments: dict[str, dict[str, Any]] = {}
        self.posts: list[str | None] = []
        self.in_flight: set[str] = set()
        self.fail_next: list[int] = []
        self.lose_next: list[int] = []
        self._server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_port}"

    @property
    def effects(self) -> int:
        """Payments created: the effects the outside world sees."""
        return len(self.payments)

    def __enter__(self) -> HttpPeer:
        peer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _send(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                prefix = "/payments/by-key/"
                if not self.path.startswith(prefix):
                    self._send(404, {"error": "not found"})
                    return
                with peer.lock:
                    payment = peer.payments.get(self.path[len(prefix) :])
                if payment is None:
                    self._send(404, {"error": "no payment with this key"})
                else:
                    self._send(200, payment)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"null")
                key = self.headers.get("Idempotency-Key")
                with peer.lock:
                    peer.posts.append(key)
                    if not key:
                        status, answer, headers = 400, {"error": "Idempotency-Key required"}, {}
                    elif key in peer.payments:
                        status, answer, headers = 200, peer.payments[key], {"Idempotent-Replayed": "true"}
                    elif key in peer.in_flight:
                        status, answer, headers = 409, {"error": "a request with this key is in flight"}, {}
                    elif peer.fail_next:
                        status, answer, headers = peer.fail_next.pop(0), {"error": "refused"}, {}
                    else:
                        peer.in_flight.add(key)
                        status = 0
                if status:
                    self._send(status, answer, headers)
                    return
                assert key is not None
                time.sleep(peer.delay)
                with peer.lock:
                    payment = {"id": f"pay_{len(peer.payments) + 1:04d}", "key": key, "body": body}
                    peer.payments[key] = payment
                    peer.in_flight.discard(key)
                    lost = peer.lose_next.pop(0) if peer.lose_next else 0
                if lost:
                    self._send(lost, {"error": "internal error"})
                else:
                    self._send(201, payment)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


def header(message: email.message.Message, name: str) -> str:
    """A header's value unfolded (a long header may be folded before its value, RFC 5322 2.2.3)."""
    return " ".join(str(message[name]).split())


class SmtpPeer:
    """An SMTP server (aiosmtpd) keeping every message it accepted.

    ``refuse`` is a set of recipients answered with 550 (the message is not accepted).
    """

    def __init__(self) -> None:
        self.messages: list[email.message.Message] = []
        self.refuse: set[str] = set()
        self.lock = threading.Lock()
        self.port = free_port()
        self._controller: Any = None

    def __enter__(self) -> SmtpPeer:
        from aiosmtpd.controller import Controller

        peer = self

        class Handler:
            async def handle_RCPT(
                self, server: Any, session: Any, envelope: Any, address: str, options: Any
            ) -> str:
                if address in peer.refuse:
                    return "550 no such user here"
                envelope.rcpt_tos.append(address)
                return "250 OK"

            async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
                with peer.lock:
                    peer.messages.append(email.message_from_bytes(envelope.content))
                return "250 Message accepted for delivery"

        self._controller = Controller(Handler(), hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._controller.stop()

    @property
    def effects(self) -> int:
        with self.lock:
            return len(self.messages)

    def message_ids(self) -> Counter[str]:
        with self.lock:
            return Counter(header(m, "Message-ID") for m in self.messages)

    def conn_json(self, from_email: str = "payouts@example.com") -> str:
        return json.dumps(
            {
                "conn_type": "smtp",
                "host": "127.0.0.1",
                "port": self.port,
                "extra": {"disable_ssl": True, "disable_tls": True, "from_email": from_email, "timeout": 10},
            }
        )
