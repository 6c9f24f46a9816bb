"""Turns per second on a 3-master Redis Cluster beside one Redis node, in one run; and each node's share.

    python bench/cluster.py [--turns 2000] [--concurrency 50] [--masters 3] [--actors 100] [--rounds 3]
                            [--single-only]

Starts its own servers on free ports (never the shared 6379): one plain ``redis-server`` and
``--masters`` nodes with ``--cluster-enabled yes`` (joined by ``redis-cli --cluster create
--cluster-yes``, ``cluster-require-full-coverage no``), all alike: no persistence, so the disk is
not what is measured. Runs ``bench/loop.py``'s tool+text turn (``run_case``) at 1 and
``--concurrency`` threads on a ``RedisStore`` of each, in ``--rounds`` rounds where the two take
turns (the median of each), side by side with the ratio
cluster / single (target: >= 80%, the nodes sharing this machine's cores); then, per node, the
keys under the run's prefix (SCAN) and the commands it processed during the run
(``total_commands_processed``, before and after), with its share: a node above half is flagged.
The turns' actors are ``--actors`` (default 100) taken in turn: an actor's usage ledger is
one hash slot (``{usage:<actor>}``), so with ``--actors 1`` its node takes every turn's usage
writes. Every server is killed by its pid at the end. Figures, not a test.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import redis.asyncio as redis  # noqa: E402

from bench.loop import run_case, set_gc  # noqa: E402

TARGET = 0.80
"""Cluster turns/s as a share of one node's (issue 18)."""
MAX_SHARE = 0.50
"""No node takes more than this share of the keys or of the commands."""


def _free_port(*, bus: bool) -> int:
    """A free port (with ``bus``: one whose cluster bus port, +10000, is free too)."""
    for _ in range(1000):
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        if not bus:
            return port
        if port + 10000 > 65535:
            continue
        try:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port")


@dataclass(kw_only=True)
class Servers:
    """Private redis-servers in ``folder``, started and killed by pid."""

    folder: Path
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    async def start(self, *, cluster: bool) -> int:
        port = _free_port(bus=cluster)
        directory = self.folder / str(port)
        directory.mkdir()
        extra = ["--cluster-enabled", "yes", "--cluster-config-file", str(directory / "nodes.conf")] if cluster else []
        extra += ["--cluster-require-full-coverage", "no"] if cluster else []
        executable = shutil.which("redis-server")
        if executable is None:
            raise SystemExit("redis-server is not installed")
        self.processes.append(
            subprocess.Popen(
                [
                    executable,
                    "--port",
                    str(port),
                    "--bind",
                    "127.0.0.1",
                    "--save",
                    "",
                    "--appendonly",
                    "no",
                    "--dir",
                    str(directory),
                    *extra,
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )  # fmt: skip
        )
        client = redis.Redis(port=port, socket_connect_timeout=0.2)
        try:
            async with asyncio.timeout(10):
                while True:
                    try:
                        await client.ping()
                        return port
                    except redis.ConnectionError:
                        await asyncio.sleep(0.02)
        finally:
            await client.aclose()

    async def cluster(self, masters: int) -> list[int]:
        ports = [await self.start(cluster=True) for _ in range(masters)]
        cli = shutil.which("redis-cli")
        if cli is None:
            raise SystemExit("redis-cli is not installed")
        process = await asyncio.create_subprocess_exec(
            cli, "--cluster", "create", *[f"127.0.0.1:{port}" for port in ports], "--cluster-yes",
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        )  # fmt: skip
        output, _ = await asyncio.wait_for(process.communicate(), 60)
        if process.returncode != 0:
            raise RuntimeError(f"redis-cli --cluster create failed: {output.decode(errors='replace')}")
        async with asyncio.timeout(30):
            for port in ports:
                client = redis.Redis(port=port, decode_responses=True)
                try:
                    while (await client.execute_command("CLUSTER INFO")).get("cluster_state") != "ok":
                        await asyncio.sleep(0.05)
                finally:
                    await client.aclose()
        return ports

    def stop(self) -> None:
        for process in self.processes:
            process.kill()
            process.wait()


async def commands(port: int) -> int:
    client = redis.Redis(port=port)
    try:
        return int((await client.info("stats"))["total_commands_processed"])
    finally:
        await client.aclose()


async def keys(port: int, prefix: str) -> int:
    client = redis.Redis(port=port)
    try:
        return len([key async for key in client.scan_iter(match=f"{prefix}:*", count=1000)])
    finally:
        await client.aclose()


@dataclass(kw_only=True)
class Target:
    """One store under test: its URL, its nodes, and what it measured."""

    url: str
    ports: list[int]
    prefix: str = field(default_factory=lambda: f"bench_{uuid.uuid4().hex[:8]}")
    rates: dict[int, list[float]] = field(default_factory=dict)
    """Turns/s by concurrency, one per round."""
    keys: dict[int, int] = field(default_factory=dict)
    commands: dict[int, int] = field(default_factory=dict)
    error: str | None = None

    def rate(self, clients: int) -> float | None:
        """The median of the rounds at ``clients``."""
        rates = self.rates.get(clients)
        return statistics.median(rates) if rates else None

    async def run(self, *, turns: int, clients: int, actors: int) -> None:
        """One round at ``clients`` on a fresh ``RedisStore`` (same prefix); a failure is kept, not raised."""
        from gateway.stores import RedisStore

        if self.error:
            return
        store: Any = None
        try:
            store = RedisStore(self.url, prefix=self.prefix)
            rate, _, _ = await run_case(store, with_ui=False, turns=turns, concurrency=clients, actors=actors)
            self.rates.setdefault(clients, []).append(rate)
        except Exception as exc:  # a figure missing, with why: the run goes on
            self.error = f"{type(exc).__name__}: {str(exc)[:200]}"
        finally:
            if store is not None:
                await store.aclose()


async def measure(targets: list[Target], *, turns: int, levels: list[int], actors: int, rounds: int) -> None:
    """Rounds of every level, the targets taking turns (a drifting load falls on both); then each node's figures."""
    before = {port: await commands(port) for target in targets for port in target.ports}
    for round_ in range(rounds):
        for clients in levels:
            for target in targets if round_ % 2 == 0 else targets[::-1]:
                await target.run(turns=turns, clients=clients, actors=actors)
    for target in targets:
        # Less the INFO of ``before``; the SCANs come after.
        target.commands = {port: await commands(port) - before[port] - 1 for port in target.ports}
        target.keys = {port: await keys(port, target.prefix) for port in target.ports}


def print_nodes(name: str, result: Target) -> list[str]:
    """One line per node: keys and commands with their shares; answer what went above ``MAX_SHARE``."""
    flagged = []
    total_keys, total_commands = sum(result.keys.values()) or 1, sum(result.commands.values()) or 1
    for port in result.keys:
        key_share, command_share = result.keys[port] / total_keys, result.commands[port] / total_commands
        over = [what for what, share in (("keys", key_share), ("commands", command_share)) if share > MAX_SHARE]
        mark = f"  ABOVE {MAX_SHARE:.0%}: {', '.join(over)}" if over and len(result.keys) > 1 else ""
        if mark:
            flagged.append(f"{name} node {port}: {', '.join(over)}")
        print(
            f"{name:<8} {port:>6} {result.keys[port]:>9,} ({key_share:>4.0%}) {result.commands[port]:>12,}"
            f" ({command_share:>4.0%}){mark}"
        )
    return flagged


async def main(args: argparse.Namespace) -> None:
    levels = [1, args.concurrency]
    folder = Path(tempfile.mkdtemp(prefix="agora-bench-cluster-"))
    servers = Servers(folder=folder)
    set_gc("tuned")
    try:
        single_port = await servers.start(cluster=False)
        results = {"single": Target(url=f"redis://127.0.0.1:{single_port}/0", ports=[single_port])}
        if not args.single_only:
            ports = await servers.cluster(args.masters)
            url = "redis+cluster://" + ",".join(f"127.0.0.1:{port}" for port in ports)
            results["cluster"] = Target(url=url, ports=ports)
        options = {"turns": args.turns, "levels": levels, "actors": args.actors, "rounds": args.rounds}
        await measure(list(results.values()), **options)
    finally:
        set_gc("default")
        servers.stop()
        shutil.rmtree(folder, ignore_errors=True)
    print(
        f"tool+text turns, {args.turns} per level and round, median of {args.rounds} rounds,"
        f" {args.actors} actor(s) in turn; cluster: {args.masters} masters on this machine"
    )
    print(f"{'clients':>7} {'single turns/s':>15} {'cluster turns/s':>16} {'cluster/single':>15}")
    single, cluster = results["single"], results.get("cluster")
    for clients in levels:
        one, many = single.rate(clients), cluster.rate(clients) if cluster else None
        ratio = f"{many / one:>14.0%}" + (" " if many / one >= TARGET else "!") if one and many else f"{'-':>15}"
        cells = [f"{rate:>{width},.0f}" if rate else f"{'-':>{width}}" for rate, width in ((one, 15), (many, 16))]
        print(f"{clients:>7} {cells[0]} {cells[1]} {ratio}")
    print(f"(target: cluster >= {TARGET:.0%} of one node; '!' marks a miss)")
    for name, result in results.items():
        if result.error:
            print(f"{name}: stopped: {result.error}")
    print()
    print(f"{'store':<8} {'node':>6} {'keys':>9} {'':>6} {'commands':>12}")
    flagged = [line for name, result in results.items() for line in print_nodes(name, result)]
    print(f"nodes above {MAX_SHARE:.0%}: " + ("; ".join(flagged) if flagged else "none"))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=50)
    parser.add_argument("--masters", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per level, the stores alternating (median)")
    parser.add_argument(
        "--actors", type=int, default=100, help="actors the turns take in turn (an actor's usage ledger is one slot)"
    )
    parser.add_argument("--single-only", action="store_true", help="only the single node (a dry run of the harness)")
    args = parser.parse_args()
    if args.turns < 1 or args.concurrency < 2 or args.masters < 3 or args.actors < 1 or args.rounds < 1:
        parser.error("--turns >= 1, --concurrency >= 2, --masters >= 3 (a Redis Cluster needs three masters)")
    return args


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
