"""``configure_tracing``: a provider only when the ``OTEL_*`` variables ask; one line when a package is missing."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer
from opentelemetry.sdk.trace import TracerProvider

from gateway import TRACER_NAME, configure_tracing

ROOT = Path(__file__).resolve().parents[2]
_VARIABLES = (
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_SERVICE_NAME",
    "OTEL_RESOURCE_ATTRIBUTES",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
)


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _VARIABLES:
        monkeypatch.delenv(name, raising=False)


@pytest.mark.parametrize(
    "variables",
    [
        {},
        {"OTEL_TRACES_EXPORTER": "none"},
        {"OTEL_SERVICE_NAME": "shop"},  # a name alone exports nothing
        {"OTEL_TRACES_EXPORTER": "console", "OTEL_SDK_DISABLED": "true"},
    ],
)
def test_nothing_is_set_up_unless_an_exporter_is_asked_for(monkeypatch: pytest.MonkeyPatch, variables: Any) -> None:
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert configure_tracing(install=False) is None


def test_serve_installs_the_console_exporter_under_the_service_name() -> None:
    # A process of its own: the console exporter writes to the stdout it found at import.
    # As serve does: installed as the global provider; a second call leaves the installed one.
    program = (
        "from opentelemetry import trace\n"
        "from gateway import TRACER_NAME, configure_tracing\n"
        "provider = configure_tracing()\n"
        "assert trace.get_tracer_provider() is provider and configure_tracing() is None\n"
        "with trace.get_tracer(TRACER_NAME).start_as_current_span('invoke_agent default'):\n"
        "    pass\n"
        "provider.shutdown()\n"
    )
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console", "OTEL_SERVICE_NAME": "shop-gateway"}
    done = subprocess.run([sys.executable, "-c", program], env=env, cwd=ROOT, capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    printed = json.loads(done.stdout)
    assert printed["name"] == "invoke_agent default"
    assert printed["resource"]["attributes"]["service.name"] == "shop-gateway"


def test_the_service_name_defaults_to_agora_gateway(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    provider = configure_tracing(install=False)
    assert isinstance(provider, TracerProvider)
    assert provider.resource.attributes["service.name"] == "agora-gateway"
    provider.shutdown()


def test_a_missing_exporter_package_is_said_in_one_line(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "otlp")
    # As if opentelemetry-exporter-otlp-proto-http were not installed: its import fails.
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    with caplog.at_level(logging.INFO, logger="gateway.tracing"):
        assert configure_tracing(install=False) is None
    [line] = caplog.records
    assert line.levelno == logging.WARNING and line.exc_info is None
    assert "opentelemetry-exporter-otlp-proto-http" in line.getMessage()
    assert "agora-gateway[otel]" in line.getMessage()


def test_an_unknown_exporter_is_named(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "zipkin")
    with caplog.at_level(logging.INFO, logger="gateway.tracing"):
        assert configure_tracing(install=False) is None
    [line] = caplog.records
    assert "'zipkin'" in line.getMessage()


async def test_otlp_over_http_reaches_the_collector(monkeypatch: pytest.MonkeyPatch) -> None:
    received: list[tuple[str, str, bytes]] = []

    async def collect(request: web.Request) -> web.Response:
        received.append((request.path, request.content_type, await request.read()))
        return web.Response(status=200)

    app = web.Application()
    app.router.add_post("/v1/traces", collect)
    server = TestServer(app)
    await server.start_server()
    try:
        # An endpoint alone means otlp (the variables' default exporter).
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", str(server.make_url("")).rstrip("/"))
        provider = configure_tracing(install=False)
        assert isinstance(provider, TracerProvider)
        with provider.get_tracer(TRACER_NAME).start_as_current_span("chat scripted"):
            pass
        await asyncio.to_thread(provider.shutdown)  # flushes over HTTP, off the loop the collector runs on
    finally:
        await server.close()
    [(path, content_type, body)] = received
    assert path == "/v1/traces" and content_type == "application/x-protobuf"
    assert b"chat scripted" in body
