"""``GET /agent/usage`` for the caller, an admin and everyone else, and the counters on ``/metrics``."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from gateway import Agent, Runtime
from gateway._usage import utc_day
from gateway.stores import MemoryStore, UsageEntry
from tools import Actor

from .conftest import ADMIN, ALICE, BOB, GPT, PRICES, cost, model, new_thread, step, token_for, turn


def auth(actor: Any) -> dict[str, str]:
    return {"Authorization": f"Bearer {token_for(actor)}"}


def two_agents() -> Runtime:
    sales = Agent(name="sales", model=model(step(tokens=(1000, 100)), step(tokens=(500, 50)), step(tokens=(10, 1))))
    notes = Agent(name="notes", model=model(step(tokens=(300, 30)), name="demo"))
    return Runtime(agents=[sales, notes], pricing=PRICES)


async def run_turns(runtime: Runtime) -> Runtime:
    """Alice runs two turns of ``sales`` (priced) and one of ``notes`` (unpriced); Bob one of ``sales``."""
    for actor, agent in ((ALICE, "sales"), (ALICE, "sales"), (ALICE, "notes"), (BOB, "sales")):
        run_id = await runtime.start_turn(turn(new_thread(), actor=actor, agent=agent))
        assert await runtime.wait(run_id, timeout=5) == "completed"
    return runtime


async def charged_runtime() -> Runtime:
    return await run_turns(two_agents())


async def test_the_caller_reads_their_own_lines_and_totals_this_month_by_default(make_client: Any) -> None:
    client = await make_client(await charged_runtime())
    answer = await client.get("/agent/usage", headers=auth(ALICE))
    assert answer.status == 200, await answer.text()
    assert answer.headers["Cache-Control"] == "no-store"
    body = await answer.json()
    today = utc_day()
    assert (body["from"], body["to"], body["actor"]) == (today[:8] + "01", today, "alice")
    assert [(r["agent"], r["model"], r["input_tokens"], r["output_tokens"], r["steps"]) for r in body["rows"]] == [
        ("notes", "demo", 300, 30, 1),
        ("sales", GPT, 1500, 150, 2),
    ]
    totals = body["totals"]
    assert (totals["input_tokens"], totals["output_tokens"], totals["tokens"], totals["steps"]) == (1800, 180, 1980, 3)
    assert totals["cost_usd"] == pytest.approx(cost((1000, 100)) + cost((500, 50)))  # the priced lines
    assert totals["unpriced_steps"] == 1
    assert list(body["actors"]) == ["alice"] and body["truncated"] is False


async def test_nothing_priced_is_a_null_cost(make_client: Any) -> None:
    runtime = Runtime(model=model(step(), name="demo"), pricing=PRICES)
    run_id = await runtime.start_turn(turn(new_thread()))
    assert await runtime.wait(run_id, timeout=5) == "completed"
    client = await make_client(runtime)
    body = await (await client.get("/agent/usage", headers=auth(ALICE))).json()
    assert body["totals"]["cost_usd"] is None and body["totals"]["tokens"] == 1200
    empty = await (await client.get("/agent/usage", headers=auth(BOB))).json()
    assert empty["rows"] == [] and empty["totals"]["cost_usd"] is None and empty["totals"]["tokens"] == 0


async def test_an_admin_reads_one_actor_or_everyone_per_actor(make_client: Any) -> None:
    client = await make_client(await charged_runtime())
    bob = await (await client.get("/agent/usage", params={"actor": "bob"}, headers=auth(ADMIN))).json()
    assert [r["actor_key"] for r in bob["rows"]] == ["bob"] and bob["totals"]["tokens"] == 11
    everyone = await (await client.get("/agent/usage", params={"actor": "*"}, headers=auth(ADMIN))).json()
    assert sorted(everyone["actors"]) == ["alice", "bob"]
    assert everyone["actors"]["alice"]["tokens"] == 1980 and everyone["actors"]["bob"]["tokens"] == 11
    assert everyone["totals"]["tokens"] == 1991


async def test_an_actor_whose_key_is_a_star_reads_only_with_the_admin_role(make_client: Any) -> None:
    client = await make_client(await charged_runtime())
    star = Actor(id="*", roles=["member"])
    for params in ({}, {"actor": "*"}):
        answer = await client.get("/agent/usage", params=params, headers=auth(star))
        assert answer.status == 403, await answer.text()
        assert (await answer.json())["code"] == "usage_forbidden"


async def test_an_admin_of_a_tenant_reads_only_that_tenants_usage(make_client: Any) -> None:
    notes = Agent(name="notes", model=model(*(step(tokens=(300, 30)) for _ in range(3)), name="demo"))
    runtime = Runtime(agents=[notes], pricing=PRICES)
    for actor in (ALICE, Actor(id="ana", tenant_ref="acme"), Actor(id="ana", tenant_ref="globex")):
        run_id = await runtime.start_turn(turn(new_thread(), actor=actor))
        assert await runtime.wait(run_id, timeout=5) == "completed"
    client = await make_client(runtime)
    admin = Actor(id="boss", roles=["admin"], tenant_ref="acme")
    everyone = await (await client.get("/agent/usage", params={"actor": "*"}, headers=auth(admin))).json()
    assert list(everyone["actors"]) == ["acme\x1fana"] and everyone["totals"]["tokens"] == 330
    mine = await client.get("/agent/usage", params={"actor": "acme\x1fana"}, headers=auth(admin))
    assert mine.status == 200 and (await mine.json())["totals"]["tokens"] == 330
    for other in ("globex\x1fana", "alice", "acme\x1f\x1fx"):
        answer = await client.get("/agent/usage", params={"actor": other}, headers=auth(admin))
        assert answer.status == 403, other
    platform = await (await client.get("/agent/usage", params={"actor": "*"}, headers=auth(ADMIN))).json()
    assert sorted(platform["actors"]) == ["acme\x1fana", "alice", "globex\x1fana"]


async def test_the_admin_role_is_a_setting(make_client: Any) -> None:
    client = await make_client(await charged_runtime(), admin_role="finance")
    refused = await client.get("/agent/usage", params={"actor": "bob"}, headers=auth(ADMIN))
    assert refused.status == 403
    finance = ADMIN.model_copy(update={"roles": ["finance"]})
    assert (await client.get("/agent/usage", params={"actor": "bob"}, headers=auth(finance))).status == 200


async def test_anyone_else_asking_for_another_actor_is_forbidden(make_client: Any, caplog: Any) -> None:
    client = await make_client(await charged_runtime())
    for actor in ("bob", "*"):
        answer = await client.get("/agent/usage", params={"actor": actor}, headers=auth(ALICE))
        assert answer.status == 403
        assert (await answer.json())["code"] == "usage_forbidden"
    own = await client.get("/agent/usage", params={"actor": "alice"}, headers=auth(ALICE))
    assert own.status == 200


async def test_without_a_credential_it_is_401(make_client: Any) -> None:
    client = await make_client(Runtime(model=model()), anonymous=False)
    answer = await client.get("/agent/usage")
    assert answer.status == 401
    assert (await answer.json())["code"] == "unauthenticated"


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ({"from": "2026-13-01"}, "invalid_date"),
        ({"from": "yesterday"}, "invalid_date"),
        ({"to": "2026-02-30"}, "invalid_date"),
        ({"from": "2026-1-01"}, "invalid_date"),
        ({"from": "２０２６-01-01"}, "invalid_date"),
        ({"from": "2026-05-02", "to": "2026-05-01"}, "invalid_range"),
        ({"from": "2025-01-01", "to": "2026-01-02"}, "invalid_range"),
        ({"actor": ""}, "invalid_request"),
        ({"actor": "x" * 513}, "invalid_request"),
    ],
)
async def test_bad_dates_and_ranges_are_400_with_one_line_and_no_traceback(
    make_client: Any, caplog: Any, query: dict[str, str], code: str
) -> None:
    client = await make_client(Runtime(model=model()))
    with caplog.at_level(logging.INFO):
        answer = await client.get("/agent/usage", params=query, headers=auth(ALICE))
    assert answer.status == 400
    assert (await answer.json())["code"] == code
    assert not [r for r in caplog.records if r.exc_info]


async def test_a_range_of_366_days_is_read_and_lines_outside_it_are_not(make_client: Any) -> None:
    store = MemoryStore()
    for day in ("2023-12-31", "2024-01-01", "2024-12-31", "2025-01-01"):
        entry = UsageEntry(actor_key="alice", day=day, agent="a", model=GPT, input_tokens=1, output_tokens=2)
        await store.add_usage(entry)
    client = await make_client(Runtime(model=model(), store=store))
    answer = await client.get("/agent/usage", params={"from": "2024-01-01", "to": "2024-12-31"}, headers=auth(ALICE))
    assert answer.status == 200, await answer.text()
    body = await answer.json()
    assert [r["day"] for r in body["rows"]] == ["2024-01-01", "2024-12-31"]  # a leap year: 366 days
    assert body["totals"]["tokens"] == 6
    only_from = await (
        await client.get("/agent/usage", params={"from": "2023-12-31", "to": "2023-12-31"}, headers=auth(ALICE))
    ).json()
    assert [r["day"] for r in only_from["rows"]] == ["2023-12-31"]


async def test_the_metrics_count_tokens_by_model_agent_and_direction_and_cost_of_priced_steps(make_client: Any) -> None:
    runtime = two_agents()
    client = await make_client(runtime)  # its metrics observe the runtime from now on
    await run_turns(runtime)
    text = await (await client.get("/metrics")).text()
    assert 'agora_model_tokens_total{agent="sales",direction="input",model="openai:gpt-4o"} 1510.0' in text
    assert 'agora_model_tokens_total{agent="sales",direction="output",model="openai:gpt-4o"} 151.0' in text
    assert 'agora_model_tokens_total{agent="notes",direction="input",model="demo"} 300.0' in text
    [line] = [line for line in text.splitlines() if line.startswith("agora_model_cost_usd_total{")]
    assert 'agent="sales"' in line and 'model="openai:gpt-4o"' in line
    assert float(line.split()[-1]) == pytest.approx(cost((1000, 100)) + cost((500, 50)) + cost((10, 1)))
