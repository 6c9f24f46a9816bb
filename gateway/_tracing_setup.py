"""``configure_tracing``: an OpenTelemetry SDK tracer provider, when the standard ``OTEL_*`` variables ask.

``agora-gateway serve`` calls it once at startup; an app that embeds the gateway installs its
own provider instead (``opentelemetry.trace.set_tracer_provider``) or calls this itself. Nothing
is exported unless a variable asks for it. The SDK (``opentelemetry-sdk``) and the OTLP exporter
(``opentelemetry-exporter-otlp-proto-http``) come with the ``otel`` extra; when a variable asks for
an exporter whose package is missing, one line says so and the gateway runs untraced.

Honoured here: ``OTEL_SDK_DISABLED``, ``OTEL_TRACES_EXPORTER`` (``otlp``, ``console``, ``none``,
comma-separated; unset means ``otlp`` when ``OTEL_EXPORTER_OTLP_ENDPOINT`` or
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` is set, else nothing). Read by the SDK and the exporter
themselves: ``OTEL_SERVICE_NAME`` (default ``agora-gateway``), ``OTEL_RESOURCE_ATTRIBUTES``,
``OTEL_TRACES_SAMPLER`` / ``OTEL_TRACES_SAMPLER_ARG``, ``OTEL_BSP_*``,
``OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT`` / ``HEADERS`` / ``TIMEOUT`` / ``COMPRESSION``; and by the
API: ``OTEL_PROPAGATORS`` (W3C ``tracecontext,baggage`` by default).
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Mapping
from typing import Any

from opentelemetry import trace

__all__ = ["configure_tracing"]

logger = logging.getLogger("gateway.tracing")

_EXPORTERS: Mapping[str, tuple[str, str, str]] = {
    "otlp": (
        "opentelemetry.exporter.otlp.proto.http.trace_exporter",
        "OTLPSpanExporter",
        "opentelemetry-exporter-otlp-proto-http",
    ),
    "console": ("opentelemetry.sdk.trace.export", "ConsoleSpanExporter", "opentelemetry-sdk"),
}
_ENDPOINTS = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")


def _asked(environ: Mapping[str, str]) -> list[str]:
    """The exporters the variables name (empty: trace nothing)."""
    if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return []
    named = environ.get("OTEL_TRACES_EXPORTER")
    if named is None:
        return ["otlp"] if any(environ.get(name) for name in _ENDPOINTS) else []
    return [name for name in (part.strip().lower() for part in named.split(",")) if name and name != "none"]


def _exporter(name: str) -> Any | None:
    """An instance of the exporter ``name``, or ``None`` (said in one line) when it cannot be made."""
    known = _EXPORTERS.get(name)
    if known is None:
        logger.warning("OTEL_TRACES_EXPORTER names %r: use otlp, console or none; it is ignored", name)
        return None
    module, attribute, package = known
    try:
        exporter_class = getattr(importlib.import_module(module), attribute)
    except ImportError:
        logger.warning(
            "OTEL_TRACES_EXPORTER=%s needs the package %s, which is not installed "
            "(pip install 'agora-gateway[otel]'): no traces are exported",
            name,
            package,
        )
        return None
    return exporter_class()


def configure_tracing(*, install: bool = True) -> Any | None:
    """Build (and install as the global provider) an SDK ``TracerProvider`` from the ``OTEL_*`` variables.

    Args:
        install: Set it as the global provider (``trace.set_tracer_provider``); ``False`` only
            builds it (a test, or an app that installs it its own way).

    Returns:
        The provider, or ``None`` when the variables ask for no exporter, an exporter's package is
        missing (one warning line), or a provider was installed already (the app's own stays).
    """
    environ = os.environ
    asked = _asked(environ)
    if not asked:
        return None
    if install and not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        logger.info("a tracer provider is installed already; OTEL_TRACES_EXPORTER is left to it")
        return None
    try:
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        logger.warning(
            "OTEL_TRACES_EXPORTER=%s needs the package opentelemetry-sdk, which is not installed "
            "(pip install 'agora-gateway[otel]'): no traces are exported",
            ",".join(asked),
        )
        return None
    exporters = [exporter for exporter in map(_exporter, asked) if exporter is not None]
    if not exporters:
        return None
    resource = Resource.create()
    if str(resource.attributes.get(SERVICE_NAME, "")).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: "agora-gateway"}))  # neither variable named one
    provider = TracerProvider(resource=resource)
    for exporter in exporters:
        provider.add_span_processor(BatchSpanProcessor(exporter))
    if install:
        trace.set_tracer_provider(provider)
    logger.info("tracing: spans are exported to %s", ", ".join(asked))
    return provider
