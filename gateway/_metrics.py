"""Prometheus metrics of one gateway process (``GET /metrics``)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Metric, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from ._guards import GuardDirection, VerdictKind
from ._runtime import RuntimeObserver
from .events import RunStatus, ToolOutcome
from .stores import ModelStepEntry, RunRecord

__all__ = ["Metrics"]

_LATENCY = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)


class FrameCounts(Collector):
    """Counts web-socket frames with plain integers (a labelled counter locks on every frame)."""

    def __init__(self) -> None:
        self.incoming = 0
        self.outgoing = 0

    def collect(self) -> Iterable[Metric]:
        """The two counts, as ``agora_websocket_frames_total{direction}``."""
        family = CounterMetricFamily("agora_websocket_frames", "Web-socket frames.", labels=["direction"])
        family.add_metric(["in"], self.incoming)
        family.add_metric(["out"], self.outgoing)
        yield family


class _Children:
    """A labelled metric's children, kept by label values.

    ``labels()`` checks the values and takes a lock on every call; a turn touches several
    labelled metrics, so each child is looked up once and then found in a dict. Label values
    come from small sets (channels, statuses, tool names, routes).
    """

    __slots__ = ("_children", "_metric")

    def __init__(self, metric: Any) -> None:
        self._metric = metric
        self._children: dict[tuple[str, ...], Any] = {}

    def __call__(self, *values: str) -> Any:
        child = self._children.get(values)
        if child is None:
            child = self._children[values] = self._metric.labels(*values)
        return child


class Metrics(RuntimeObserver):
    """Counters and latency histograms for turns, runs, tools, model steps, guards, renders and sockets.

    Each gateway app has its own registry, so several apps (tests) never share counters.
    """

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.turns = Counter("agora_turns_total", "Turns started, by channel.", ["channel"], registry=r)
        self.runs = Counter(
            "agora_runs_finished_total", "Runs that ended or parked, by status.", ["status"], registry=r
        )
        self.run_seconds = Histogram(
            "agora_run_seconds", "Time a run was driven before it ended or parked.", buckets=_LATENCY, registry=r
        )
        self.tools = Counter("agora_tool_calls_total", "Tool calls settled.", ["tool", "status"], registry=r)
        self.tool_seconds = Histogram(
            "agora_tool_seconds", "Tool call latency.", ["tool"], buckets=_LATENCY, registry=r
        )
        self.model_seconds = Histogram("agora_model_step_seconds", "Model step latency.", buckets=_LATENCY, registry=r)
        self.renders = Counter("agora_renders_total", "Components rendered, by format.", ["format"], registry=r)
        self.render_seconds = Histogram(
            "agora_render_seconds", "Render latency, by format.", ["format"], buckets=_LATENCY, registry=r
        )
        self.sockets = Gauge("agora_websockets_open", "Open web sockets.", registry=r)
        self.frames = FrameCounts()
        """Web-socket frames in and out: plain integers, read when Prometheus scrapes."""
        r.register(self.frames)
        self.http = Counter("agora_http_requests_total", "HTTP requests.", ["route", "status"], registry=r)
        self.http_seconds = Histogram(
            "agora_http_request_seconds", "HTTP request latency.", ["route"], buckets=_LATENCY, registry=r
        )
        self.rate_limited = Counter("agora_rate_limited_total", "Turns refused by the rate limit.", registry=r)
        self.connections_refused = Counter(
            "agora_connections_refused_total",
            "Connections serve refused: their address held max_connections_per_address already.",
            registry=r,
        )
        self.guards = Counter(
            "agora_guard_verdicts",
            "What input and output guards answered, by direction, guard and verdict.",
            ["direction", "guard", "verdict"],
            registry=r,
        )
        self.guard_count = _Children(self.guards)
        self.tokens = Counter(
            "agora_model_tokens",
            "Tokens of model steps charged to the ledger, by model, agent and direction (input, output).",
            ["model", "agent", "direction"],
            registry=r,
        )
        self.cost = Counter(
            "agora_model_cost_usd",
            "What priced model steps cost, in US dollars, by model and agent (unpriced steps are not counted).",
            ["model", "agent"],
            registry=r,
        )
        self.quota = Counter(
            "agora_quota_events",
            "Quota checks that warned (a budget near its limit) or refused (used up), by agent and period.",
            ["agent", "period", "outcome"],
            registry=r,
        )
        self.token_count = _Children(self.tokens)
        self.cost_count = _Children(self.cost)
        self.quota_count = _Children(self.quota)
        self.turn_count = _Children(self.turns)
        self.run_count = _Children(self.runs)
        self.tool_count = _Children(self.tools)
        self.tool_time = _Children(self.tool_seconds)
        self.render_count = _Children(self.renders)
        self.render_time = _Children(self.render_seconds)
        self.http_count = _Children(self.http)
        self.http_time = _Children(self.http_seconds)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.registry)

    # RuntimeObserver
    def run_started(self, run: RunRecord) -> None:
        """Count a turn when its run first starts (resumes are not turns)."""
        if run.status == "running" and run.usage.model_calls == 0:
            self.turn_count(run.turn.channel).inc()

    def run_finished(self, run: RunRecord, status: RunStatus, seconds: float) -> None:
        """Count and time a run that ended or parked."""
        self.run_count(status).inc()
        self.run_seconds.observe(seconds)

    def tool_settled(self, run: RunRecord, tool: str, status: ToolOutcome, seconds: float) -> None:
        """Count and time a tool call."""
        self.tool_count(tool, status).inc()
        self.tool_time(tool).observe(seconds)

    def model_step(self, run: RunRecord, seconds: float) -> None:
        """Time a model step."""
        self.model_seconds.observe(seconds)

    def guard_verdict(self, run: RunRecord, direction: GuardDirection, guard: str, verdict: VerdictKind) -> None:
        """Count a guard's verdict."""
        self.guard_count(direction, guard, verdict).inc()

    def usage_charged(self, run: RunRecord, step: ModelStepEntry) -> None:
        """Count a charged step's tokens, and its cost when its model is priced."""
        model = step.model or ""
        self.token_count(model, run.agent, "input").inc(step.usage.input_tokens)
        self.token_count(model, run.agent, "output").inc(step.usage.output_tokens)
        if step.cost_usd is not None:
            self.cost_count(model, run.agent).inc(step.cost_usd)

    def quota_crossed(self, agent: str, period: str, outcome: str) -> None:
        """Count a quota warning or refusal."""
        self.quota_count(agent, period, outcome).inc()
