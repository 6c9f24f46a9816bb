"""``Gateway`` and ``Branding`` in process: what an app declares is what its gateway serves."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from pydantic import BaseModel, ValidationError

from gateway import (
    APP_INSTRUCTIONS,
    CHANNELS,
    Agent,
    ApprovalPolicy,
    Branding,
    Gateway,
    Settings,
    TrustedHeaderResolver,
)
from gateway.models import ScriptedModel, ScriptStep, ToolCallRequest
from tools import UserError, define_tool

from .conftest import connect


class Echo(BaseModel):
    text: str


async def _echo(input: Echo, ctx: Any) -> dict[str, Any]:
    return {"echo": input.text}


echo = define_tool(name="echo", description="Echo a text.", input=Echo, execute=_echo)


def _settings(**values: Any) -> Settings:
    return Settings(_env_file=None, secret="a-test-secret-for-app-objects", **values)  # type: ignore[call-arg]


async def _client(aiohttp_client: Any, gateway: Gateway, **settings: Any) -> TestClient[web.Request, web.Application]:
    client: TestClient[web.Request, web.Application] = await aiohttp_client(gateway.create_app(_settings(**settings)))
    return client


async def test_an_app_serves_its_tools_agents_and_branding_and_nothing_of_the_demo(aiohttp_client: Any) -> None:
    model = ScriptedModel(
        [ScriptStep(tool_calls=[ToolCallRequest(name="echo", args={"text": "hi"})]), ScriptStep(text="ok")]
    )
    gateway = Gateway(
        tools=[echo],
        agents=[Agent(name="helper", instructions="You help.", description="Helps with echoes.")],
        model=model,
        branding=Branding(name="Echo desk", welcome="Say something.", prompts=["echo hi"], accent="teal"),
    )
    client = await _client(aiohttp_client, gateway)
    tools = await (await client.get("/agent/tools?agent=*")).json()
    assert [t["name"] for t in tools] == ["echo"]
    page = await (await client.get("/")).text()
    assert "<title>Echo desk</title>" in page and 'welcome="Say something."' in page and 'accent="teal"' in page
    assert 'prompts="[&#34;echo hi&#34;]"' in page and 'layout="page"' in page and "Coffee" not in page
    assert page == await (await client.get("/chat")).text()
    card = await (await client.get("/.well-known/agent-card.json")).json()
    assert card["name"] == "Echo desk" and card["description"] == "Helps with echoes."
    socket = await connect(client)
    welcome = await socket.hello()
    assert welcome["agent"] == "helper" and welcome["demo"] is False
    frames = await socket.turn("echo hi")
    assert [f["output"] for f in frames if f["type"] == "tool-completed"] == [{"echo": "hi"}]
    assert model.requests[0].instructions == "You help."


async def test_the_page_describes_the_app_as_its_card_does(aiohttp_client: Any) -> None:
    agents = [Agent(name="helper", instructions="You help.", description="Helps with echoes.")]
    client = await _client(aiohttp_client, Gateway(tools=[echo], agents=agents))
    # Without a Branding.description, the default agent's describes the page, as on the A2A card.
    for path in ("/", "/chat"):
        page = await (await client.get(path)).text()
        assert '<meta name="description" content="Helps with echoes.">' in page, path
    branded = Branding(description="Echoes, on request.")
    client = await _client(aiohttp_client, Gateway(tools=[echo], agents=agents, branding=branded))
    page = await (await client.get("/chat")).text()
    assert '<meta name="description" content="Echoes, on request.">' in page and "Helps with" not in page
    bare = await _client(aiohttp_client, Gateway(tools=[echo]))
    assert 'name="description"' not in await (await bare.get("/chat")).text()


async def test_an_app_without_agents_gets_one_generic_assistant(aiohttp_client: Any) -> None:
    runtime = Gateway(tools=[echo]).runtime(_settings())
    try:
        (agent,) = runtime.agents.values()
        assert agent.name == "assistant" and agent.instructions == APP_INSTRUCTIONS
        assert "coffee" not in agent.instructions.lower()
    finally:
        await runtime.aclose()


async def test_the_demo_page_keeps_its_texts_only_in_demo_mode(aiohttp_client: Any) -> None:
    from gateway.app import demo_gateway

    demo = await _client(aiohttp_client, demo_gateway())
    page = await (await demo.get("/")).text()
    assert (
        "Coffee shop assistant" in page
        and "offline demo model" in page
        and "<title>Agora Gateway · demo</title>" in page
    )
    chat = await (await demo.get("/chat")).text()
    assert 'layout="page"' in chat and "Coffee shop assistant" in chat
    app = await _client(aiohttp_client, Gateway(tools=[echo]))
    page = await (await app.get("/")).text()
    assert "offline demo model" not in page and "Coffee" not in page and "<title>Assistant</title>" in page
    # The widget words the demo only for the demo: an app on the offline model is no demo.
    assert (await (await connect(demo)).hello())["demo"] is True
    assert (await (await connect(app)).hello())["demo"] is False


async def test_branding_comes_from_the_environment_when_the_app_gives_none(
    aiohttp_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AGORA_BRAND_NAME", "Env desk")
    monkeypatch.setenv("AGORA_BRAND_PROMPTS", "first one|second, with a comma")
    monkeypatch.setenv("AGORA_BRAND_LOGO_URL", "/assets/logo.svg")
    assert Branding().prompts == ["first one", "second, with a comma"]
    assert Branding(name="Code wins").name == "Code wins"
    client = await _client(aiohttp_client, Gateway(tools=[echo]))
    page = await (await client.get("/")).text()
    assert 'title="Env desk"' in page and 'logo="/assets/logo.svg"' in page
    card = await (await client.get("/.well-known/agent-card.json")).json()
    assert card["iconUrl"].endswith("/assets/logo.svg") and card["iconUrl"].startswith("http://")


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("accent", "red;} body{display:none"),
        ("accent", 'red" onmouseover="alert(1)'),
        ("accent", "url(https://evil.test/x)"),
        ("logo_url", "javascript:alert(1)"),
        ("logo_url", "//evil.test/logo.png"),
        ("logo_url", '/a" onerror="alert(1)'),
        ("name", ""),
        ("prompts", ["x" * 121]),
        ("prompts", [f"p{i}" for i in range(9)]),
        ("name", "Acme\x1b[2J\x1b[31m"),  # a terminal that prints the A2A card obeys these
        ("title", "tab\x00"),
        ("name", "two\nlines"),
        ("prompts", ["bell\x07"]),
        ("welcome", "\x85next line"),
    ],
)
def test_branding_refuses_what_could_break_out_of_the_page(field: str, value: Any) -> None:
    with pytest.raises(ValidationError) as caught:
        Branding(**{field: value})
    assert caught.value.errors()[0]["loc"][0] == field


def test_branding_from_the_environment_refuses_odd_values_as_validation_errors(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # serve turns a ValidationError into one line naming the variable; anything else is a traceback.
    for value in ("[" * 100_000, "[" + "[1]," * 10 + "]", '["a", 1]'):
        monkeypatch.setenv("AGORA_BRAND_PROMPTS", value)
        with pytest.raises(ValidationError) as caught:
            Branding()
        assert caught.value.errors()[0]["loc"][0] == "prompts"
    monkeypatch.setenv("AGORA_BRAND_PROMPTS", "fine|also fine")
    monkeypatch.setenv("AGORA_BRAND_WELCOME", "Hello!\nAsk me anything.")  # a new line in a text is fine
    assert Branding().prompts == ["fine", "also fine"] and "\n" in Branding().welcome


async def test_branding_texts_are_escaped_on_the_page(aiohttp_client: Any) -> None:
    branding = Branding(name='<script>alert("x")</script>', welcome='" onfocus="alert(1)', prompts=['"><img src=x>'])
    client = await _client(aiohttp_client, Gateway(tools=[echo], branding=branding))
    page = await (await client.get("/chat")).text()
    assert "<script>alert" not in page and '" onfocus="' not in page and '"><img' not in page
    assert "&lt;script&gt;" in page


async def test_static_dir_is_served_at_assets_and_nothing_outside_it(aiohttp_client: Any, tmp_path: Path) -> None:
    (tmp_path / "static").mkdir()
    (tmp_path / "static" / "logo.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    (tmp_path / "secret.txt").write_text("not for you")
    client = await _client(aiohttp_client, Gateway(tools=[echo], static_dir=tmp_path / "static"))
    answer = await client.get("/assets/logo.svg")
    assert answer.status == 200 and "<svg" in await answer.text()
    for path in ("/assets/../secret.txt", "/assets/%2e%2e/secret.txt", "/assets/nope.png"):
        assert (await client.get(path)).status in (403, 404), path


async def test_assets_serves_no_hidden_file_and_answers_a_missing_one_as_json(
    aiohttp_client: Any, tmp_path: Path
) -> None:
    # static_dir=HERE (the app's own folder) is a mistake easily made: its .env, .git and the
    # like are never served, nor read by a render (tests/renderers/test_renderers_assets.py).
    static = tmp_path / "static"
    (static / ".git").mkdir(parents=True)
    (static / ".env").write_text("AGORA_SECRET=not-for-you-either")
    (static / ".git" / "config").write_text("[remote] url=https://user:token@example.test")
    (static / "sub").mkdir()
    (static / "sub" / ".htpasswd").write_text("admin:x")
    (static / "logo.svg").write_text("<svg xmlns='http://www.w3.org/2000/svg'/>")
    (static / "alias.svg").symlink_to(static / ".env")
    (static / "loop").symlink_to(static / "loop")
    client = await _client(aiohttp_client, Gateway(tools=[echo], static_dir=static))
    assert (await client.get("/assets/logo.svg")).status == 200
    for path in (
        "/assets/.env",
        "/assets/.git/config",
        "/assets/sub/.htpasswd",
        "/assets/%2eenv",
        "/assets/alias.svg",
        "/assets/loop",
    ):
        answer = await client.get(path)
        assert answer.status == 404, path
        assert "not-for-you" not in await answer.text()
    missing = await client.get("/assets/nope.png")
    assert (missing.status, (await missing.json())["code"]) == (404, "not_found")


async def test_an_apps_identity_resolvers_replace_the_defaults(aiohttp_client: Any) -> None:
    client = await _client(aiohttp_client, Gateway(tools=[echo], identity=TrustedHeaderResolver()))
    answer = await client.get("/agent/tools", headers={"X-Actor-Id": "staff-1", "X-Actor-Roles": "member"})
    assert answer.status == 200
    # No anonymous cookie without the default resolvers: a caller without headers is refused.
    refused = await client.get("/agent/tools")
    assert refused.status == 401 and "Set-Cookie" not in refused.headers


async def test_an_apps_approval_policy_reaches_the_runtime() -> None:
    policy = ApprovalPolicy()
    runtime = Gateway(tools=[echo], approval_policy=policy).runtime(_settings())
    try:
        assert runtime.approval_policy is policy
    finally:
        await runtime.aclose()


async def test_the_model_setting_overrides_the_apps_model_only_when_given() -> None:
    scripted = ScriptedModel([])
    runtime = Gateway(model=scripted).runtime(_settings())
    assert runtime.model is scripted
    await runtime.aclose()
    runtime = Gateway(model=scripted).runtime(_settings(model="demo"))
    assert runtime.model is not None and runtime.model.name == "demo"
    await runtime.aclose()
    with pytest.raises(UserError, match=r"Gateway\(model\)='llama'"):
        Gateway(model="llama").runtime(_settings())


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"agents": ["assistant"]}, "is not an Agent"),
        ({"model": 42}, "neither a Model nor a model name"),
        ({"catalog": []}, "is not a renderers.Catalog"),
        ({"branding": {"name": "x"}}, "is not a Branding"),
        ({"static_dir": "/no/such/folder"}, "is not a folder"),
    ],
)
def test_a_malformed_app_is_refused_at_declaration(options: dict[str, Any], said: str) -> None:
    with pytest.raises(UserError, match=said):
        Gateway(**options)


def test_two_tools_of_one_name_are_refused(tmp_path: Path) -> None:
    (tmp_path / "more.py").write_text(
        "from pydantic import BaseModel\nfrom tools import define_tool\n\n"
        "class E(BaseModel):\n    text: str\n\n"
        "async def run(input: E, ctx) -> dict:\n    return {}\n\n"
        "again = define_tool(name='echo', description='Another echo.', input=E, execute=run)\n"
    )
    with pytest.raises(UserError, match="two tools are named 'echo'"):
        Gateway(tools=[echo, tmp_path]).resolve_tools(b"x" * 32)


def test_tools_from_a_folder_that_fails_to_import_refuse_the_start(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "broken.py").write_text("raise RuntimeError('boom at import')\n")
    with caplog.at_level(logging.ERROR, logger="tools.discovery"), pytest.raises(UserError, match="boom at import"):
        Gateway(tools=str(tmp_path)).resolve_tools(b"x" * 32)
    assert [r.getMessage() for r in caplog.records if "broken.py" in r.getMessage()]


def test_the_start_up_names_every_agents_tools() -> None:
    runtime = Gateway(tools=[echo], agents=[Agent(name="all"), Agent(name="none", tools=[])]).runtime(_settings())
    gateway = Gateway()
    assert gateway.tool_names(runtime) == {"all": ["echo"], "none": []}


@pytest.mark.parametrize("refusal", ["two channels", "a bad AGORA_BRAND_ACCENT"])
def test_a_refused_app_builds_no_runtime(refusal: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from channels.web import WebChannel

    if refusal == "two channels":
        gateway, error = Gateway(tools=[echo], channels=[WebChannel(), WebChannel()]), UserError
    else:
        monkeypatch.setenv("AGORA_BRAND_ACCENT", "red;} body{display:none")
        gateway, error = Gateway(tools=[echo]), ValidationError
    built: list[Settings] = []
    monkeypatch.setattr(gateway, "runtime", built.append)  # a runtime (its store, its model's client) is made here
    with pytest.raises(error):
        gateway.create_app(_settings())
    assert built == []


async def test_a_refused_app_leaves_a_passed_runtime_as_it_was() -> None:
    from channels.web import WebChannel
    from gateway.app import create_app

    runtime = Gateway(tools=[echo]).runtime(_settings())
    try:
        before = list(runtime.observers)
        with pytest.raises(UserError, match="two channels share a name"):
            create_app(_settings(), runtime=runtime, channels=[WebChannel(), WebChannel()])
        assert runtime.observers == before
    finally:
        await runtime.aclose()


def test_demo_beside_an_app_adds_the_demos_tools_and_leaves_the_apps_object_alone() -> None:
    from examples.product_card import app as product_card
    from gateway.app import load_gateway

    spec = "examples.product_card.app:gateway"
    served = load_gateway(_settings(app=spec, demo=True, tools_path="examples/shop_tools.py"))
    assert served.demo and served.source == f"{spec} + demo"
    names = [tool.name for tool in served.resolve_tools(b"x" * 32)]
    assert names[:2] == ["show_product", "stock_level"] and "refund_order" in names
    assert served.resolved_branding().name == "Tile & Clay shop"  # the app's, not the demo's
    # The module's object is the app as declared: a second load without --demo has nothing of the demo.
    declared = product_card.gateway
    assert not declared.demo and declared.source == "app" and len(declared.tools) == 1
    plain = load_gateway(_settings(app=spec))
    assert not plain.demo and [tool.name for tool in plain.resolve_tools(b"x" * 32)] == ["show_product"]


async def test_a_channel_object_serves_one_app_only() -> None:
    from channels.web import WebChannel

    web_channel = WebChannel()
    app = Gateway(tools=[echo], channels=[web_channel])
    first = app.create_app(_settings())
    assert web_channel in first[CHANNELS]
    # A second app would point the first's routes at its own runtime: refused before it builds anything.
    with pytest.raises(UserError, match="channel 'web' is already set up on another app"):
        app.create_app(_settings())
