"""``serve``'s store as a user meets it: the default SQLite file, a restart, and stores that do not answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import pytest

from gateway import sign_actor_token
from gateway.stores import SqliteStore
from gateway.stores._sql_schema import SCHEMA_VERSION
from tools import Actor

from .test_serve import SECRET_ENV, free_port, serve_env, serving

REFUSED = "agora-gateway: cannot start: the store (AGORA_STORE_URL, --store) is unavailable: "
ALICE = Actor(id="alice", roles=["member"])


def headers() -> dict[str, str]:
    return {"Authorization": f"Bearer {sign_actor_token(ALICE, SECRET_ENV['AGORA_SECRET'], 600)}"}


def refused_start(*options: str, cwd: Path, store: str | None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(free_port()), *options],
        cwd=cwd,
        env=serve_env(store),
        capture_output=True,
        text=True,
        timeout=60,
    )


async def get_json(session: aiohttp.ClientSession, url: str) -> Any:
    async with session.get(url) as answer:
        assert answer.status == 200, await answer.text()
        return await answer.json()


async def frames_until(ws: aiohttp.ClientWebSocketResponse, kind: str, timeout: float = 20) -> list[dict[str, Any]]:
    """Frames up to and including the first of type ``kind`` (with a watchdog)."""
    seen: list[dict[str, Any]] = []
    async with asyncio.timeout(timeout):
        while not seen or seen[-1].get("type") != kind:
            seen.append(json.loads((await ws.receive()).data))
    return seen


async def test_serve_keeps_its_default_store_in_a_sqlite_file_under_dot_agora(tmp_path: Path) -> None:
    async with serving(cwd=tmp_path, store=None) as (_, port, line):
        database = tmp_path / ".agora" / "agora.db"
        assert f"store: sqlite at {database}," in line, line
        assert stat.S_IMODE((tmp_path / ".agora").stat().st_mode) == 0o700  # conversations: the owner's only
        async with aiohttp.ClientSession() as session:
            health = await get_json(session, f"http://127.0.0.1:{port}/healthz")
        assert health["store"] == {"status": "ok", "kind": "sqlite"}
        assert database.is_file()


async def test_a_pending_approval_survives_a_restart_of_serve_and_the_refund_runs_once(tmp_path: Path) -> None:
    """The README's first command: ask for a refund, stop the gateway, start it again, approve."""
    async with serving(cwd=tmp_path, store=None) as (_, port, _line):
        async with (
            aiohttp.ClientSession(headers=headers()) as session,
            session.ws_connect(f"http://127.0.0.1:{port}/agent/ws") as ws,
        ):
            await ws.send_json({"type": "hello"})
            thread_id = (await frames_until(ws, "welcome"))[-1]["thread_id"]
            await ws.send_json({"type": "send", "text": "refund order 1042"})
            frames = await frames_until(ws, "run-finished")
    assert frames[-1]["status"] == "awaiting-approval"
    [request] = [frame for frame in frames if frame["type"] == "approval-requested"]
    # serving stopped the first process with SIGTERM, and it exited 0.

    async with serving(cwd=tmp_path, store=None) as (_, port, _line):
        base = f"http://127.0.0.1:{port}"
        async with aiohttp.ClientSession(headers=headers()) as session:
            parked = await get_json(session, f"{base}/agent/threads/{thread_id}")
            assert [a["tool_call_id"] for a in parked["pending_approvals"]] == [request["tool_call_id"]]
            async with session.ws_connect(f"{base}/agent/ws") as ws:
                await ws.send_json({"type": "hello", "thread_id": thread_id, "after_seq": parked["last_seq"]})
                welcome = (await frames_until(ws, "welcome"))[-1]
                assert (welcome["thread_id"], welcome["restored"]) == (thread_id, True)
                await ws.send_json({"type": "approve", "tool_call_id": request["tool_call_id"], "id": "a1"})
                frames = await frames_until(ws, "run-finished")
            assert frames[-1]["status"] == "completed"
            history = await get_json(session, f"{base}/agent/threads/{thread_id}")
    events = history["events"]
    refunds = [e for e in events if e["type"] == "tool-completed" and e["tool"] == "refund_order"]
    assert [e["done"] for e in refunds] == ["Refunded order 1042"], "the refund ran once"
    assert [e["status"] for e in events if e["type"] == "approval-settled"] == ["approved"]
    assert [e["status"] for e in events if e["type"] == "run-finished"] == ["awaiting-approval", "completed"]
    assert history["pending_approvals"] == []


def test_an_unknown_store_scheme_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = refused_start("--store", "mysql://root:hunter2@db/agora", cwd=tmp_path, store=None)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "agora-gateway: cannot start: AGORA_STORE_URL: unknown store scheme 'mysql'; use memory://, "
        "sqlite:///path.db, postgresql://... (postgres://), redis://... (rediss://, unix://, redis+sentinel://, redis+cluster://)"
    ]
    assert "hunter2" not in result.stdout + result.stderr
    assert list(tmp_path.iterdir()) == []  # no side effect: no .agora made


def test_a_postgresql_that_does_not_answer_is_one_line_and_exit_2(tmp_path: Path) -> None:
    closed_port = free_port()  # nothing listens there
    url = f"postgresql://postgres:hunter2@127.0.0.1:{closed_port}/agora"
    result = refused_start("--store", url, cwd=tmp_path, store=None)
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(REFUSED) and f"127.0.0.1:{closed_port}" in line, line
    assert "hunter2" not in result.stdout + result.stderr and "Traceback" not in result.stderr


def test_a_sqlite_file_whose_folder_cannot_be_made_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    target = tmp_path / "a-file" / "data" / "agora.db"  # even root cannot make a folder inside a file
    result = refused_start("--store", f"sqlite:///{target}", cwd=tmp_path, store=None)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"{REFUSED}cannot create the SQLite store's folder {target.parent}: Not a directory"
    ]


async def test_a_database_of_a_newer_schema_is_refused_in_one_line_and_exit_2(tmp_path: Path) -> None:
    database = tmp_path / "agora.db"
    store = SqliteStore(database)
    await store.ping()  # creates the schema at this code's version
    await store.aclose()
    with contextlib.closing(sqlite3.connect(database)) as connection, connection:
        connection.execute("UPDATE meta SET value = '999' WHERE name = 'schema_version'")
    result = refused_start("--store", f"sqlite:///{database}", cwd=tmp_path, store=None)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        f"agora-gateway: cannot start: The database at {database} has agora schema version 999, newer than this "
        f"agora-gateway knows ({SCHEMA_VERSION}): upgrade agora-gateway, or point the store at another database."
    ]
    with contextlib.closing(sqlite3.connect(database)) as connection:  # refused, not migrated down
        assert connection.execute("SELECT value FROM meta WHERE name = 'schema_version'").fetchone() == ("999",)


@pytest.mark.postgres
async def test_serve_on_postgresql_names_it_without_its_password(tmp_path: Path, postgres_dsn: str) -> None:
    parts = urlsplit(postgres_dsn)  # trust auth: the password is not checked, only never shown
    url = parts._replace(netloc=f"postgres:hunter2@{parts.hostname}:{parts.port or 5432}").geturl()
    async with serving("--store", url, cwd=tmp_path, store=None) as (_, port, line):
        shown = f"postgres:***@{parts.hostname}:{parts.port or 5432}{parts.path}"
        assert f"store: postgresql at postgresql://{shown}," in line and "hunter2" not in line, line
        async with aiohttp.ClientSession() as session:
            health = await get_json(session, f"http://127.0.0.1:{port}/healthz")
        assert health["store"] == {"status": "ok", "kind": "postgres"}
    assert list(tmp_path.iterdir()) == []  # nothing under .agora: the store is the database


def test_the_redis_url_option_beats_a_store_variable(tmp_path: Path) -> None:
    closed = f"redis://127.0.0.1:{free_port()}/0"  # so the start says which store it tried
    result = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(free_port()), "--redis-url", closed],
        cwd=tmp_path,
        env=serve_env("memory://"),  # AGORA_STORE_URL=memory:// in the environment
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    [line] = result.stderr.splitlines()
    assert line.startswith(REFUSED) and closed in line, line


async def test_a_visitor_without_a_configured_secret_finds_their_conversation_after_a_restart(tmp_path: Path) -> None:
    """No AGORA_SECRET: serve keeps the secret it made beside the SQLite file, so the cookie still signs in."""
    env: dict[str, str | None] = {"AGORA_SECRET": None}
    jar = aiohttp.CookieJar(unsafe=True)  # the cookie of a browser on 127.0.0.1
    async with serving(cwd=tmp_path, store=None, env=env) as (_, port, _line):
        async with (
            aiohttp.ClientSession(cookie_jar=jar) as session,
            session.ws_connect(f"http://127.0.0.1:{port}/agent/ws") as ws,
        ):
            await ws.send_json({"type": "hello"})
            thread_id = (await frames_until(ws, "welcome"))[-1]["thread_id"]
            await ws.send_json({"type": "send", "text": "refund order 1042"})
            assert (await frames_until(ws, "run-finished"))[-1]["status"] == "awaiting-approval"
    kept = tmp_path / ".agora" / "secret"
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    first = kept.read_text()

    async with serving(cwd=tmp_path, store=None, env=env) as (_, port, _line):
        async with aiohttp.ClientSession(cookie_jar=jar) as session:
            parked = await get_json(session, f"http://127.0.0.1:{port}/agent/threads/{thread_id}")
            assert len(parked["pending_approvals"]) == 1, "the visitor still owns the parked thread"
    assert kept.read_text() == first, "the secret is made once, then read"


def test_a_kept_secret_file_that_holds_no_secret_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / ".agora").mkdir(mode=0o700)
    (tmp_path / ".agora" / "secret").write_text("short\n")
    env = serve_env(None, AGORA_SECRET=None)
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "serve", "--port", str(free_port())],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, done.stderr
    [line] = [text for text in done.stderr.splitlines() if "cannot start" in text]
    assert line == f"{REFUSED}{tmp_path / '.agora' / 'secret'} holds no secret (delete it to make a new one)"


def test_processes_starting_together_agree_on_one_kept_secret(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from gateway._store_url import kept_secret, parse_store_url

    location = parse_store_url("sqlite:///.agora/agora.db", cwd=tmp_path)
    with ThreadPoolExecutor(8) as pool:
        secrets = set(pool.map(lambda _: kept_secret(location), range(32)))
    assert len(secrets) == 1 and len(secrets.pop()) >= 32
    assert sorted(p.name for p in (tmp_path / ".agora").iterdir()) == ["secret"], "nothing left aside"
