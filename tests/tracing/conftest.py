"""Spans recorded by an SDK provider with an in-memory exporter, injected into ``gateway._tracing`` per test.

The global provider is never set in the test process (it can be set only once): the gateway
reads its provider through ``gateway._tracing.tracer_provider``, which the ``spans`` fixture
replaces for one test. Tests without it run with the API's default provider: nothing records.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from gateway import _tracing


class Spans:
    """The spans one test finished, and the provider they came from."""

    def __init__(self, provider: TracerProvider, exporter: InMemorySpanExporter) -> None:
        self.provider = provider
        self.exporter = exporter

    def finished(self) -> list[ReadableSpan]:
        return list(self.exporter.get_finished_spans())

    def named(self, prefix: str) -> list[ReadableSpan]:
        return [span for span in self.finished() if span.name.startswith(prefix)]


@pytest.fixture(scope="session")
def _sdk() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


@pytest.fixture
def spans(_sdk: tuple[TracerProvider, InMemorySpanExporter], monkeypatch: pytest.MonkeyPatch) -> Iterator[Spans]:
    provider, exporter = _sdk
    exporter.clear()
    monkeypatch.setattr(_tracing, "tracer_provider", lambda: provider)
    yield Spans(provider, exporter)
    exporter.clear()
