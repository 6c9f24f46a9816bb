import base64
import re

import pytest
from redis.asyncio import Redis

from renderers import MediaItem, MediaStore, MediaTokenError, MemoryMediaBackend, RedisMediaBackend
from tools import UserError

pytestmark = pytest.mark.asyncio(loop_scope="session")  # the Redis fixtures live on the session loop

SECRET = "a-gateway-secret-of-some-length"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4


class Clock:
    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


async def test_put_then_get() -> None:
    store = MediaStore(SECRET)
    token = await store.put(PNG, "image/png", filename="Revenue chart.png")
    assert re.fullmatch(r"[A-Za-z0-9_-]{76}", token)
    assert await store.get(token) == MediaItem(PNG, "image/png", "Revenue chart.png")


async def test_tokens_differ_per_put() -> None:
    store = MediaStore(SECRET)
    assert await store.put(PNG, "image/png") != await store.put(PNG, "image/png")


def flip(token: str, index: int) -> str:
    raw = bytearray(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
    raw[index] ^= 0x01
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


@pytest.mark.parametrize("index", [0, 5, 12, 30, 56], ids=["version", "expiry", "id", "mac", "mac-end"])
async def test_tampered_tokens_are_invalid(index: int) -> None:
    store = MediaStore(SECRET)
    token = await store.put(PNG, "image/png")
    with pytest.raises(MediaTokenError) as raised:
        await store.get(flip(token, index))
    assert raised.value.reason == "invalid"


@pytest.mark.parametrize("token", ["", "abc", "-" * 76, "A" * 75 + "!", "A" * 200, None, 42])
async def test_malformed_tokens_are_invalid(token: object) -> None:
    with pytest.raises(MediaTokenError) as raised:
        await MediaStore(SECRET).get(token)  # type: ignore[arg-type]
    assert raised.value.reason == "invalid"


async def test_another_secret_cannot_read_the_token() -> None:
    backend = MemoryMediaBackend()
    token = await MediaStore(SECRET, backend=backend).put(PNG, "image/png")
    with pytest.raises(MediaTokenError) as raised:
        await MediaStore("another-secret-of-some-length", backend=backend).get(token)
    assert raised.value.reason == "invalid"


async def test_tokens_expire() -> None:
    clock = Clock()
    store = MediaStore(SECRET, ttl=60, clock=clock)
    token = await store.put(PNG, "image/png")
    clock.now += 60
    assert (await store.get(token)).data == PNG
    clock.now += 2
    with pytest.raises(MediaTokenError) as raised:
        await store.get(token)
    assert raised.value.reason == "expired" and str(raised.value) == "The media link has expired."
    short = await store.put(PNG, "image/png", ttl=5)
    _, expires_at = store.verify(short)
    assert expires_at - clock.now <= 6


async def test_a_valid_token_without_bytes_is_not_found() -> None:
    token = await MediaStore(SECRET).put(PNG, "image/png")
    with pytest.raises(MediaTokenError) as raised:
        await MediaStore(SECRET).get(token)  # same secret, another process's memory
    assert raised.value.reason == "not_found"


async def test_memory_backend_is_bounded() -> None:
    store = MediaStore(SECRET, backend=MemoryMediaBackend(max_bytes=2_500))
    tokens = [await store.put(bytes([i]) * 1_000, "application/pdf") for i in range(3)]
    with pytest.raises(MediaTokenError):
        await store.get(tokens[0])
    assert (await store.get(tokens[2])).data == bytes([2]) * 1_000
    with pytest.raises(UserError, match="larger than the store"):
        await store.put(b"x" * 3_000, "application/pdf")


async def test_misuse_is_refused() -> None:
    with pytest.raises(UserError, match="at least 16 bytes"):
        MediaStore("short")
    with pytest.raises(UserError, match="ttl"):
        MediaStore(SECRET, ttl=0)
    store = MediaStore(SECRET)
    with pytest.raises(UserError, match="Not a MIME type"):
        await store.put(PNG, "image png")
    with pytest.raises(UserError, match="takes bytes"):
        await store.put("text", "text/plain")  # type: ignore[arg-type]


async def test_file_names_are_made_safe() -> None:
    store = MediaStore(SECRET)
    token = await store.put(PNG, "IMAGE/PNG", filename='../../etc/pa"ss\r\nwd.png')
    item = await store.get(token)
    assert item.mime == "image/png"
    assert item.filename == "etc_pa_ss_wd.png"


@pytest.mark.redis
async def test_redis_backend_serves_media_to_another_process(redis_client: Redis, redis_prefix: str) -> None:
    writer = MediaStore(SECRET, ttl=120, backend=RedisMediaBackend(redis_client, prefix=redis_prefix))
    token = await writer.put(PNG, "image/png", filename="chart.png")
    other_client = Redis(host="127.0.0.1", port=6379)
    try:
        reader = MediaStore(SECRET, backend=RedisMediaBackend(other_client, prefix=redis_prefix))
        assert await reader.get(token) == MediaItem(PNG, "image/png", "chart.png")
        keys = [key async for key in other_client.scan_iter(match=redis_prefix + "*", count=1000)]
        assert len(keys) == 1
        ttl = await other_client.pttl(keys[0])
        assert 110_000 < ttl <= 122_000  # the bytes expire with the token
        await other_client.delete(keys[0])
        with pytest.raises(MediaTokenError) as raised:
            await reader.get(token)
        assert raised.value.reason == "not_found"
    finally:
        await other_client.aclose()


@pytest.mark.redis
async def test_redis_backend_needs_bytes_responses() -> None:
    with pytest.raises(UserError, match="decode_responses=False"):
        RedisMediaBackend(Redis(decode_responses=True))


async def _forgets_a_threads_media_only(store: MediaStore) -> None:
    mine = [await store.put(PNG, "image/png", thread_id="t-1") for _ in range(2)]
    mine.append(await store.put(PNG, "application/pdf", thread_id="t-1", ttl=7200))
    theirs = await store.put(PNG, "image/png", thread_id="t-2")
    loose = await store.put(PNG, "image/png")
    assert await store.forget_thread("t-1") == 3
    for token in mine:
        with pytest.raises(MediaTokenError) as raised:
            await store.get(token)
        assert raised.value.reason == "not_found"
    assert (await store.get(theirs)).data == PNG
    assert (await store.get(loose)).data == PNG
    assert await store.forget_thread("t-1") == 0
    assert await store.forget_thread("never") == 0


async def test_a_threads_media_are_forgotten_with_it_in_memory() -> None:
    backend = MemoryMediaBackend(max_bytes=20 * len(PNG))
    store = MediaStore(SECRET, backend=backend)
    await _forgets_a_threads_media_only(store)
    # Items evicted for space leave the thread's index too: nothing of an evicted item is kept.
    for _ in range(40):
        await store.put(PNG, "image/png", thread_id="t-3")
    assert len(backend._threads["t-3"]) == 20
    assert await store.forget_thread("t-3") == 20
    assert "t-3" not in backend._threads


@pytest.mark.redis
async def test_a_threads_media_are_forgotten_with_it_on_redis(redis_client: Redis, redis_prefix: str) -> None:
    store = MediaStore(SECRET, ttl=120, backend=RedisMediaBackend(redis_client, prefix=redis_prefix))
    await store.put(PNG, "image/png", thread_id="t-long", ttl=7200)
    await store.put(PNG, "image/png", thread_id="t-long", ttl=60)  # a shorter item does not shorten the set
    ttl = await redis_client.pttl(f"{redis_prefix}{{t-long}}")
    assert 7_100_000 < ttl <= 7_202_000
    await _forgets_a_threads_media_only(store)
    keys = {key.decode() async for key in redis_client.scan_iter(match=redis_prefix + "*", count=1000)}
    assert not [key for key in keys if key.startswith(f"{redis_prefix}{{t-1}}")]
    # t-2: a pointer, an item and its set; the loose item; t-long: two pointers, two items and its set
    # (t-1's pointers went with its items).
    assert len(keys) == 9


@pytest.mark.redis
async def test_forget_thread_also_erases_the_earlier_layout_on_one_server(
    redis_client: Redis, redis_prefix: str
) -> None:
    # What the backend kept before a thread's items moved under its hash tag: item hashes by media
    # id, listed in ``<prefix>thread:<thread id>``.
    await redis_client.hset(f"{redis_prefix}old1", mapping={"data": PNG, "mime": "image/png"})
    await redis_client.sadd(f"{redis_prefix}thread:t-old", "old1")
    backend = RedisMediaBackend(redis_client, prefix=redis_prefix)
    await backend.put("new1", MediaItem(PNG, "image/png"), 2e9, thread_id="t-old")
    assert await backend.get("old1") == MediaItem(PNG, "image/png")
    assert await backend.forget_thread("t-old") == 2
    assert await backend.get("old1") is None and await backend.get("new1") is None
    assert [key async for key in redis_client.scan_iter(match=redis_prefix + "*")] == []
