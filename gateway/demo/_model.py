"""``DemoModel``: an offline, rule-based stand-in for a language model.

It reads the last message and either calls a tool or words what the tools answered. It knows the
demo's phrasings (``_intents``, listed in ``HELP``) and, for any other tool on offer (an app's
own), matches the words of the message to the tool's name and fills the arguments from its schema
(``_generic``). It is not a language model, and says so.

A message is read in this order:

1. After a confirmed tool's preview (the demo's subscription, or an app's): a refusal ("no",
   "keep it", "não") leaves things as they are, a yes calls it again with the token.
2. A demo phrasing whose demo tool is on offer calls it; whose tool is not, while other demo
   tools are: "I can't use ...". With no demo tool on offer (an app's own tools only, even one
   named like a demo tool), the demo's phrasings are not used at all.
3. The generic rule over every tool on offer: a call, or a question for a missing value.
4. The answer to such a question ("42" after "Which order id?") is read with what it answers.
5. A greeting, else "I didn't catch that", each with what this model can do here.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

from tools import ToolDefinition, humanize_tool_name

from ..events import Usage
from ..models import AssistantMessage, ModelChunk, ModelRequest, TextChunk, ToolCallRequest, ToolMessage, UserMessage
from ._generic import QUESTION, plan_tool_call
from ._intents import confirms, declines, demo_intent
from ._replies import KEPT, UNCHANGED, greeting, word_result
from ._tools import is_demo_tool

__all__ = ["DemoModel"]

_GREETING = re.compile(r"\b(hi|hello|hey|help|olá|oi)\b", re.IGNORECASE)
_LEFT = "OK, I'll leave it."
_MAX_FOLLOW_UPS = 3
"""How many question-and-answer rounds back an unfinished request is still read."""

Answer = ToolCallRequest | str


class DemoModel:
    """A rule-based model for the demo tools and, by word matching, for an app's own tools."""

    name = "demo"

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelChunk]:
        """Answer one step: a tool call for a recognised request, else words."""
        last = request.messages[-1] if request.messages else None
        if isinstance(last, ToolMessage):
            text = _after_tools(request)
        else:
            answer = _plan(request)
            if isinstance(answer, ToolCallRequest):
                yield answer
                yield Usage(model_calls=1)
                return
            text = answer
        for piece in re.findall(r"\S+\s*", text) or [text]:
            yield TextChunk(piece)
        yield Usage(model_calls=1, output_tokens=len(text.split()))


# -- deciding what to do ---------------------------------------------------------------------------


def _plan(request: ModelRequest) -> Answer:
    text = request.last_user_text.strip()
    tools = request.tools
    pending = _pending_preview(request.messages)
    previewed = next((t for t in tools if pending is not None and t.name == pending.name), None)
    if pending is not None and previewed is not None:
        if declines(text):
            return KEPT if is_demo_tool(previewed) else UNCHANGED
        if confirms(text):
            return pending
    alone = _answer(text, tools)
    if isinstance(alone, ToolCallRequest):
        return alone
    combined: Answer | None = None
    if earlier := _unfinished(request.messages):
        if declines(text):
            return _LEFT
        combined = _answer(f"{earlier} {text}", tools)
        if isinstance(combined, ToolCallRequest):
            return combined
    if alone is not None:
        return alone
    if _GREETING.search(text):
        return "Hello! " + greeting(tools)
    if combined is not None:
        return combined  # the question again: the answer did not fill it
    return "I didn't catch that. " + greeting(tools)


def _answer(text: str, tools: Sequence[ToolDefinition]) -> Answer | None:
    """A call or a reply for ``text`` from the demo's phrasings, then the generic rule."""
    demo = {t.name for t in tools if is_demo_tool(t)}
    intent = demo_intent(text) if demo else None
    if intent is None:
        return plan_tool_call(text, tools)
    if intent.tool not in demo:
        return f"I can't use *{humanize_tool_name(intent.tool).lower()}* for you here."
    if intent.args is None:
        return intent.reply
    return ToolCallRequest(name=intent.tool, args=intent.args)


def _unfinished(messages: Sequence[UserMessage | AssistantMessage | ToolMessage]) -> str:
    """What the person asked before the questions of ours that the newest message answers ("" if none).

    ``cancel order`` / "Which order id?" / ``42`` reads as ``cancel order 42``.
    """
    texts: list[str] = []
    index = len(messages) - 1
    while len(texts) < _MAX_FOLLOW_UPS and index >= 2:
        asked, before = messages[index - 1], messages[index - 2]
        if not (
            isinstance(asked, AssistantMessage)
            and not asked.tool_calls
            and QUESTION.match(asked.content or "")
            and isinstance(before, UserMessage)
        ):
            break
        texts.insert(0, before.content)
        index -= 2
    return " ".join(texts)


def _pending_preview(messages: Sequence[UserMessage | AssistantMessage | ToolMessage]) -> ToolCallRequest | None:
    """The commit a "yes" would make: the newest preview's call again, with ``confirm`` and its token.

    Only while that preview is the newest thing said: once the person said something else, a
    "yes" is about that.
    """
    for index in range(len(messages) - 2, -1, -1):
        message = messages[index]
        if isinstance(message, UserMessage):
            return None
        if isinstance(message, ToolMessage):
            result = _load(message.content)
            if not (isinstance(result, dict) and result.get("status") == "preview" and result.get("confirm_token")):
                return None
            args = _arguments_of(messages[:index], message.tool_call_id)
            return ToolCallRequest(
                name=message.name, args={**args, "confirm": True, "confirm_token": result["confirm_token"]}
            )
    return None


def _arguments_of(messages: Sequence[UserMessage | AssistantMessage | ToolMessage], call_id: str) -> dict[str, Any]:
    for message in reversed(messages):
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                if call.id == call_id:
                    args = _load(call.arguments)
                    return args if isinstance(args, dict) else {}
    return {}


# -- wording results -------------------------------------------------------------------------------


def _after_tools(request: ModelRequest) -> str:
    offered = {t.name: t for t in request.tools}
    results: list[ToolMessage] = []
    for message in reversed(request.messages):
        if isinstance(message, ToolMessage):
            results.append(message)
        elif isinstance(message, AssistantMessage):
            break
    return " ".join(word_result(offered.get(m.name), m.name, _load(m.content)) for m in reversed(results))


def _load(content: str) -> Any:
    try:
        return json.loads(content)
    except ValueError:
        return content
