"""``ModelPrice``: what a model's tokens cost, and the cost of a step and of a run.

A pricing table maps a model's name, exactly as ``Model.name`` gives it (``openai:gpt-4o``,
``anthropic:claude-sonnet-4-5``, ``demo``, a ``ScriptedModel``'s ``scripted``), to its price.
There is none by default: a model without a price costs ``None`` (unknown), never 0, and so does
a run with one unpriced step. ``AGORA_PRICING`` holds a table as JSON, or the path of a JSON file::

    {"openai:gpt-4o": {"input": 2.5, "output": 10}, "openai:gpt-4o-mini": {"input": 0.15, "output": 0.6}}

in US dollars per million tokens.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools import UserError

from .events import Usage
from .stores import ModelStepEntry

__all__ = ["ModelPrice", "Pricing", "parse_pricing", "run_cost"]


@dataclass(frozen=True)
class ModelPrice:
    """A model's price in US dollars per million tokens.

    Attributes:
        input_per_million: What a million input (prompt) tokens cost.
        output_per_million: What a million output (completion) tokens cost.
    """

    input_per_million: float
    output_per_million: float

    def __post_init__(self) -> None:
        for name in ("input_per_million", "output_per_million"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
                raise UserError(f"ModelPrice.{name} must be a finite number >= 0, not {value!r}")

    def cost(self, usage: Usage) -> float:
        """What ``usage`` costs at this price, in US dollars."""
        return (usage.input_tokens * self.input_per_million + usage.output_tokens * self.output_per_million) / 1e6


class Pricing:
    """A pricing table: a model's name to its ``ModelPrice`` (exact names, no patterns)."""

    def __init__(self, table: Mapping[str, ModelPrice] | None = None) -> None:
        """Args: table: the prices by ``Model.name``.

        Raises:
            UserError: A key that is not a name or a value that is not a ``ModelPrice``.
        """
        self.table: dict[str, ModelPrice] = {}
        for name, price in (table or {}).items():
            if not isinstance(name, str) or not name:
                raise UserError(f"pricing: {name!r} is not a model name")
            if not isinstance(price, ModelPrice):
                raise UserError(f"pricing[{name!r}]: {price!r} is not a ModelPrice")
            self.table[name] = price

    def cost(self, model: str | None, usage: Usage) -> float | None:
        """What a step of ``model`` using ``usage`` cost; ``None`` when the model is unpriced."""
        price = self.table.get(model) if model is not None else None
        return price.cost(usage) if price is not None else None


def run_cost(steps: Iterable[ModelStepEntry]) -> float | None:
    """The sum over a run's model steps; ``None`` when one is unpriced or there is none.

    Direct calls (MCP ``tools/call``, journaled as a step without a model) cost nothing and
    count for nothing: a run of only a direct call has no known model cost (``None``).
    """
    total: float | None = None
    for step in steps:
        if step.model is None:
            continue
        if step.cost_usd is None:
            return None
        total = (total or 0.0) + step.cost_usd
    return total


def parse_pricing(value: str | Mapping[str, Any]) -> dict[str, ModelPrice]:
    """A pricing table from JSON text, the path of a JSON file, or the parsed mapping.

    Each entry is ``{"input": <usd per million>, "output": <usd per million>}``.

    Raises:
        ValueError: Not JSON (nor a readable file), or an entry that is not such a pair.
    """
    data: Any = value
    if isinstance(value, str):
        text = value.strip()
        if not text.startswith("{"):
            try:
                text = Path(text).expanduser().read_text(encoding="utf-8")
            except OSError as exc:
                raise ValueError(f"is neither JSON nor a readable file ({exc.strerror or exc})") from None
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValueError(f"is not valid JSON: {exc}") from None
    if not isinstance(data, Mapping):
        raise ValueError('must be a JSON object {"<model>": {"input": 2.5, "output": 10}}')
    table: dict[str, ModelPrice] = {}
    for name, entry in data.items():
        if not isinstance(entry, Mapping) or set(entry) != {"input", "output"}:
            raise ValueError(f'{name!r} must be {{"input": <usd per million>, "output": <usd per million>}}')
        try:
            table[str(name)] = ModelPrice(entry["input"], entry["output"])
        except UserError as exc:
            raise ValueError(f"{name!r}: {exc}") from None
    return table
