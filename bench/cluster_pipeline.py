"""The store's per-node batchers beside redis-py's cluster pipeline, on a private 3-master cluster.

    python bench/cluster_pipeline.py

Sends one turn-like group (a SET on each of the three masters) 3,000 times, at 1 and at 50
concurrent callers, through ``ClusterBatcher.send`` and through ``RedisCluster.pipeline()``, twice
each, side by side: sends per second and this process's CPU per send. Why the store batches per
node instead of using the cluster pipeline (``gateway/stores/_redis_cluster_batch.py``). The
cluster is started on free ports and killed by pid at the end. Figures, not a test.
"""

from __future__ import annotations

import asyncio
import functools
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gateway.stores._redis_client import connect, node_client  # noqa: E402
from gateway.stores._redis_cluster_batch import ClusterBatcher  # noqa: E402
from tests.stores._cluster import ClusterServers  # noqa: E402


async def main() -> None:
    with tempfile.TemporaryDirectory() as d:
        c = ClusterServers(Path(d))
        await c.start()
        try:
            threads = list((await c.threads_on_every_node()).values())
            keys = [f"p:{{{t}}}:k" for t in threads]
            client, _ = connect(c.url, max_connections=64, options={})
            b = ClusterBatcher(client, node_client=functools.partial(node_client, client, max_connections=64))
            await client.initialize()

            async def ours() -> None:
                await b.send([("SET", k, "v") for k in keys])

            async def theirs() -> None:
                pipe = client.pipeline(transaction=False)
                for k in keys:
                    pipe.set(k, "v")
                await pipe.execute()

            for name, fn in (("batcher", ours), ("cluster pipeline", theirs)) * 2:
                for conc in (1, 50):
                    n = 3000
                    t0 = time.perf_counter()
                    c0 = time.process_time()

                    async def worker(m: int, fn: Any = fn) -> None:
                        for _ in range(m):
                            await fn()

                    await asyncio.gather(*(worker(n // conc) for _ in range(conc)))
                    el = time.perf_counter() - t0
                    cpu = time.process_time() - c0
                    print(
                        f"{name:18} concurrency {conc:>3}: {n / el:8.0f} sends/s, {cpu / n * 1e6:6.0f} µs CPU per send"
                    )
            await b.aclose()
            await client.aclose()
        finally:
            c.stop()


if __name__ == "__main__":
    asyncio.run(main())
