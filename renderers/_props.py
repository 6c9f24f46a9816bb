"""The base of component props models, and the length guard every long list uses."""

from __future__ import annotations

from collections.abc import Callable, Sized
from typing import Any

from pydantic import BaseModel, BeforeValidator, ConfigDict
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

__all__ = ["ComponentProps", "at_most"]


class ComponentProps(BaseModel):
    """Base class for a component's props: camelCase or snake_case keys, unknown keys refused.

    Subclass it for your own components (any pydantic model works, this one only sets the
    conventions the built-ins follow). Error locations use the snake_case field names.

    Example:
        ```python
        class BadgeProps(ComponentProps):
            label: str = Field(max_length=80)
            tone_name: Literal["neutral", "good", "bad"] = "neutral"   # "toneName" works too
        ```
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        extra="forbid",
        frozen=True,
        loc_by_alias=False,
    )


def at_most(limit: int) -> BeforeValidator:
    """A validator that refuses a list longer than ``limit`` before its items are validated.

    pydantic checks ``max_length`` only after validating every item, so 100,000 rows would cost
    about 60 ms before being refused; this refuses them at once. Put it beside ``Field(max_length=...)``
    (which keeps the limit in the JSON schema)::

        rows: Annotated[list[Row], Field(max_length=500), at_most(500)]
    """

    def check(value: Any) -> Any:
        if isinstance(value, Sized) and not isinstance(value, str | bytes | dict) and len(value) > limit:
            raise PydanticCustomError(
                "too_long",
                "List should have at most {max_length} items, not {actual_length}",
                {"max_length": limit, "actual_length": len(value)},
            )
        return value

    validator: Callable[[Any], Any] = check
    return BeforeValidator(validator)
