from renderers import MemoryRenderCache, Rendered
from renderers._cache import decode_rendered, encode_rendered


def test_rendered_encoding_round_trips_and_rejects_garbage() -> None:
    for value in (
        Rendered("<b>é</b>", "text/html"),
        Rendered(b"p1", "image/png", (b"p1", b"p2"), 2),
        Rendered(b"%PDF", "application/pdf", (b"%PDF",), 3),
    ):
        assert decode_rendered(encode_rendered(value)) == value
    blob = encode_rendered(Rendered(b"p1", "image/png", (b"p1",), 1))
    for garbage in (b"", b"nope", blob[:-1], blob + b"x", b"AGR1\x00\x00\x00\x02{}"):
        assert decode_rendered(garbage) is None


async def test_memory_cache_is_bounded_in_bytes_and_entries() -> None:
    cache = MemoryRenderCache(max_bytes=100, max_entries=3, max_item_bytes=60)
    for index in range(5):
        await cache.set(f"k{index}", Rendered(b"x" * 30, "image/png", (b"x" * 30,)))
    await cache.set("big", Rendered(b"x" * 61, "image/png", (b"x" * 61,)))
    assert len(cache) == 3 and cache.bytes == 90
    assert cache.peek("k0") is None and cache.peek("big") is None and cache.peek("k4") is not None


async def test_memory_cache_evicts_the_least_recently_used() -> None:
    cache = MemoryRenderCache(max_entries=2)
    await cache.set("a", Rendered("a", "text/plain"))
    await cache.set("b", Rendered("b", "text/plain"))
    assert await cache.get("a") is not None
    await cache.set("c", Rendered("c", "text/plain"))
    assert cache.peek("b") is None and cache.peek("a") is not None and cache.peek("c") is not None
