import gateway.stores


def _isort_key(name: str) -> tuple[int, str]:
    # The order ruff's RUF022 keeps: CONSTANTS, then Classes, then functions.
    if name.isupper():
        return 0, name
    return (1 if name[0].isupper() else 2), name


def test_all_is_sorted_and_names_every_public_name() -> None:
    public = {name for name in vars(gateway.stores) if not name.startswith("_")} - {"annotations"}
    assert gateway.stores.__all__ == sorted(gateway.stores.__all__, key=_isort_key)
    assert set(gateway.stores.__all__) == public
    assert "RedisStore" in gateway.stores.__all__
