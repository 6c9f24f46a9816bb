"""A pydantic base for small value types that may also be built positionally."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict


class PositionalModel(BaseModel):
    """A strict pydantic model whose fields may also be passed by position, in declaration order.

    ``Actor("u1", ["member"])`` and ``Actor(id="u1", roles=["member"])`` build the same value.
    """

    model_config = ConfigDict(extra="forbid")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        if args:
            names = list(type(self).model_fields)
            if len(args) > len(names):
                raise TypeError(f"{type(self).__name__} takes at most {len(names)} positional arguments")
            for name, value in zip(names, args, strict=False):
                if name in kwargs:
                    raise TypeError(f"{type(self).__name__} got two values for {name!r}")
                kwargs[name] = value
        super().__init__(**kwargs)
