"""``examples/deploy``: what can be checked without Docker (CI has no registry to build or pull images).

The compose file parses and wires two gateways to one Redis with one secret; the Dockerfile copies
paths that exist and that the wheel needs; the health checks are one command, asking ``/healthz``
on the port the gateway listens on, and that command passes against a running gateway and fails
without one; every ``AGORA_*`` name in the deploy files and in docs/operations.md is a setting.
"""

from __future__ import annotations

import asyncio
import re
import shlex
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml
from aiohttp.test_utils import TestClient
from pydantic import AliasChoices

from .cli.test_serve import free_port
from .web.conftest import settings

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "examples" / "deploy"


def compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    return loaded


def dockerfile() -> list[str]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    text = re.sub(r"\\\n\s*", " ", (DEPLOY / "Dockerfile").read_text())
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def setting_names() -> set[str]:
    """Every environment name a settings model of the gateway reads (aliases included)."""
    from gateway.app import settings_models

    names: set[str] = set()
    for _, model in settings_models():
        prefix = str(model.model_config.get("env_prefix") or "")
        for name, field in model.model_fields.items():
            names.add(f"{prefix}{name}".upper())
            alias = field.validation_alias
            choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
            names.update(choice.upper() for choice in choices if isinstance(choice, str))
    return names


def test_compose_runs_two_gateways_on_one_redis_with_one_secret() -> None:
    services = compose()["services"]
    assert set(services) == {"gateway-1", "gateway-2", "redis"}
    gateways = [services["gateway-1"], services["gateway-2"]]
    for service in gateways:
        build = service["build"]
        context = (DEPLOY / build["context"]).resolve()
        assert context == ROOT and (context / build["dockerfile"]).resolve() == DEPLOY / "Dockerfile"
        assert service["env_file"] == "agora.env" and (DEPLOY / "agora.env.example").is_file()
        assert service["environment"]["AGORA_STORE_URL"] == "redis://redis:6379/0"  # the redis service, by name
        assert service["depends_on"] == {"redis": {"condition": "service_healthy"}}
        [port] = service["ports"]
        assert port.startswith("127.0.0.1:") and port.endswith(":8000")
    assert gateways[0]["ports"] != gateways[1]["ports"]
    assert gateways[0]["healthcheck"] == gateways[1]["healthcheck"]
    assert "redis-cli" in services["redis"]["healthcheck"]["test"]
    assert "redis-data" in compose()["volumes"]
    template = (DEPLOY / "agora.env.example").read_text()
    assert re.search(r"^AGORA_SECRET=$", template, re.M)  # empty: a gateway refuses to start until it is set
    assert "examples/deploy/agora.env" in (ROOT / ".gitignore").read_text().splitlines()


def test_the_dockerfile_copies_what_the_wheel_is_built_from() -> None:
    instructions = dockerfile()
    assert instructions[0].startswith("FROM python:3.11")
    copied: list[str] = []
    for line in instructions:
        if line.startswith("COPY "):
            *sources, _target = line.split()[1:]
            copied.extend(sources)
    for source in copied:
        assert (ROOT / source).exists(), source
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    wheel = project["tool"]["hatch"]["build"]["targets"]["wheel"]
    needed = {"pyproject.toml", project["project"]["readme"], *wheel["packages"], *wheel["force-include"]}
    assert needed <= set(copied), needed - set(copied)
    kept = {line[1:] for line in (DEPLOY / "Dockerfile.dockerignore").read_text().splitlines() if line.startswith("!")}
    assert set(copied) <= kept  # nothing copied is ignored out of the context
    [cmd] = [line for line in instructions if line.startswith("CMD ")]
    assert cmd == 'CMD ["agora-gateway", "serve"]' and "agora-gateway" in project["project"]["scripts"]
    # The default store's folder, where examples/deploy/README.md mounts a volume, is the user's own.
    user, workdir, folder = (
        instructions.index(line) for line in ("USER agora", "WORKDIR /home/agora", "RUN mkdir -m 0700 .agora")
    )
    assert user < workdir < folder and "/home/agora/.agora" in (DEPLOY / "README.md").read_text()
    env = next(line for line in instructions if line.startswith("ENV "))
    assert "AGORA_HOST=0.0.0.0" in env and "AGORA_PORT=8000" in env and "AGORA_LOG_FORMAT=json" in env


def health_command() -> list[str]:
    """The compose health check's command; the Dockerfile's HEALTHCHECK is the same one."""
    test = compose()["services"]["gateway-1"]["healthcheck"]["test"]
    assert test[0] == "CMD"
    [line] = [line for line in dockerfile() if line.startswith("HEALTHCHECK ")]
    exec_form = line.partition(" CMD ")[2]
    assert yaml.safe_load(exec_form) == test[1:]  # a JSON array: the same argv
    assert "http://127.0.0.1:8000/healthz" in test[-1]
    return list(test[1:])


async def test_the_health_check_passes_on_a_running_gateway_and_fails_without_one(aiohttp_client: Any) -> None:
    from gateway import create_app

    client: TestClient[Any, Any] = await aiohttp_client(create_app(settings()))
    command = health_command()
    assert command[0] == "python"

    async def check(port: int) -> int:
        argv = [sys.executable, *command[1:-1], command[-1].replace(":8000/", f":{port}/")]
        process = await asyncio.create_subprocess_exec(*argv, stderr=asyncio.subprocess.DEVNULL)
        return await asyncio.wait_for(process.wait(), 30)

    assert client.port is not None
    assert await check(client.port) == 0, shlex.join(command)
    assert await check(free_port()) != 0  # nothing listens there


def test_every_documented_setting_is_a_real_one() -> None:
    known = setting_names()
    assert {
        "AGORA_SECRET",
        "AGORA_STORE_URL",
        "AGORA_REDIS_URL",
        "AGORA_LOG_FORMAT",
        "AGORA_TWILIO_AUTH_TOKEN",
    } <= known
    files = [*sorted(DEPLOY.iterdir()), ROOT / "docs" / "operations.md"]
    named = {name for path in files for name in re.findall(r"\bAGORA_[A-Z0-9_]*[A-Z0-9]\b", path.read_text())}
    assert "AGORA_SECRET" in named
    assert named - known == set()
