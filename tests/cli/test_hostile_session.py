"""A hostile session against ``agora-gateway serve``: every refusal logs one line, none a traceback.

Each request below is bad input the gateway answers correctly. Its log (stderr, at INFO) is read
after each one: exactly one new line that says what was refused, and no ``Traceback`` anywhere.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import re
import struct
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp
from twilio.request_validator import RequestValidator

from .test_serve import serving

PUBLIC = "https://gw.example.test"
AUTH_TOKEN = "hostile-test-twilio-token"
ENV = {
    "AGORA_PUBLIC_BASE_URL": PUBLIC,
    "AGORA_TWILIO_ACCOUNT_SID": "AC" + "0" * 32,
    "AGORA_TWILIO_AUTH_TOKEN": AUTH_TOKEN,
    "AGORA_WHATSAPP_FROM": "whatsapp:+14155238886",
    "AGORA_METRICS_TOKEN": "metrics-" + "9" * 24,
    "AGORA_READ_TIMEOUT": "1",
}
ACCESS = re.compile(r"^\S+ \S+ INFO gateway\.access: ")
REFUSED_ACCESS = re.compile(r"gateway\.access: \S+ \S+ [45]\d\d ")
SOCKET_ACCESS = re.compile(r"gateway\.access: GET /agent/ws (101 upgraded|closed after [\d.]+ s \(code \d+\))$")
LINE = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?P<level>[A-Z]+) (?P<name>[\w.]+): (?P<message>.*)$")


async def exchange(port: int, data: bytes, *, timeout: float = 5.0) -> bytes:
    """Send raw bytes, read until the server closes (every case here ends its connection)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(data)
    answer = b""
    try:
        async with asyncio.timeout(timeout):
            with contextlib.suppress(ConnectionError):
                while chunk := await reader.read(65536):
                    answer += chunk
    except TimeoutError:
        answer += b"(still open)"
    finally:
        writer.close()
    return answer


def request(port: int, head: str, body: bytes = b"", **headers: str) -> bytes:
    """A request: ``head``, then ``headers`` (``Content_Type`` is ``Content-Type``) and ``body``."""
    given = {key.replace("_", "-"): value for key, value in headers.items()}
    fields = {"Host": f"127.0.0.1:{port}", "Connection": "close", **given}
    if body and "Content-Length" not in fields and "Transfer-Encoding" not in fields:
        fields["Content-Length"] = str(len(body))
    lines = "".join(f"{key}: {value}\r\n" for key, value in fields.items())
    return f"{head}\r\n{lines}\r\n".encode() + body


def ws_frame(opcode: int, payload: bytes, *, masked: bool = True, reserved: int = 0) -> bytes:
    """A client frame (RFC 6455): FIN, reserved bits, the opcode, the length, the mask (zeros), the payload."""
    head = bytes([0x80 | reserved << 4 | opcode])
    bit = 0x80 if masked else 0
    if len(payload) < 126:
        head += bytes([bit | len(payload)])
    elif len(payload) < 65536:
        head += bytes([bit | 126]) + struct.pack("!H", len(payload))
    else:
        head += bytes([bit | 127]) + struct.pack("!Q", len(payload))
    return head + (b"\0\0\0\0" if masked else b"") + payload


async def raw_socket(port: int, frame: bytes, *, timeout: float = 5.0) -> bytes:
    """Open a web socket by hand, send one (bad) frame, read until the server closes (or ``timeout``)."""
    key = base64.b64encode(os.urandom(16)).decode()
    upgrade = request(
        port,
        "GET /agent/ws HTTP/1.1",
        Connection="Upgrade",
        Upgrade="websocket",
        Sec_WebSocket_Key=key,
        Sec_WebSocket_Version="13",
    )
    answer = await exchange(port, upgrade + frame, timeout=timeout)
    assert answer.startswith(b"HTTP/1.1 101"), answer[:200]
    return answer


@dataclass
class Case:
    name: str
    run: Callable[[], Awaitable[object]]
    expect: str
    """A regex the case's one log line matches."""
    exact: bool = True
    """False for the AG-UI and A2A channels (another helper's): at most one line, no traceback."""


def signed(fields: dict[str, str]) -> dict[str, str]:
    url = f"{PUBLIC}/channels/whatsapp"
    return {"X-Twilio-Signature": RequestValidator(AUTH_TOKEN).compute_signature(url, fields)}


def build_cases(port: int, session: aiohttp.ClientSession) -> list[Case]:
    base = f"http://127.0.0.1:{port}"
    get = "GET /healthz HTTP/1.1"

    def raw(data: bytes) -> Callable[[], Awaitable[bytes]]:
        return lambda: exchange(port, data)

    def http(head: str, body: bytes = b"", **headers: str) -> Callable[[], Awaitable[bytes]]:
        return raw(request(port, head, body, **headers))

    async def frames(*texts: str | bytes) -> None:
        async with session.ws_connect(f"{base}/agent/ws") as ws:
            await ws.send_str('{"type": "hello"}')
            assert json.loads((await ws.receive(timeout=5)).data)["type"] == "welcome"
            for text in texts:
                await (ws.send_bytes(text) if isinstance(text, bytes) else ws.send_str(text))
                assert json.loads((await ws.receive(timeout=5)).data)["type"] == "error"

    def frame(text: str | bytes) -> Callable[[], Awaitable[None]]:
        return lambda: frames(text)

    async def slow_body() -> bytes:
        head = "POST /agent/tool-call/approve HTTP/1.1"
        return await exchange(port, request(port, head, b"{", Content_Length="50", Content_Type="application/json"))

    json_type = {"Content_Type": "application/json"}
    form_type = {"Content_Type": "application/x-www-form-urlencoded"}
    webhook_fields = {"MessageSid": "SM" + "1" * 32, "From": "whatsapp:+15551230001", "Body": "hi"}
    refused = r"INFO gateway\.http: refused "
    return [
        # aiohttp's parser refuses these before any route: each used to log a traceback at ERROR
        Case("header too long", http(get, X_Big="a" * 10_000), refused + r"400 bad_http_request .*LineTooLong"),
        Case("request line too long", http(f"GET /{'a' * 10_000} HTTP/1.1"), refused + "400 bad_http_request"),
        Case("bad method", http("GE(T / HTTP/1.1"), refused + r"400 bad_http_request .*BadHttpMethod"),
        Case(
            "bad method on a kept-alive connection",
            raw(request(port, get, Connection="keep-alive") + request(port, "G\x01T / HTTP/1.1")),
            refused + "400 bad_http_request",
        ),
        Case("TLS on the HTTP port", raw(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"), refused + "400"),
        Case("bad HTTP version", http("GET / HTTP/9.9"), refused + r"400 bad_http_request .*BadStatusLine"),
        Case("no Host", raw(b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n"), refused + ".*Host"),
        Case("bad header name", raw(request(port, get)[:-2] + b"Bad Header: x\r\n\r\n"), refused + "400"),
        Case("control character in a path", http("GET /agent/threads/a\x01b HTTP/1.1"), refused + "400 bad_http"),
        Case("bad Content-Length", http("POST /agent/runs/r1/cancel HTTP/1.1", Content_Length="ab"), refused + "400"),
        Case(
            "bad chunk",
            http("POST /agent/tool-call/approve HTTP/1.1", b"zz\r\nxx\r\n0\r\n\r\n", Transfer_Encoding="chunked"),
            refused + "400 bad_http_request",
        ),
        # routes refusing bad input
        Case("unknown route", http("GET /nothing HTTP/1.1"), refused + "404 not_found GET /…: Not Found"),
        Case("method not allowed", http("DELETE /healthz HTTP/1.1"), refused + "405 method_not_allowed DELETE /"),
        Case(
            "bad JSON",
            http("POST /agent/tool-call/approve HTTP/1.1", b"{bad", **json_type),
            refused + "400 invalid_request POST /agent/tool-call/approve",
        ),
        Case(
            "a body that is not UTF-8",
            http("POST /agent/tool-call/approve HTTP/1.1", b'{"tool_call_id": "\xff\xfe"}', **json_type),
            refused + "400 invalid_request",
        ),
        Case(
            "not JSON at all",
            http("POST /agent/tool-call/reject HTTP/1.1", b"x=1", **form_type),
            refused + "415 unsupported_media_type",
        ),
        Case(
            "a body too large",
            http("POST /agent/tool-call/reject HTTP/1.1", b"{" + b" " * 70_000 + b"}", **json_type),
            refused + "413 payload_too_large",
        ),
        Case("a body too slow", slow_body, refused + "408 request_timeout POST /agent/tool-call/approve"),
        Case("bad token", http("GET /agent/tools HTTP/1.1", Authorization="Bearer abc.def"), refused + "401"),
        Case(
            "id with a control character",
            http("GET /agent/threads/a%01b HTTP/1.1"),
            refused + r"400 invalid_request GET /agent/threads/\{thread_id\}: Bad thread id",
        ),
        Case("id with a new line", http("POST /agent/runs/a%0Ab/cancel HTTP/1.1"), refused + "400 invalid_request"),
        Case("a forged media token", http("GET /media/zzz%00 HTTP/1.1"), refused + "403 media_"),
        Case("metrics without the token", http("GET /metrics HTTP/1.1"), refused + "401 unauthenticated GET /metrics"),
        # the web socket
        Case("not an upgrade", http("GET /agent/ws HTTP/1.1"), r"INFO channels\.web: refused 400 websocket_required"),
        Case(
            "a foreign origin",
            http("GET /agent/ws HTTP/1.1", Origin="https://evil.example"),
            r"WARNING channels\.web: refused a web socket from origin",
        ),
        Case(
            "a bad token on the socket",
            http("GET /agent/ws HTTP/1.1", Authorization="Bearer nope"),
            r"INFO channels\.web: refused 401 invalid_token",
        ),
        Case("a frame that is not JSON", frame("{nope"), r"INFO channels\.web: refused a frame: bad_frame"),
        Case("a frame too deep", frame("[" * 5000), r"refused a frame: bad_frame"),
        Case("an unknown frame", frame('{"type": "nope"}'), r"refused a frame: unknown_frame"),
        Case("an invalid frame", frame('{"type": "send", "text": ""}'), r"refused a frame: invalid_frame"),
        Case("a binary frame", frame(b"\x00\x01"), r"refused a frame: binary_not_supported"),
        Case("a frame too large", frame("x" * 70_000), r"refused a frame: frame_too_large"),
        # (aiohttp reads a client's unmasked frame as it is: here, text that is not JSON)
        Case("an unmasked frame", lambda: raw_socket(port, ws_frame(1, b"hi", masked=False), timeout=0.5), "bad_frame"),
        Case("reserved bits set", lambda: raw_socket(port, ws_frame(1, b"hi", reserved=2)), r"closed .*1002"),
        Case("text that is not UTF-8", lambda: raw_socket(port, ws_frame(1, b"\xff\xfe")), r"closed .*1007"),
        Case("an unknown opcode", lambda: raw_socket(port, ws_frame(0xF, b"")), r"closed .*1002"),
        Case("a frame over the socket's limit", lambda: raw_socket(port, ws_frame(1, b"x" * 300_000)), r"1009"),
        # the WhatsApp webhook
        Case(
            "an unsigned webhook",
            http("POST /channels/whatsapp HTTP/1.1", b"Body=hi", **form_type),
            r"WARNING channels\.whatsapp\.webhook: refused an unsigned or tampered WhatsApp webhook",
        ),
        Case(
            "a tampered webhook",
            http(
                "POST /channels/whatsapp HTTP/1.1",
                b"MessageSid=SM1&Body=other",
                **form_type,
                **signed(webhook_fields),
            ),
            r"refused an unsigned or tampered",
        ),
        Case(
            "a webhook that is not UTF-8",
            http("POST /channels/whatsapp HTTP/1.1", b"Body=\xff\xfe", **form_type),
            r"refused an unsigned or tampered",  # no form a signature could be checked over: 403
        ),
        Case(
            "a webhook too large",
            http("POST /channels/whatsapp HTTP/1.1", b"Body=" + b"x" * 600_000, **form_type),
            refused + "413 payload_too_large POST /channels/whatsapp",
        ),
        # AG-UI and A2A (another helper's channels): at most one line, never a traceback
        Case("AG-UI bad JSON", http("POST /agent/ag-ui HTTP/1.1", b"{bad", **json_type), "", exact=False),
        Case("AG-UI not UTF-8", http("POST /agent/ag-ui HTTP/1.1", b"\xff\xfe", **json_type), "", exact=False),
        Case("A2A without a token", http("POST /a2a HTTP/1.1", b"{}", **json_type), "", exact=False),
        Case(
            "A2A bad token",
            http("POST /a2a HTTP/1.1", b"{bad", Authorization="Bearer x", **json_type),
            "",
            exact=False,
        ),
    ]


class Log:
    """The server's log file, read line by line as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen = 0
        self.access: list[str] = []

    def lines(self) -> list[str]:
        return self.path.read_text(errors="replace").splitlines()

    def skip(self) -> None:
        self.seen = len(self.lines())

    async def new(self, *, at_least: int, timeout: float = 3.0) -> list[str]:
        """The lines written since the last call, once ``at_least`` are not access lines or ``timeout`` passed.

        Access lines (``gateway.access``) go to ``self.access``: a refused request has none, but
        a web socket that refuses a frame was upgraded and closes (two access lines).
        """
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while len([line for line in self.lines()[self.seen :] if not ACCESS.search(line)]) < at_least:
                    await asyncio.sleep(0.01)  # a bounded poll of a file another process writes
        lines = self.lines()
        fresh, self.seen = lines[self.seen :], len(lines)
        self.access.extend(line for line in fresh if ACCESS.search(line))
        return [line for line in fresh if not ACCESS.search(line)]


async def test_a_hostile_session_logs_one_line_per_refusal_and_no_traceback(tmp_path: Path) -> None:
    path = tmp_path / "serve.log"
    report: dict[str, list[str]] = {}
    async with serving(env=ENV, log=path) as (_, port, _line), aiohttp.ClientSession() as session:
        log = Log(path)
        log.skip()  # start-up lines
        cases = build_cases(port, session)
        for case in cases:
            await case.run()
            if case.exact:
                report[case.name] = await log.new(at_least=1)
            else:
                # A line is likely but not promised: take what the next (exact) probe flushes too.
                await exchange(port, request(port, "GET /nothing HTTP/1.1"))
                lines = await log.new(at_least=1)
                probe = [i for i, line in enumerate(lines) if "refused 404 not_found GET /…" in line]
                report[case.name] = lines[: probe[-1]] if probe else [*lines, "(the probe's line is missing)"]
    text = path.read_text(errors="replace")
    assert "Traceback" not in text, text
    problems = []
    for case in cases:
        lines = report[case.name]
        wanted = len(lines) == 1 if case.exact else len(lines) <= 1
        if not wanted or (case.exact and not re.search(case.expect, lines[0])):
            problems.append(f"{case.name}: {lines}")
        for line in lines:
            assert LINE.match(line), line  # one record, one line: nothing an attacker sent broke it
    assert not problems, "\n".join(problems)
    # The access log wrote no line for a refused request (none of 400 and above), but the sockets' upgrades and closes.
    assert not [line for line in log.access if REFUSED_ACCESS.search(line)], log.access
    assert [line for line in log.access if SOCKET_ACCESS.search(line)], log.access
