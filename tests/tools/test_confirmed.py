"""define_confirmed_tool: preview, signed single-use tokens, commit; and the token stores."""

from __future__ import annotations

import asyncio
import base64
import types
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
from pydantic import AliasChoices, BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

import tools

WATCHDOG = 2.0
SECRET = "s3cret-key"


class RefundInput(BaseModel):
    order_id: str
    amount: int
    note: str | None = None


ARGS = {"order_id": "o1", "amount": 30}


@dataclass
class Ledger:
    """Records every step a confirmed refund takes."""

    prepared: list[tuple[str, str]] = field(default_factory=list)
    previewed: int = 0
    committed: list[dict[str, Any]] = field(default_factory=list)
    commit_error: BaseException | None = None
    commit_entered: asyncio.Event = field(default_factory=asyncio.Event)
    commit_gate: asyncio.Event | None = None

    def tool(self, name: str = "refund", secret: Any = SECRET, **options: Any) -> tools.Tool:
        async def prepare(input: RefundInput, ctx: tools.ToolContext) -> dict[str, Any]:
            self.prepared.append((input.order_id, ctx.actor.id))
            return {"order_id": input.order_id, "amount": input.amount}

        def preview(prepared: dict[str, Any]) -> dict[str, Any]:
            self.previewed += 1
            return {"summary": f"Refund {prepared['amount']} on {prepared['order_id']}", "data": prepared}

        async def commit(prepared: dict[str, Any]) -> dict[str, Any]:
            self.commit_entered.set()
            if self.commit_gate is not None:
                await self.commit_gate.wait()
            if self.commit_error is not None:
                error, self.commit_error = self.commit_error, None
                raise error
            self.committed.append(prepared)
            return {"summary": f"Refunded {prepared['amount']}", "data": {"refund_id": "r1"}}

        return tools.define_confirmed_tool(
            name, "Refund an order.", RefundInput, secret, prepare, preview, commit, **options
        )


@pytest.fixture
def ledger() -> Ledger:
    return Ledger()


@pytest.fixture
def registry(ledger: Ledger) -> tools.ToolRegistry:
    return tools.ToolRegistry([ledger.tool()], transient_retry=None)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> dict[str, float]:
    """Control the confirmed-tool module's wall clock (tokens carry UNIX expiry times)."""
    import tools._confirmed as confirmed  # time control only

    now = {"t": 1_700_000_000.0}
    monkeypatch.setattr(confirmed, "time", types.SimpleNamespace(time=lambda: now["t"]))
    return now


async def preview(registry: tools.ToolRegistry, ctx: tools.ToolContext, args: dict[str, Any] = ARGS) -> dict[str, Any]:
    answer: dict[str, Any] = await registry.invoke("refund", args, ctx)
    return answer


async def commit(
    registry: tools.ToolRegistry, ctx: tools.ToolContext, token: Any, args: dict[str, Any] = ARGS
) -> dict[str, Any]:
    answer: dict[str, Any] = await registry.invoke("refund", {**args, "confirm": True, "confirm_token": token}, ctx)
    return answer


# -- shape -----------------------------------------------------------------------------------------


def test_registers_as_a_read_tool_whose_input_gains_confirm_fields(ledger: Ledger) -> None:
    tool = ledger.tool()
    assert tool.kind == "read"
    properties = tool.parameters["properties"]
    assert set(properties) == {"order_id", "amount", "note", "confirm", "confirm_token"}
    assert properties["confirm"]["type"] == "boolean" and properties["confirm"]["default"] is False
    assert {"type": "string", "maxLength": 512} in [
        {k: v for k, v in option.items() if k in ("type", "maxLength")}
        for option in properties["confirm_token"]["anyOf"]
    ]
    assert tool.parameters["required"] == ["order_id", "amount"]
    assert "$defs" not in tool.parameters


async def test_preview_answer_shape(
    registry: tools.ToolRegistry, ctx: tools.ToolContext, ledger: Ledger, clock: Any
) -> None:
    answer = await preview(registry, ctx)
    assert set(answer) == {"status", "summary", "data", "confirm_token", "expires_at"}
    assert answer["status"] == "preview"
    assert answer["summary"] == "Refund 30 on o1"
    assert answer["data"] == {"order_id": "o1", "amount": 30}
    token = answer["confirm_token"]
    assert isinstance(token, str) and token.startswith("ct1.")
    assert datetime.fromisoformat(answer["expires_at"]).timestamp() == clock["t"] + tools.DEFAULT_CONFIRM_TTL
    assert (ledger.prepared, ledger.previewed, ledger.committed) == ([("o1", "u1")], 1, [])


def test_the_token_is_an_hmac_sha256() -> None:
    token = tools.sign_confirm_token(SECRET, tool="refund", actor_id="u1", tenant="t1", args=ARGS, expires_at=2**31)
    prefix, expires, nonce, signature = token.split(".")
    assert (prefix, expires) == ("ct1", str(2**31))
    assert len(base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4))) == 32  # a SHA-256 digest
    other = tools.sign_confirm_token(SECRET, tool="refund", actor_id="u1", tenant="t1", args=ARGS, expires_at=2**31)
    assert other != token  # a fresh nonce each time
    for each in (token, other):
        assert (
            tools.verify_confirm_token(each, SECRET, tool="refund", actor_id="u1", tenant="t1", args=ARGS, now=0)
            == 2**31
        )


async def test_commit_runs_prepare_again_and_commits(
    registry: tools.ToolRegistry, ctx: tools.ToolContext, ledger: Ledger
) -> None:
    token = (await preview(registry, ctx))["confirm_token"]
    done = await commit(registry, ctx, token)
    assert done == {"status": "done", "summary": "Refunded 30", "data": {"refund_id": "r1"}}
    assert ledger.prepared == [("o1", "u1"), ("o1", "u1")]
    assert ledger.committed == [{"order_id": "o1", "amount": 30}]
    assert ledger.previewed == 1


async def test_argument_order_and_defaults_do_not_change_the_binding(
    registry: tools.ToolRegistry, ctx: tools.ToolContext, ledger: Ledger
) -> None:
    token = (await preview(registry, ctx, {"amount": 30, "order_id": "o1"}))["confirm_token"]
    await commit(registry, ctx, token, {"order_id": "o1", "amount": 30, "note": None})
    assert len(ledger.committed) == 1


# -- invalid before prepare ------------------------------------------------------------------------


async def assert_refused_before_prepare(
    registry: tools.ToolRegistry,
    ctx: tools.ToolContext,
    ledger: Ledger,
    token: Any,
    args: dict[str, Any] = ARGS,
    reason: str = "invalid",
) -> None:
    prepared = list(ledger.prepared)
    with pytest.raises(tools.ConfirmTokenError) as refused:
        await commit(registry, ctx, token, args)
    assert refused.value.reason == reason
    assert refused.value.tool == "refund"
    assert ledger.prepared == prepared, "prepare ran before the token was checked"
    assert ledger.committed == []


@pytest.mark.parametrize(
    "other",
    [
        tools.Actor("u2", ["member"], "t1"),  # another actor, same tenant
        tools.Actor("u1", ["member"], "t2"),  # same id, another tenant
        tools.Actor("u1", ["member"], None),  # same id, no tenant
        tools.Actor("u1", ["member"], ""),  # an empty tenant is not "no tenant"
    ],
)
async def test_another_actor_or_tenant_is_invalid(
    other: tools.Actor, registry: tools.ToolRegistry, make_ctx: Any, ledger: Ledger
) -> None:
    token = (await preview(registry, make_ctx()))["confirm_token"]
    await assert_refused_before_prepare(registry, make_ctx(other), ledger, token)


@pytest.mark.parametrize(
    "changed", [{"amount": 31}, {"order_id": "o2"}, {"note": "extra"}, {"amount": 30, "order_id": "O1"}]
)
async def test_a_changed_argument_is_invalid(
    changed: dict[str, Any], registry: tools.ToolRegistry, ctx: tools.ToolContext, ledger: Ledger
) -> None:
    token = (await preview(registry, ctx))["confirm_token"]
    await assert_refused_before_prepare(registry, ctx, ledger, token, {**ARGS, **changed})


async def test_another_tool_is_invalid(ledger: Ledger, ctx: tools.ToolContext) -> None:
    other = Ledger()
    registry = tools.ToolRegistry([ledger.tool("refund"), other.tool("refund_twin")])
    token = (await registry.invoke("refund_twin", ARGS, ctx))["confirm_token"]
    await assert_refused_before_prepare(registry, ctx, ledger, token)


async def test_another_secret_is_invalid(ledger: Ledger, ctx: tools.ToolContext) -> None:
    forged = tools.sign_confirm_token(
        "guessed", tool="refund", actor_id="u1", tenant="t1", args={**ARGS, "note": None}, expires_at=2**40
    )
    registry = tools.ToolRegistry([ledger.tool()])
    await assert_refused_before_prepare(registry, ctx, ledger, forged)


async def test_a_tampered_token_is_invalid(
    registry: tools.ToolRegistry, ctx: tools.ToolContext, ledger: Ledger
) -> None:
    token = (await preview(registry, ctx))["confirm_token"]
    prefix, expires, nonce, signature = token.split(".")
    flipped = signature[:-1] + ("A" if signature[-1] != "A" else "B")
    for tampered in (
        f"{prefix}.{int(expires) + 3600}.{nonce}.{signature}",  # a later expiry
        f"{prefix}.{expires}.{nonce[::-1]}.{signature}",
        f"{prefix}.{expires}.{nonce}.{flipped}",
        f"ct2.{expires}.{nonce}.{signature}",
        f"{token}.",
        token.upper(),
    ):
        await assert_refused_before_prepare(registry, ctx, ledger, tampered)


@pytest.mark.parametrize(
    "garbage",
    [None, "", "garbage", "ct1", "ct1...", "ct1.x.y.z", "ct1.-5.n.s", "ct1.².n.s", "ct1.1.n.é", "ct1.1.n.s\x00"],
)
async def test_a_token_that_is_not_a_token_is_invalid(
    garbage: Any, registry: tools.ToolRegistry, ctx: tools.ToolContext, ledger: Ledger
) -> None:
    await preview(registry, ctx)
    await assert_refused_before_prepare(registry, ctx, ledger, garbage)


@pytest.mark.parametrize(
    "garbage", [None, 123, 1.5, ["ct1"], {"t": 1}, b"ct1.1.n.s", "x" * 513, "ct1.².n.s", "ct1.1.n.é"]
)
def test_verify_refuses_anything_that_is_not_a_token(garbage: Any) -> None:
    with pytest.raises(tools.ConfirmTokenError) as refused:
        tools.verify_confirm_token(garbage, SECRET, tool="refund", actor_id="u1", tenant=None, args=ARGS)
    assert refused.value.reason == "invalid"


@pytest.mark.parametrize("garbage", [123, ["ct1"], "x" * 513])
async def test_a_token_of_the_wrong_type_or_length_fails_validation(
    garbage: Any, registry: tools.ToolRegistry, ctx: tools.ToolContext, ledger: Ledger
) -> None:
    await preview(registry, ctx)
    with pytest.raises(tools.ToolInputInvalidError, match="confirm_token"):
        await commit(registry, ctx, garbage)
    assert len(ledger.prepared) == 1 and ledger.committed == []


def test_fields_cannot_bleed_into_each_other() -> None:
    # A separator-joined signature would make these two identities sign the same bytes.
    token = tools.sign_confirm_token(SECRET, tool="t", actor_id="u\x1fx", tenant="y", args={}, expires_at=2**40)
    with pytest.raises(tools.ConfirmTokenError, match="not valid"):
        tools.verify_confirm_token(token, SECRET, tool="t", actor_id="u", tenant="x\x1fy", args={}, now=0)
    assert tools.verify_confirm_token(token, SECRET, tool="t", actor_id="u\x1fx", tenant="y", args={}, now=0)


@pytest.mark.parametrize(
    ("signed", "presented"),
    [
        ({"actor_id": "u1", "tenant": None}, {"actor_id": "u1", "tenant": ""}),
        ({"actor_id": "acme", "tenant": "u1"}, {"actor_id": "u1", "tenant": "acme"}),
        ({"actor_id": "acme\x1fu1", "tenant": None}, {"actor_id": "u1", "tenant": "acme"}),
        ({"tool": "t", "actor_id": "\x1fu1"}, {"tool": "t\x1f", "actor_id": "u1"}),
        ({"args": {"a": "1"}}, {"args": {"a": 1}}),
        ({"args": {"a": "x", "b": "y"}}, {"args": {"a": "x\x1fb", "b": "y"}}),
        ({"args": ["a", "b"]}, {"args": ["a,b"]}),
    ],
)
def test_tokens_whose_parts_join_alike_still_differ(signed: dict[str, Any], presented: dict[str, Any]) -> None:
    # Each pair would have signed the same bytes under a separator-joined (or str()-joined) input.
    base: dict[str, Any] = {"tool": "t", "actor_id": "u1", "tenant": None, "args": {}}
    token = tools.sign_confirm_token(SECRET, expires_at=2**40, **{**base, **signed})
    with pytest.raises(tools.ConfirmTokenError) as refused:
        tools.verify_confirm_token(token, SECRET, now=0, **{**base, **presented})
    assert refused.value.reason == "invalid"
    assert tools.verify_confirm_token(token, SECRET, now=0, **{**base, **signed}) == 2**40


# -- single use ------------------------------------------------------------------------------------


async def test_a_second_commit_is_used(registry: tools.ToolRegistry, ctx: tools.ToolContext, ledger: Ledger) -> None:
    token = (await preview(registry, ctx))["confirm_token"]
    await commit(registry, ctx, token)
    with pytest.raises(tools.ConfirmTokenError) as refused:
        await commit(registry, ctx, token)
    assert refused.value.reason == "used"
    assert "already used" in str(refused.value)
    assert len(ledger.committed) == 1


async def test_a_new_preview_gives_a_new_token(
    registry: tools.ToolRegistry, ctx: tools.ToolContext, ledger: Ledger
) -> None:
    first = (await preview(registry, ctx))["confirm_token"]
    await commit(registry, ctx, first)
    second = (await preview(registry, ctx))["confirm_token"]
    assert second != first
    await commit(registry, ctx, second)
    assert len(ledger.committed) == 2


async def test_a_failed_commit_releases_the_token(
    registry: tools.ToolRegistry, ctx: tools.ToolContext, ledger: Ledger
) -> None:
    token = (await preview(registry, ctx))["confirm_token"]
    ledger.commit_error = RuntimeError("payment gateway down")
    with pytest.raises(RuntimeError, match="payment gateway down"):
        await commit(registry, ctx, token)
    assert ledger.committed == []
    assert (await commit(registry, ctx, token))["status"] == "done"
    assert len(ledger.committed) == 1


async def test_a_cancelled_commit_releases_the_token(
    registry: tools.ToolRegistry, ctx: tools.ToolContext, ledger: Ledger
) -> None:
    token = (await preview(registry, ctx))["confirm_token"]
    ledger.commit_gate = asyncio.Event()
    async with asyncio.timeout(WATCHDOG):
        task = asyncio.create_task(commit(registry, ctx, token))
        try:
            await ledger.commit_entered.wait()
        finally:
            task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    ledger.commit_gate = None
    assert (await commit(registry, ctx, token))["status"] == "done"


class RecordingStore:
    """A ConfirmTokenStore that records its calls and defines __len__ (so it is falsy while empty)."""

    def __init__(self, events: list[str] | None = None) -> None:
        self.events = events if events is not None else []
        self.claimed: dict[str, float] = {}

    def __len__(self) -> int:
        return len(self.claimed)

    async def claim_confirm_token(self, token_hash: str, expires_at: float) -> bool:
        self.events.append("claim")
        if token_hash in self.claimed:
            return False
        self.claimed[token_hash] = expires_at
        return True

    async def release_confirm_token(self, token_hash: str) -> None:
        self.events.append("release")
        self.claimed.pop(token_hash, None)


async def test_the_token_is_claimed_before_commit_and_by_hash(ctx: tools.ToolContext) -> None:
    events: list[str] = []
    store = RecordingStore(events)
    assert isinstance(store, tools.ConfirmTokenStore)
    assert not store  # empty: falsy, and still the store the tool must use

    async def commit_step(prepared: Any) -> str:
        events.append("commit")
        return "done"

    tool = tools.define_confirmed_tool(
        "refund", "Refund.", RefundInput, SECRET, lambda i, c: i, lambda p: "preview", commit_step, store=store
    )
    registry = tools.ToolRegistry([tool])
    token = (await preview(registry, ctx))["confirm_token"]
    assert (await commit(registry, ctx, token))["summary"] == "done"
    assert events == ["claim", "commit"]
    [(token_hash, expires_at)] = store.claimed.items()
    assert token not in token_hash and len(token_hash) == 64  # a SHA-256 hex digest, never the token
    assert expires_at == float(token.split(".")[1])


async def test_the_run_store_is_used_when_the_tool_has_none(ledger: Ledger, make_ctx: Any) -> None:
    run_store = RecordingStore()
    ctx = make_ctx(confirm_tokens=run_store)
    registry = tools.ToolRegistry([ledger.tool()])
    token = (await preview(registry, ctx))["confirm_token"]
    await commit(registry, ctx, token)
    assert len(run_store.claimed) == 1


async def test_the_tool_store_wins_over_the_run_store(ledger: Ledger, make_ctx: Any) -> None:
    tool_store, run_store = RecordingStore(), RecordingStore()
    ctx = make_ctx(confirm_tokens=run_store)
    registry = tools.ToolRegistry([ledger.tool(store=tool_store)])
    token = (await preview(registry, ctx))["confirm_token"]
    await commit(registry, ctx, token)
    assert (len(tool_store.claimed), len(run_store.claimed)) == (1, 0)


async def test_a_shared_store_makes_the_token_single_use_across_tools(ctx: tools.ToolContext) -> None:
    store = tools.InMemoryConfirmTokenStore()
    first, second = Ledger(), Ledger()
    # Two processes serving the same tool: same name and secret, separate objects, one store.
    registry_a = tools.ToolRegistry([first.tool(store=store)])
    registry_b = tools.ToolRegistry([second.tool(store=store)])
    token = (await preview(registry_a, ctx))["confirm_token"]
    await commit(registry_a, ctx, token)
    with pytest.raises(tools.ConfirmTokenError, match="already used"):
        await commit(registry_b, ctx, token)
    assert second.committed == []


async def test_two_concurrent_commits_of_one_token_exactly_one_succeeds(
    registry: tools.ToolRegistry, ctx: tools.ToolContext, ledger: Ledger
) -> None:
    token = (await preview(registry, ctx))["confirm_token"]
    ledger.commit_gate = asyncio.Event()
    outcomes: list[tuple[str, Any]] = []
    refused = asyncio.Event()

    async def attempt() -> None:
        try:
            outcomes.append(("done", (await commit(registry, ctx, token))["status"]))
        except tools.ConfirmTokenError as exc:
            outcomes.append(("refused", exc.reason))
            refused.set()

    async with asyncio.timeout(WATCHDOG), asyncio.TaskGroup() as group:
        group.create_task(attempt())
        group.create_task(attempt())
        await ledger.commit_entered.wait()  # one commit is in flight...
        await refused.wait()  # ...and the other was refused while it was
        assert ledger.committed == []
        ledger.commit_gate.set()
    assert sorted(outcomes) == [("done", "done"), ("refused", "used")]
    assert len(ledger.committed) == 1


async def test_in_memory_store_claims_once_under_concurrency() -> None:
    store = tools.InMemoryConfirmTokenStore()
    assert isinstance(store, tools.ConfirmTokenStore)
    async with asyncio.timeout(WATCHDOG), asyncio.TaskGroup() as group:
        claims = [group.create_task(store.claim_confirm_token("h1", 2e9)) for _ in range(20)]
    assert sorted(c.result() for c in claims) == [False] * 19 + [True]
    assert await store.claim_confirm_token("h2", 2e9) is True
    await store.release_confirm_token("h1")
    assert await store.claim_confirm_token("h1", 2e9) is True
    await store.release_confirm_token("never-claimed")  # releasing the unknown is a no-op


async def test_in_memory_store_sweeps_expired_records() -> None:
    store = tools.InMemoryConfirmTokenStore()
    for n in range(1100):
        assert await store.claim_confirm_token(f"old{n}", 1.0)  # expired long ago
    assert await store.claim_confirm_token("fresh", 2e9)
    # After the sweep the old records are gone, so an (impossible) re-claim would pass; the fresh one stays claimed.
    assert await store.claim_confirm_token("fresh", 2e9) is False
    assert await store.claim_confirm_token("old0", 1.0) is True


# -- expiry ----------------------------------------------------------------------------------------


async def test_past_expiry_is_expired_before_prepare(
    registry: tools.ToolRegistry, ctx: tools.ToolContext, ledger: Ledger, clock: dict[str, float]
) -> None:
    token = (await preview(registry, ctx))["confirm_token"]
    clock["t"] += tools.DEFAULT_CONFIRM_TTL
    await assert_refused_before_prepare(registry, ctx, ledger, token, reason="expired")
    clock["t"] -= 1
    assert (await commit(registry, ctx, token))["status"] == "done"


async def test_a_custom_ttl(ledger: Ledger, ctx: tools.ToolContext, clock: dict[str, float]) -> None:
    registry = tools.ToolRegistry([ledger.tool(ttl=1)])
    answer = await preview(registry, ctx)
    assert datetime.fromisoformat(answer["expires_at"]).timestamp() == clock["t"] + 1
    clock["t"] += 1
    with pytest.raises(tools.ConfirmTokenError) as refused:
        await commit(registry, ctx, answer["confirm_token"])
    assert refused.value.reason == "expired"


def test_verify_with_now() -> None:
    token = tools.sign_confirm_token(SECRET, tool="t", actor_id="u", tenant=None, args={}, expires_at=1000)
    assert tools.verify_confirm_token(token, SECRET, tool="t", actor_id="u", tenant=None, args={}, now=999.9) == 1000
    with pytest.raises(tools.ConfirmTokenError) as refused:
        tools.verify_confirm_token(token, SECRET, tool="t", actor_id="u", tenant=None, args={}, now=1000)
    assert refused.value.reason == "expired"
    with pytest.raises(tools.ConfirmTokenError) as forged:  # a forged token never reads as "expired"
        tools.verify_confirm_token(token, "other", tool="t", actor_id="u", tenant=None, args={}, now=5000)
    assert forged.value.reason == "invalid"


def test_confirm_token_error_messages() -> None:
    for reason, words in [("invalid", "not valid"), ("used", "already used"), ("expired", "expired")]:
        error = tools.ConfirmTokenError(reason)  # type: ignore[arg-type]
        assert error.reason == reason and words in str(error)
    with pytest.raises(KeyError):
        tools.ConfirmTokenError("stale")  # type: ignore[arg-type]


# -- the steps -------------------------------------------------------------------------------------


async def test_prepare_may_refuse_and_nothing_is_signed(ctx: tools.ToolContext) -> None:
    def prepare(input: RefundInput, c: tools.ToolContext) -> None:
        raise tools.ToolFailed("Order o1 was already refunded")

    tool = tools.define_confirmed_tool("refund", "d", RefundInput, SECRET, prepare, lambda p: "x", lambda p: "y")
    with pytest.raises(tools.ToolFailed, match="already refunded"):
        await tools.ToolRegistry([tool]).invoke("refund", ARGS, ctx)


async def test_prepare_refusing_on_commit_does_not_burn_the_token(ctx: tools.ToolContext) -> None:
    refuse = {"now": False}
    committed: list[Any] = []

    def prepare(input: RefundInput, c: tools.ToolContext) -> RefundInput:
        if refuse["now"]:
            raise tools.ToolFailed("stock changed")
        return input

    def commit_step(prepared: RefundInput) -> str:
        committed.append(prepared)
        return "Refunded"

    tool = tools.define_confirmed_tool("refund", "d", RefundInput, SECRET, prepare, lambda p: "x", commit_step)
    registry = tools.ToolRegistry([tool])
    token = (await preview(registry, ctx))["confirm_token"]
    refuse["now"] = True
    with pytest.raises(tools.ToolFailed):
        await commit(registry, ctx, token)
    refuse["now"] = False
    await commit(registry, ctx, token)
    assert committed == [RefundInput(**ARGS)]


async def test_a_commit_that_answered_badly_still_spends_the_token(ctx: tools.ToolContext) -> None:
    committed: list[Any] = []

    def commit_step(prepared: RefundInput) -> None:
        committed.append(prepared)  # the change is made, then the answer is malformed

    tool = tools.define_confirmed_tool("refund", "d", RefundInput, SECRET, lambda i, c: i, lambda p: "x", commit_step)
    registry = tools.ToolRegistry([tool])
    token = (await preview(registry, ctx))["confirm_token"]
    with pytest.raises(tools.ToolDefinitionError, match="commit\\(\\) must return"):
        await commit(registry, ctx, token)
    with pytest.raises(tools.ConfirmTokenError, match="already used"):
        await commit(registry, ctx, token)
    assert len(committed) == 1


class Summary(BaseModel):
    summary: str
    data: dict[str, int] | None = None


@pytest.mark.parametrize(
    ("returned", "summary", "data"),
    [
        ("Refund 30", "Refund 30", None),
        ({"summary": "Refund 30"}, "Refund 30", None),
        ({"summary": "Refund 30", "data": [1, 2]}, "Refund 30", [1, 2]),
        (Summary(summary="Refund 30", data={"n": 1}), "Refund 30", {"n": 1}),
    ],
)
async def test_preview_and_commit_return_forms(returned: Any, summary: str, data: Any, ctx: tools.ToolContext) -> None:
    tool = tools.define_confirmed_tool(
        "refund", "d", RefundInput, SECRET, lambda i, c: i, lambda p: returned, lambda p: returned
    )
    registry = tools.ToolRegistry([tool])
    shown = await preview(registry, ctx)
    assert (shown["summary"], shown["data"]) == (summary, data)
    assert await commit(registry, ctx, shown["confirm_token"]) == {"status": "done", "summary": summary, "data": data}


@pytest.mark.parametrize("returned", [None, 3, {"data": 1}, {"summary": 3}, ["Refund"]])
async def test_a_bad_preview_return_is_a_definition_error(returned: Any, ctx: tools.ToolContext) -> None:
    tool = tools.define_confirmed_tool(
        "refund", "d", RefundInput, SECRET, lambda i, c: i, lambda p: returned, lambda p: "ok"
    )
    with pytest.raises(tools.ToolDefinitionError, match="preview\\(\\) must return a str or"):
        await tools.ToolRegistry([tool]).invoke("refund", ARGS, ctx)


async def test_a_callable_secret_is_read_at_each_call(ledger: Ledger, ctx: tools.ToolContext) -> None:
    keys = ["key-1"]
    registry = tools.ToolRegistry([ledger.tool(secret=lambda: keys[-1])])
    token = (await preview(registry, ctx))["confirm_token"]
    keys.append("key-2")  # rotated: tokens signed with the old key stop working
    await assert_refused_before_prepare(registry, ctx, ledger, token)
    fresh = (await preview(registry, ctx))["confirm_token"]
    assert (await commit(registry, ctx, fresh))["status"] == "done"


async def test_a_callable_secret_returning_nothing_is_refused(ledger: Ledger, ctx: tools.ToolContext) -> None:
    registry = tools.ToolRegistry([ledger.tool(secret=lambda: "")])
    with pytest.raises(tools.ToolDefinitionError, match="secret\\(\\) returned an empty value"):
        await preview(registry, ctx)


async def test_tool_options_pass_through(ledger: Ledger, make_ctx: Any) -> None:
    presentation = tools.ToolPresentation(label="Refund", running="Refunding {order_id}")
    registry = tools.ToolRegistry([ledger.tool(roles=["billing"], presentation=presentation)])
    tool = registry.get("refund")
    assert tool is not None and tool.presentation == presentation and tool.roles == ("billing",)
    with pytest.raises(tools.ToolForbiddenError):
        await preview(registry, make_ctx())
    billing = make_ctx(tools.Actor("u1", ["billing"], "t1"))
    assert (await preview(registry, billing))["status"] == "preview"


def test_a_commit_presentation_words_the_commit_call() -> None:
    preview_words = tools.ToolPresentation(running="Checking {order_id}", done="Checked {order_id}")
    commit_words = {"running": "Refunding {order_id}", "done": "Refunded {order_id}"}  # a dict is accepted
    tool = _define(presentation=preview_words, commit_presentation=commit_words)
    assert tool.presentation_for({"order_id": "A1", "confirm": False}) == preview_words
    committing = tool.presentation_for({"order_id": "A1", "confirm": True, "confirm_token": "t"})
    assert committing is not None and tools.narrate_done(committing, {"order_id": "A1"}) == "Refunded A1"
    plain = _define(presentation=preview_words)  # without one, both calls read the same
    assert plain.presentation_for({"order_id": "A1", "confirm": True}) == preview_words
    with pytest.raises(tools.ToolDefinitionError, match="presentation"):
        _define(commit_presentation="Refunding")


# -- bad definitions -------------------------------------------------------------------------------


class Clashing(BaseModel):
    confirm: bool


def _define(**overrides: Any) -> tools.Tool:
    arguments: dict[str, Any] = {
        "name": "refund",
        "description": "Refund.",
        "input": RefundInput,
        "secret": SECRET,
        "prepare": lambda i, c: i,
        "preview": lambda p: "p",
        "commit": lambda p: "c",
    }
    arguments.update(overrides)
    return tools.define_confirmed_tool(**arguments)


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"input": dict}, "input must be a pydantic BaseModel"),
        ({"input": None}, "input must be a pydantic BaseModel"),
        ({"input": Clashing}, "may not declare confirm"),
        ({"secret": ""}, "secret must be"),
        ({"secret": b""}, "secret must be"),
        ({"secret": None}, "secret must be"),
        ({"secret": 1234}, "secret must be"),
        ({"prepare": None}, "prepare must be callable"),
        ({"preview": "text"}, "preview must be callable"),
        ({"commit": 3}, "commit must be callable"),
        ({"ttl": 0}, "ttl must be a positive"),
        ({"ttl": -5}, "ttl must be a positive"),
        ({"ttl": 0.5}, "ttl must be a positive"),
        ({"ttl": True}, "ttl must be a positive"),
        ({"kind": "action"}, "always kind 'read'"),
        ({"store": object()}, "store must implement ConfirmTokenStore"),
        ({"name": "bad name"}, "name"),
        ({"description": ""}, "description"),
        ({"roles": "billing"}, "roles must be a list of str"),
    ],
)
def test_define_confirmed_tool_refuses_bad_arguments(overrides: dict[str, Any], match: str) -> None:
    with pytest.raises(tools.ToolDefinitionError, match=match):
        _define(**overrides)


def test_kind_read_may_be_spelled_out() -> None:
    assert _define(kind="read").kind == "read"
    assert _define(secret=b"bytes-key").name == "refund"


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: tools.sign_confirm_token("", tool="t", actor_id="u", tenant=None, args={}, expires_at=10), "secret"),
        (lambda: tools.sign_confirm_token(b"", tool="t", actor_id="u", tenant=None, args={}, expires_at=10), "secret"),
        (lambda: tools.sign_confirm_token(None, tool="t", actor_id="u", tenant=None, args={}, expires_at=10), "secret"),
        (
            lambda: tools.sign_confirm_token("s", tool="t", actor_id="u", tenant=None, args={}, expires_at=10.5),
            "expires",
        ),
        (
            lambda: tools.sign_confirm_token("s", tool="t", actor_id="u", tenant=None, args={}, expires_at=True),
            "expires",
        ),
        (lambda: tools.sign_confirm_token("s", tool="t", actor_id="u", tenant=None, args={}, expires_at=-1), "expires"),
        (lambda: tools.verify_confirm_token("ct1.1.n.s", "", tool="t", actor_id="u", tenant=None, args={}), "secret"),
        (lambda: tools.verify_confirm_token("ct1.1.n.s", 42, tool="t", actor_id="u", tenant=None, args={}), "secret"),
    ],
)
def test_sign_and_verify_refuse_bad_secrets_and_expiries(call: Any, match: str) -> None:
    with pytest.raises(tools.UserError, match=match):
        call()


class AliasedInput(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    order_id: str
    refund_amount: int


class PlainAliasInput(BaseModel):
    order_id: str = Field(alias="orderId")


class ChoiceInput(BaseModel):
    model_config = ConfigDict(extra="allow")

    order_id: str = Field(validation_alias=AliasChoices("orderId", "order"))


@pytest.mark.parametrize(
    ("model", "preview_args", "commit_args"),
    [
        (AliasedInput, {"orderId": "o1", "refundAmount": 5}, {"orderId": "o1", "refundAmount": 5}),
        (AliasedInput, {"orderId": "o1", "refundAmount": 5}, {"order_id": "o1", "refund_amount": 5}),
        (PlainAliasInput, {"orderId": "o1"}, {"orderId": "o1"}),
        (ChoiceInput, {"order": "o1", "reason": "late"}, {"orderId": "o1", "reason": "late"}),
    ],
)
async def test_aliased_inputs_preview_and_commit(
    model: type[BaseModel], preview_args: dict[str, Any], commit_args: dict[str, Any], ctx: tools.ToolContext
) -> None:
    prepared: list[BaseModel] = []

    def prepare(input: BaseModel, c: tools.ToolContext) -> BaseModel:
        prepared.append(input)
        return input

    tool = tools.define_confirmed_tool("refund", "d", model, SECRET, prepare, lambda p: "preview", lambda p: "done")
    registry = tools.ToolRegistry([tool])
    token = (await registry.invoke("refund", preview_args, ctx))["confirm_token"]
    done = await registry.invoke("refund", {**commit_args, "confirm": True, "confirm_token": token}, ctx)
    assert done["status"] == "done"
    assert [type(p) for p in prepared] == [model, model]  # the plain input, without the confirm fields
    assert prepared[0].model_dump() == prepared[1].model_dump()
    assert "confirm_token" not in prepared[1].model_dump()


async def test_extra_arguments_are_bound_too(ctx: tools.ToolContext) -> None:
    tool = tools.define_confirmed_tool("refund", "d", ChoiceInput, SECRET, lambda i, c: i, lambda p: "p", lambda p: "c")
    registry = tools.ToolRegistry([tool])
    token = (await registry.invoke("refund", {"order": "o1", "reason": "late"}, ctx))["confirm_token"]
    with pytest.raises(tools.ConfirmTokenError, match="not valid"):
        await registry.invoke(
            "refund", {"order": "o1", "reason": "other", "confirm": True, "confirm_token": token}, ctx
        )
