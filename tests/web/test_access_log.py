"""The access log and the log context: one line per request, by route template, never a secret."""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient
from pydantic import BaseModel

from channels.telegram import SECRET_HEADER, TelegramChannel, TelegramOptions
from channels.whatsapp import WhatsAppCloudChannel, WhatsAppCloudOptions
from gateway import SERVICES, Gateway, Runtime, create_app
from gateway.models import ModelRequest, ScriptedModel, ScriptStep, ToolCallRequest
from tools import ToolContext, define_tool

from ..conftest import JsonLog, channels_for
from .conftest import ALICE, connect, settings, token_for

VERIFY_TOKEN = "verify-token-in-the-query-Q9"
HOOK_SECRET = "telegram_hook_secret-H7"
BOT_TOKEN = "123456789:AAaccess-log-test-token_never-logged"
QUERY_SECRET = "query-secret-S3"
COOKIE_VALUE = "cookie-value-C5"


def actor_pseudonym(actor_id: str) -> str:
    """The documented hash: HMAC-SHA256 of the id under b"agora-gateway log actor v1", 12 hex digits."""
    return hmac.new(b"agora-gateway log actor v1", actor_id.encode(), hashlib.sha256).hexdigest()[:12]


Client = TestClient[Any, Any]


class _OnRecord(logging.Handler):
    """Sets ``event`` when a record ``wanted`` is logged (the server logs on the test's own loop)."""

    def __init__(self, wanted: Callable[[logging.LogRecord], bool], event: asyncio.Event) -> None:
        super().__init__()
        self.wanted, self.event = wanted, event

    def emit(self, record: logging.LogRecord) -> None:
        if self.wanted(record):
            self.event.set()


@pytest.fixture
async def gateway(aiohttp_client: Any) -> AsyncIterator[Callable[..., Awaitable[Client]]]:
    """A gateway with the default channels, plus a configured Cloud API and Telegram channel (no provider called)."""
    sessions: list[aiohttp.ClientSession] = []
    runtimes: list[Runtime] = []

    async def make(runtime: Runtime | None = None) -> Client:
        session = aiohttp.ClientSession()
        sessions.append(session)
        if runtime is not None:
            runtimes.append(runtime)
        cloud = WhatsAppCloudOptions(  # type: ignore[call-arg]
            _env_file=None,
            access_token="EAAaccess-token-never-logged",
            app_secret="meta-app-secret-never-logged",
            verify_token=VERIFY_TOKEN,
            phone_number_id="106540352242922",
            graph_base="http://127.0.0.1:9",  # never reached: nothing is sent here
        )
        telegram = TelegramOptions(  # type: ignore[call-arg]
            _env_file=None,
            bot_token=BOT_TOKEN,
            webhook_secret=HOOK_SECRET,
            bot_username="agora_test_bot",  # no getMe at start
            api_base="http://127.0.0.1:9",
        )
        channels = [
            *channels_for({}),
            WhatsAppCloudChannel(cloud, session=session),
            TelegramChannel(telegram, session=session),
        ]
        app = create_app(settings(), runtime=runtime, channels=channels)
        client: Client = await aiohttp_client(app)
        return client

    yield make
    for runtime in runtimes:
        await runtime.aclose()
    for session in sessions:
        await session.close()


async def test_each_request_is_one_line_by_its_route_template_and_no_secret_is_ever_logged(
    gateway: Callable[..., Awaitable[Client]], json_log: JsonLog
) -> None:
    client = await gateway()
    token = token_for(ALICE)
    media = await client.app[SERVICES].media.put(b"\x89PNG...", "image/png")
    bearer = {"Authorization": f"Bearer {token}", "Cookie": f"agora_visitor={COOKIE_VALUE}"}

    tools = await client.get(f"/agent/tools?agent=*&api_key={QUERY_SECRET}", headers=bearer)
    image = await client.get(f"/media/{media}?sig={QUERY_SECRET}")
    forged = await client.get(f"/media/{media[:-3]}zzz")
    challenge = "1158201444"
    handshake = await client.get(
        "/channels/whatsapp/cloud",
        params={"hub.mode": "subscribe", "hub.verify_token": VERIFY_TOKEN, "hub.challenge": challenge},
    )
    update = {"update_id": 7001, "edited_message": {"message_id": 1, "date": 0, "chat": {"id": 1, "type": "private"}}}
    hook = await client.post("/channels/telegram", json=update, headers={SECRET_HEADER: HOOK_SECRET})
    assert (tools.status, image.status, forged.status, handshake.status, hook.status) == (200, 200, 403, 200, 200)
    assert await handshake.text() == challenge

    access = json_log.lines("gateway.access")
    assert [(a["method"], a["path"], a["status"]) for a in access] == [
        ("GET", "/agent/tools", 200),
        ("GET", "/media/{token}", 200),
        ("GET", "/channels/whatsapp/cloud", 200),
        ("POST", "/channels/telegram", 200),
    ]
    assert all(isinstance(a["ms"], float) and a["ms"] >= 0 for a in access)
    assert all(a["message"] == f"{a['method']} {a['path']} {a['status']} {a['ms']:.1f} ms" for a in access)
    # The caller named by a hash, the channel by the route's owner (the gateway's own routes have none).
    assert access[0]["actor"] == actor_pseudonym("alice") and "channel" not in access[0]
    assert "actor" not in access[1]
    assert [a.get("channel") for a in access[2:]] == ["whatsapp-cloud", "telegram"]

    # The refused request has one line, its refusal, carrying the same fields: never an access line too.
    [refusal] = [line for line in json_log.lines("gateway.http") if line["message"].startswith("refused")]
    assert refusal["message"].startswith("refused 403 media_") and "GET /media/{token}:" in refusal["message"]
    assert (refusal["method"], refusal["path"], refusal["status"], refusal["code"]) == (
        "GET",
        "/media/{token}",
        403,
        refusal["message"].split()[2],
    )
    # The channel's own lines name it too.
    [ignored] = [line for line in json_log.lines("channels.telegram") if "ignored" in line["message"]]
    assert ignored["channel"] == "telegram"

    for secret in (token, media, QUERY_SECRET, COOKIE_VALUE, VERIFY_TOKEN, HOOK_SECRET, BOT_TOKEN, "alice"):
        assert secret not in json_log.text, secret


async def test_a_web_socket_logs_its_upgrade_and_its_close_with_its_duration(
    gateway: Callable[..., Awaitable[Client]], json_log: JsonLog
) -> None:
    client = await gateway()
    ws = await connect(client, token=token_for(ALICE))
    await ws.hello()
    [upgrade] = json_log.lines("gateway.access")
    expected = ("/agent/ws", 101, "upgrade", "web")
    assert (upgrade["path"], upgrade["status"], upgrade["event"], upgrade["channel"]) == expected
    assert upgrade["actor"] == actor_pseudonym("alice")
    closed = asyncio.Event()  # the server logs the close once its handler returns, after the client's close
    watch = _OnRecord(lambda record: record.name == "gateway.access" and "closed after" in record.getMessage(), closed)
    logging.getLogger("gateway.access").addHandler(watch)
    try:
        await ws.ws.close()
        async with asyncio.timeout(5):
            await closed.wait()
    finally:
        logging.getLogger("gateway.access").removeHandler(watch)
    [_, close] = json_log.lines("gateway.access")
    assert (close["path"], close["status"], close["event"], close["channel"]) == ("/agent/ws", 101, "close", "web")
    assert close["close_code"] == 1000 and close["duration_s"] >= 0
    assert close["message"] == f"GET /agent/ws closed after {close['duration_s']:.3f} s (code 1000)"


class LookupInput(BaseModel):
    key: str


async def test_lines_logged_inside_a_run_name_its_run_thread_channel_and_actor(
    gateway: Callable[..., Awaitable[Client]], json_log: JsonLog
) -> None:
    shop = logging.getLogger("shop")

    @define_tool(name="look_up", description="Looks a key up.", input=LookupInput)
    async def look_up(input: LookupInput, ctx: ToolContext) -> dict[str, str]:
        shop.info("looking up %s", input.key)
        return {"key": input.key}

    def plan(request: ModelRequest, index: int) -> ScriptStep:
        if request.step == 0:
            return ScriptStep(tool_calls=[ToolCallRequest(name="look_up", args={"key": "k1"})])
        return ScriptStep(text="Found it.")

    client = await gateway(Runtime(tools=[look_up], model=ScriptedModel(plan)))
    ws = await connect(client, token=token_for(ALICE))
    thread_id = (await ws.hello())["thread_id"]
    frames = await ws.turn("look k1 up")
    run_id = frames[-1]["run_id"]
    await ws.ws.close()
    [line] = json_log.lines("shop")
    assert line["message"] == "looking up k1"
    assert (line["run_id"], line["thread_id"], line["channel"], line["actor"]) == (
        run_id,
        thread_id,
        "web",
        actor_pseudonym("alice"),
    )
    # After the run, lines of the same socket no longer name it.
    shop.info("after")
    assert "run_id" not in json_log.lines("shop")[-1]


async def test_an_ag_ui_request_is_named_by_its_channel(
    gateway: Callable[..., Awaitable[Client]], json_log: JsonLog
) -> None:
    client = await gateway()
    body = {
        "threadId": "t-agui-log",
        "runId": "r1",
        "messages": [{"id": "m1", "role": "user", "content": "weather in Lisbon"}],
        "tools": [],
        "context": [],
        "state": {},
        "forwardedProps": {},
    }
    answer = await client.post("/agent/ag-ui", json=body, headers={"Authorization": f"Bearer {token_for(ALICE)}"})
    assert answer.status == 200
    await answer.read()
    [line] = [a for a in json_log.lines("gateway.access") if a["path"] == "/agent/ag-ui"]
    assert (line["method"], line["status"], line["channel"]) == ("POST", 200, "ag-ui")


async def _raw(port: int, data: bytes) -> bytes:
    """Send ``data`` on a connection of its own; the answer, read until the server closes it."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(data)
        async with asyncio.timeout(5):
            return await reader.read()
    finally:
        writer.close()


async def test_a_malformed_request_is_one_refusal_line_that_quotes_none_of_it(
    gateway: Callable[..., Awaitable[Client]], json_log: JsonLog
) -> None:
    # aiohttp's parser words its errors with the bytes it choked on: the request line (its query),
    # a header (a cookie, a bearer token). The refusal line says what was wrong, never those bytes.
    client = await gateway()
    port = client.port
    assert port is not None
    bearer = "eyJ" + "b" * 9_000  # a long token: more than a header line may hold
    sent = [
        f"GET /agent/tools?api_key={QUERY_SECRET} HTTP/1.1 junk\r\nHost: a\r\n\r\n".encode(),
        f"G@T /agent/tools?api_key={QUERY_SECRET} HTTP/1.1\r\nHost: a\r\n\r\n".encode(),
        f"GET /agent/tools?api_key={QUERY_SECRET}\x00 HTTP/1.1\r\nHost: a\r\n\r\n".encode(),
        f"GET /healthz HTTP/1.1\r\nHost: a\r\nCookie: agora_visitor={COOKIE_VALUE}\x01\r\n\r\n".encode(),
        f"GET /healthz HTTP/1.1\r\nHost: a\r\nAuthorization: Bearer {bearer}\r\n\r\n".encode(),
        b"POST /agent/tool-call/approve HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
        + f"{QUERY_SECRET}\r\n".encode(),
    ]
    for data in sent:
        assert (await _raw(port, data)).startswith(b"HTTP/1.0 400 "), data[:40]
    refusals = [line for line in json_log.lines("gateway.http") if "bad_http_request" in line["message"]]
    assert len(refusals) == len(sent), json_log.text
    assert [line["message"].split(": ")[1] for line in refusals] == [
        "BadStatusLine",
        "BadHttpMethod",
        "InvalidURLError",
        "BadHttpMessage",
        "LineTooLong",
        "BadHttpMessage",
    ]
    for secret in (QUERY_SECRET, COOKIE_VALUE, bearer[:40], "api_key"):
        assert secret not in json_log.text, secret


async def test_an_unmatched_path_is_logged_without_what_it_may_carry(
    gateway: Callable[..., Awaitable[Client]], json_log: JsonLog
) -> None:
    # A token in a path no route matches (a media link with a slash too many, a webhook URL with
    # the bot token in its path, a typo) is still a token: the refusal names the gateway's own
    # prefix of the path, if it has one, and nothing after it.
    client = await gateway()
    media = await client.app[SERVICES].media.put(b"\x89PNG...", "image/png")
    for path in (f"/media/{media}/", f"/{BOT_TOKEN}", f"/channels/telegram/{BOT_TOKEN}", f"/agent/x/{QUERY_SECRET}"):
        assert (await client.get(path)).status == 404, path
    wheres = [line["message"].split(": ")[0] for line in json_log.lines("gateway.http")]
    assert wheres == [
        "refused 404 not_found GET /media/…",
        "refused 404 not_found GET /…",
        "refused 404 not_found GET /channels/…",
        "refused 404 not_found GET /agent/…",
    ]
    assert {line["path"] for line in json_log.lines("gateway.http")} == {"unmatched"}
    for secret in (media, BOT_TOKEN, QUERY_SECRET):
        assert secret not in json_log.text, secret


async def test_a_files_answer_is_logged_with_the_status_it_was_sent_with(
    aiohttp_client: Any, tmp_path: Path, json_log: JsonLog
) -> None:
    # A file's status is known only once it is opened: a missing one is a 404 (a refusal, one
    # line), an unchanged one a 304, a range a 206; none of them is logged as 200.
    (tmp_path / "logo.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    app = Gateway(static_dir=tmp_path).create_app(settings())
    client = await aiohttp_client(app)
    first = await client.get("/assets/logo.svg")
    assert first.status == 200
    unchanged = await client.get("/assets/logo.svg", headers={"If-None-Match": first.headers["ETag"]})
    part = await client.get("/assets/logo.svg", headers={"Range": "bytes=0-3"})
    missing = await client.get("/assets/missing.png")
    assert (unchanged.status, part.status, missing.status) == (304, 206, 404)
    access = [(line["path"], line["status"]) for line in json_log.lines("gateway.access")]
    assert access == [("/assets", 200), ("/assets", 304), ("/assets", 206)]
    [refusal] = json_log.lines("gateway.http")
    assert refusal["message"] == "refused 404 not_found GET /assets: Not Found" and refusal["status"] == 404
