"""The browser suite's fixtures: the real gateway on a loopback port, and Debian's Chromium.

The gateway runs in-process (an ``aiohttp`` ``TestServer`` per test) and Playwright's async API
drives Chromium from the same event loop: the session's, so that one Chromium serves every test
(each test gets its own browser context: cookies, storage). Modules mark their tests with
``BROWSER_TESTS``. Every page records console errors and uncaught exceptions; a test that
produced any fails at teardown.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

import pytest
import pytest_asyncio
from aiohttp import web
from aiohttp.test_utils import TestServer
from playwright.async_api import (
    Browser,
    BrowserContext,
    ConsoleMessage,
    Locator,
    Page,
    WebSocket,
    async_playwright,
    expect,
)

from gateway import Gateway, Runtime, Settings, create_app
from gateway.app import assemble

from ..conftest import channels_for

SECRET = "test-secret-for-the-browser-tests"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
BROWSER_TESTS = [pytest.mark.browser, pytest.mark.asyncio(loop_scope="session")]
"""``pytestmark`` of every module here: real Chromium, on the session's event loop."""

expect.set_options(timeout=10_000)


def gateway_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"secret": SECRET, "port": 0, "turn_burst": 100, "turn_rate_per_minute": 6000}
    values.update(overrides)
    return Settings(_env_file=None, **values)  # type: ignore[call-arg]


class MakeGateway:
    """Starts gateways (the embedded demo, around a given runtime, or an ``app``) for one test.

    ``await make_gateway(runtime=None, *, app=None, port=0, pages=None, **settings)`` returns the base URL.
    ``pages`` maps paths to HTML served beside the gateway's routes (a test's own page, same
    origin as the socket); ``port`` reuses one (a restart: ``await make_gateway.stop(url)`` first).
    """

    def __init__(self) -> None:
        self.servers: dict[str, TestServer] = {}
        self.runtimes: list[Runtime] = []

    async def __call__(
        self,
        runtime: Runtime | None = None,
        *,
        app: Gateway | None = None,
        port: int = 0,
        pages: dict[str, str] | None = None,
        **overrides: Any,
    ) -> str:
        channels = channels_for(overrides)
        config = gateway_settings(**overrides)
        if app is not None and runtime is None:
            runtime = app.runtime(config)  # serve that Gateway (its catalog, static folder) on a runtime of its own
        if runtime is not None:
            self.runtimes.append(runtime)
        if app is not None:
            assert runtime is not None
            served = assemble(config, app, runtime=runtime, owns_runtime=False, channels=channels)
        else:
            served = create_app(config, runtime=runtime, channels=channels)
        for path, html in (pages or {}).items():
            served.router.add_get(path, _page_handler(html))
        server = TestServer(served, host="127.0.0.1", port=port)
        await server.start_server()
        url = f"http://127.0.0.1:{server.port}"
        self.servers[url] = server
        return url

    async def stop(self, url: str) -> None:
        """Stop the gateway at ``url`` (its port is free again)."""
        await self.servers.pop(url).close()

    async def aclose(self) -> None:
        for server in self.servers.values():
            await server.close()
        for runtime in self.runtimes:
            await runtime.aclose()


def _page_handler(html: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text=html, content_type="text/html")

    return page


def widget_page(widget: str = "<agora-chat></agora-chat>", *, style: str = "") -> str:
    """A bare page of the gateway's origin holding ``widget`` (an ``<agora-chat>`` element)."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Widget test</title><link rel="icon" href="data:,">
<script src="/static/agora-chat.js" defer></script>
<style>{style}</style></head>
<body>{widget}</body></html>"""


@pytest_asyncio.fixture(loop_scope="session")
async def make_gateway() -> AsyncIterator[MakeGateway]:
    """Start gateways for this test; all are stopped after it."""
    factory = MakeGateway()
    yield factory
    await factory.aclose()


@pytest_asyncio.fixture(loop_scope="session")
async def gateway(make_gateway: MakeGateway) -> str:
    """The demo gateway (offline demo model and tools)."""
    return await make_gateway()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def browser(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Browser]:
    """Debian's Chromium, headless, with its profile and caches in a temporary HOME."""
    home = tmp_path_factory.mktemp("chromium-home")
    env = {
        **os.environ,
        "HOME": str(home),
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_CACHE_HOME": str(home / ".cache"),
    }
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, env=env)
        try:
            yield browser
        finally:
            await browser.close()


OpenPage = Callable[..., Awaitable[Page]]


@pytest_asyncio.fixture(loop_scope="session")
async def open_page(browser: Browser) -> AsyncIterator[OpenPage]:
    """Open a page in a fresh context; fail the test on any console error or page exception."""
    contexts: list[BrowserContext] = []
    problems: list[str] = []

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            problems.append(f"console: {message.text}")

    def watch(page: Page) -> None:
        page.on("console", on_console)
        page.on("pageerror", lambda error: problems.append(f"pageerror: {error}"))

    async def open_(
        url: str | None = None,
        *,
        width: int = 1280,
        height: int = 800,
        color_scheme: str = "light",
        context: BrowserContext | None = None,
    ) -> Page:
        if context is None:
            context = await browser.new_context(
                viewport={"width": width, "height": height}, color_scheme=color_scheme, device_scale_factor=1
            )
            contexts.append(context)
        page = await context.new_page()
        watch(page)
        if url is not None:
            await page.goto(url)
        return page

    yield open_
    for context in contexts:
        await context.close()
    assert not problems, "the browser reported errors:\n" + "\n".join(problems)


def record_sent(page: Page) -> list[dict[str, Any]]:
    """Every frame the page will send on the web sockets it opens from now on, in order."""
    return _record(page, "framesent")


def record_received(page: Page) -> list[dict[str, Any]]:
    """Every frame the page's web sockets will receive from now on, in order."""
    return _record(page, "framereceived")


def _record(page: Page, direction: Literal["framesent", "framereceived"]) -> list[dict[str, Any]]:
    frames: list[dict[str, Any]] = []

    def on_socket(socket: WebSocket) -> None:
        socket.on(direction, lambda payload: frames.append(json.loads(payload)))

    page.on("websocket", on_socket)
    return frames


async def stored(page: Page, runs: int) -> dict[str, Any]:
    """The widget's saved conversation (localStorage), once ``runs`` runs have ended (or parked) in it."""
    await page.wait_for_function(
        """runs => Object.keys(localStorage).some(k => k.startsWith('agora-chat:v1:')
            && JSON.parse(localStorage.getItem(k)).frames.filter(f => f.type === 'run-finished').length >= runs)""",
        arg=runs,
    )
    raw: str = await page.evaluate(
        "() => localStorage.getItem(Object.keys(localStorage).find(k => k.startsWith('agora-chat:v1:')))"
    )
    data: dict[str, Any] = json.loads(raw)
    return data


class Chat:
    """The ``<agora-chat>`` of a page, with locators into its (open) shadow root."""

    def __init__(self, page: Page) -> None:
        self.page = page
        self.root = page.locator("agora-chat")
        self.input = self.root.locator("textarea")
        self.send_button = self.root.locator(".ac-send")
        self.stop_button = self.root.locator(".ac-stop")
        self.log = self.root.locator(".ac-log")
        self.turns = self.root.locator(".ac-turn")
        self.user_messages = self.root.locator(".ac-msg--user")
        self.assistant_messages = self.root.locator(".ac-msg--assistant")
        self.user_texts = self.root.locator(".ac-msg--user .ac-msg__body")
        self.assistant_texts = self.root.locator(".ac-msg--assistant .ac-msg__body")
        self.tools = self.root.locator(".ac-tool")
        self.components = self.root.locator(".ac-ui")
        self.approvals = self.root.locator(".ac-approval")

    async def ready(self) -> None:
        await expect(self.root.locator(".ac-status")).to_have_attribute("data-state", "online")

    async def say(self, text: str) -> None:
        """Type a message and press Enter."""
        await self.input.fill(text)
        await self.input.press("Enter")

    def turn(self, index: int) -> Locator:
        return self.turns.nth(index)

    async def turn_ends(self, index: int, status: str = "completed") -> Locator:
        """Wait for run number ``index`` (0-based) of the page to end (or park) with ``status``."""
        turn = self.turn(index)
        await expect(turn).to_have_attribute("data-status", status)
        return turn

    async def transcript(self) -> list[str]:
        """What the log shows, item by item: kind and text."""
        items: list[str] = await self.root.evaluate(
            """el => [...el.shadowRoot.querySelectorAll(
                    '.ac-msg:not([hidden]), .ac-tool, .ac-tool-result, .ac-ui, .ac-approval, .ac-notice')]
                .map(n => `${n.className.split(' ').at(-1)} ${n.dataset.state || n.dataset.status || ''}: `
                    + n.textContent.replace(/\\s+/g, ' ').trim())"""
        )
        return items

    async def shown(self) -> str:
        """Everything the widget shows or says: its text, and the names, titles and hints of its elements."""
        text: str = await self.root.evaluate(
            """el => [el.shadowRoot.textContent, ...[...el.shadowRoot.querySelectorAll('*')].flatMap(n =>
                ['aria-label', 'title', 'alt', 'placeholder', 'aria-description'].map(a => n.getAttribute(a) || ''))]
                .join(' ')"""
        )
        return text

    async def active_element(self) -> str:
        """The focused element inside the widget: tag, classes and text."""
        described: str = await self.root.evaluate(
            """el => { const a = el.shadowRoot.activeElement;
                return a ? `${a.tagName.toLowerCase()}.${[...a.classList].join('.')} ${a.textContent.trim()}` : ''; }"""
        )
        return described
