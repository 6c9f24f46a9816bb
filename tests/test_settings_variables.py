"""A settings model reads its documented variables, and no variable without the ``AGORA_`` prefix.

An alias of a pydantic-settings field is read from the environment as written, without the
model's prefix: an alias spelled like the field (``shared_key``) read a bare ``SHARED_KEY`` of
whatever else runs on the machine, and ``AGORA_TWILIO_FROM`` (the documented name) was not read.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

import pytest
from pydantic import AliasChoices, SecretStr
from pydantic_settings import BaseSettings

PACKAGES = ("tools", "renderers", "gateway", "channels")


def settings_models() -> list[type[BaseSettings]]:
    """Every pydantic-settings model of our packages, each channel's included."""
    import channels

    importlib.import_module("gateway")
    for info in pkgutil.iter_modules(channels.__path__):
        importlib.import_module(f"channels.{info.name}")
    found: list[type[BaseSettings]] = []
    todo = list(BaseSettings.__subclasses__())
    while todo:
        model = todo.pop()
        todo.extend(model.__subclasses__())
        if model.__module__.split(".")[0] in PACKAGES and model not in found:
            found.append(model)
    return sorted(found, key=lambda m: m.__name__)


ALIASED = [
    (model, name, choice)
    for model in settings_models()
    for name, field in model.model_fields.items()
    if isinstance(field.validation_alias, AliasChoices)
    for choice in field.validation_alias.choices
]


def plain(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, list):
        return ",".join(value)
    return value


def test_there_are_aliased_fields_to_check() -> None:
    assert {(model.__name__, name) for model, name, _ in ALIASED} >= {
        ("TwilioOptions", "from_"),
        ("TwilioOptions", "shared_key"),
        ("WebOptions", "allowed_origins"),
    }


@pytest.mark.parametrize(("model", "field", "alias"), ALIASED, ids=lambda v: getattr(v, "__name__", str(v)))
def test_an_alias_is_an_agora_variable_and_is_read(
    model: type[BaseSettings], field: str, alias: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert isinstance(alias, str) and alias.startswith("AGORA_"), f"{model.__name__}.{field}: alias {alias!r}"
    for name in (field, field.rstrip("_"), field.upper(), field.rstrip("_").upper()):
        monkeypatch.setenv(name, "from-a-bare-variable")  # someone else's SHARED_KEY, FROM...
    assert plain(getattr(model(_env_file=None), field)) in (None, "")  # type: ignore[call-arg]
    monkeypatch.setenv(alias, "whatsapp:+15550001")
    assert plain(getattr(model(_env_file=None), field)) == "whatsapp:+15550001"  # type: ignore[call-arg]


def test_a_field_is_still_set_by_its_name_in_code() -> None:
    from channels.web import WebOptions
    from channels.whatsapp import TwilioOptions

    options = TwilioOptions(_env_file=None, from_="whatsapp:+1555", shared_key="k")  # type: ignore[call-arg]
    assert (options.from_, plain(options.shared_key)) == ("whatsapp:+1555", "k")
    web = WebOptions(_env_file=None, allowed_origins="https://app.example")  # type: ignore[call-arg]
    assert web.allowed_origins == ["https://app.example"]
