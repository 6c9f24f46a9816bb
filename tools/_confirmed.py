"""``define_confirmed_tool``: a write that previews first and commits with a signed, single-use token."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, Field, create_model

from ._confirm_store import ConfirmTokenStore, InMemoryConfirmTokenStore
from ._context import ToolContext
from ._errors import ConfirmTokenError, ToolDefinitionError, UserError
from ._tool import Tool, _check_presentation, call_hook, define_tool

__all__ = ["DEFAULT_CONFIRM_TTL", "define_confirmed_tool", "sign_confirm_token", "verify_confirm_token"]

DEFAULT_CONFIRM_TTL = 900
"""Seconds a preview's token stays valid."""

_PREFIX = "ct1"
_RESERVED = ("confirm", "confirm_token")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def canonical_json(value: Any) -> str:
    """JSON with sorted keys and no spaces: the same arguments always give the same text."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def _signature(secret: bytes, tool: str, actor_id: str, tenant: str | None, expires: int, nonce: str, args: str) -> str:
    # A JSON array, not a separator-joined string: an actor id or tenant holding the separator
    # could otherwise shift fields into each other, and a None tenant would equal "".
    message = canonical_json([_PREFIX, tool, actor_id, tenant, expires, nonce, args]).encode("utf-8")
    return _b64(hmac.new(secret, message, hashlib.sha256).digest())


def _key(secret: object, where: str) -> bytes:
    # An empty key still "signs": anyone could then mint tokens.
    if not isinstance(secret, str | bytes) or not secret:
        raise UserError(f"{where}: secret must be a non-empty str or bytes")
    return secret.encode("utf-8") if isinstance(secret, str) else secret


def sign_confirm_token(
    secret: str | bytes, *, tool: str, actor_id: str, tenant: str | None, args: Any, expires_at: int
) -> str:
    """A token binding ``tool``, actor, tenant, expiry and the canonical ``args`` (HMAC-SHA256).

    Raises:
        UserError: An empty or non-str/bytes ``secret``, or an ``expires_at`` that is not a
            non-negative int (UNIX seconds); such a token could never verify.
    """
    key = _key(secret, "sign_confirm_token()")
    if isinstance(expires_at, bool) or not isinstance(expires_at, int) or expires_at < 0:
        raise UserError(f"sign_confirm_token(): expires_at must be a non-negative int, not {expires_at!r}")
    nonce = _b64(secrets.token_bytes(9))
    sig = _signature(key, tool, actor_id, tenant, expires_at, nonce, canonical_json(args))
    return f"{_PREFIX}.{expires_at}.{nonce}.{sig}"


def verify_confirm_token(
    token: object,
    secret: str | bytes,
    *,
    tool: str,
    actor_id: str,
    tenant: str | None,
    args: Any,
    now: float | None = None,
) -> int:
    """Check a token and return its expiry (UNIX seconds).

    Raises:
        ConfirmTokenError: ``"invalid"`` when malformed or bound to anything else; ``"expired"``
            when genuine but past its expiry.
        UserError: An empty or non-str/bytes ``secret``.
    """
    key = _key(secret, "verify_confirm_token()")
    # Non-ASCII text is refused up front: str.isdigit() accepts "²" (which int() rejects) and
    # hmac.compare_digest() raises TypeError on non-ASCII str.
    if not isinstance(token, str) or len(token) > 512 or not token.isascii():
        raise ConfirmTokenError("invalid", tool=tool)
    parts = token.split(".")
    if len(parts) != 4 or parts[0] != _PREFIX or not parts[1].isdigit():
        raise ConfirmTokenError("invalid", tool=tool)
    expires, nonce, sig = int(parts[1]), parts[2], parts[3]
    expected = _signature(key, tool, actor_id, tenant, expires, nonce, canonical_json(args))
    if not hmac.compare_digest(expected, sig):
        raise ConfirmTokenError("invalid", tool=tool)
    if (time.time() if now is None else now) >= expires:
        raise ConfirmTokenError("expired", tool=tool)
    return expires


def _summary(value: Any, step: str, tool: str) -> tuple[str, Any]:
    if isinstance(value, str):
        return value, None
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json")
    if isinstance(value, dict) and isinstance(value.get("summary"), str):
        return value["summary"], value.get("data")
    raise ToolDefinitionError(f"confirmed tool {tool!r}: {step}() must return a str or {{summary, data?}}")


def define_confirmed_tool(
    name: str,
    description: str,
    input: type[BaseModel],
    secret: str | bytes | Callable[[], str | bytes],
    prepare: Callable[..., Any],
    preview: Callable[..., Any],
    commit: Callable[..., Any],
    store: ConfirmTokenStore | None = None,
    ttl: int = DEFAULT_CONFIRM_TTL,
    **options: Any,
) -> Tool:
    """A ``read`` tool whose human gate lives inside it: preview first, then commit with a token.

    The first call runs ``prepare(input, ctx)`` and ``preview(prepared)`` and answers
    ``{status: "preview", summary, data, confirm_token, expires_at}``. The same arguments with
    ``confirm=True`` and the token verify the token (before ``prepare`` runs), run ``prepare``
    again, claim the token (single use) and ``commit(prepared)``; a failed commit releases it.
    ``preview`` and ``commit`` return a str or ``{summary, data?}``.

    Args:
        name: Tool name.
        description: What the model reads.
        input: The pydantic input; it gains ``confirm: bool`` and ``confirm_token: str | None``.
        secret: HMAC key (or a callable returning it, read at each call).
        prepare: ``prepare(input, ctx)`` loads and checks what the commit needs; may raise to refuse.
        preview: ``preview(prepared)`` describes the change without making it.
        commit: ``commit(prepared)`` makes the change.
        store: Claim-once token storage; else the run's store (``ctx.confirm_tokens``); else an
            in-memory store of this tool.
        ttl: Seconds a token stays valid.
        **options: Other tool options (``roles``, ``presentation``, ``timeout``...). ``kind`` is
            always ``"read"``. ``commit_presentation`` words the commit call (``running``
            "Cancelling your plan", ``done`` "Plan cancelled") where ``presentation`` words the
            preview; without it both read the same.

    Raises:
        ToolDefinitionError: A wrong argument (no secret, non-pydantic input, reserved fields...).
    """
    where = f"define_confirmed_tool({name!r})"
    if not (isinstance(input, type) and issubclass(input, BaseModel)):
        raise ToolDefinitionError(f"{where}: input must be a pydantic BaseModel subclass")
    clash = [f for f in _RESERVED if f in input.model_fields]
    if clash:
        raise ToolDefinitionError(f"{where}: input may not declare {', '.join(clash)} (they are added)")
    if not secret or not (isinstance(secret, str | bytes) or callable(secret)):
        raise ToolDefinitionError(f"{where}: secret must be a non-empty str/bytes or a callable")
    for label, fn in (("prepare", prepare), ("preview", preview), ("commit", commit)):
        if not callable(fn):
            raise ToolDefinitionError(f"{where}: {label} must be callable")
    if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl <= 0:
        raise ToolDefinitionError(f"{where}: ttl must be a positive number of seconds")
    if "kind" in options and options["kind"] != "read":
        raise ToolDefinitionError(f"{where}: a confirmed tool is always kind 'read'")
    options.pop("kind", None)
    if store is not None and not isinstance(store, ConfirmTokenStore):
        raise ToolDefinitionError(f"{where}: store must implement ConfirmTokenStore")
    fallback_store = InMemoryConfirmTokenStore()

    confirmed_input: type[BaseModel] = create_model(
        f"{input.__name__}WithConfirm",
        __base__=input,
        confirm=(bool, Field(default=False, description="True to commit a previewed change.")),
        confirm_token=(
            str | None,
            Field(default=None, max_length=512, description="The confirm_token of the preview being committed."),
        ),
    )

    def key() -> str | bytes:
        value = secret() if callable(secret) else secret
        if not value:
            raise ToolDefinitionError(f"{where}: secret() returned an empty value")
        return value

    async def execute(args: BaseModel, ctx: ToolContext) -> dict[str, Any]:
        # ``args`` was validated by a subclass of ``input`` (same validators): copy its fields over
        # instead of validating a dump again, which breaks on aliased fields (dumps use names).
        plain = input.model_construct(
            args.model_fields_set - set(_RESERVED),
            **{field: getattr(args, field) for field in input.model_fields},
            **(args.model_extra or {}),
        )
        canonical = plain.model_dump(mode="json")
        actor_id, tenant = ctx.actor.id, ctx.actor.tenant_ref
        if not getattr(args, "confirm", False):
            prepared = await call_hook(prepare, plain, ctx)
            summary, data = _summary(await call_hook(preview, prepared), "preview", name)
            expires = int(time.time()) + ttl
            token = sign_confirm_token(
                key(), tool=name, actor_id=actor_id, tenant=tenant, args=canonical, expires_at=expires
            )
            return {
                "status": "preview",
                "summary": summary,
                "data": data,
                "confirm_token": token,
                "expires_at": datetime.fromtimestamp(expires, UTC).isoformat(),
            }
        supplied: object = getattr(args, "confirm_token", None)
        expires = verify_confirm_token(supplied, key(), tool=name, actor_id=actor_id, tenant=tenant, args=canonical)
        prepared = await call_hook(prepare, plain, ctx)
        # "is not None", not "or": a store that defines __len__ is falsy while empty.
        claims = store if store is not None else ctx.confirm_tokens
        claims = claims if claims is not None else fallback_store
        token_hash = hashlib.sha256(str(supplied).encode("utf-8")).hexdigest()
        if not await claims.claim_confirm_token(token_hash, float(expires)):
            raise ConfirmTokenError("used", tool=name)
        try:
            committed = await call_hook(commit, prepared)
        except BaseException:
            await claims.release_confirm_token(token_hash)
            raise
        # Outside the try: once commit returned, the change is made and the token stays spent,
        # even when its answer is malformed.
        summary, data = _summary(committed, "commit", name)
        return {"status": "done", "summary": summary, "data": data}

    commit_presentation = _check_presentation(options.pop("commit_presentation", None), where)
    tool: Tool = define_tool(name=name, description=description, input=confirmed_input, execute=execute, **options)
    return dataclasses.replace(tool, commit_presentation=commit_presentation) if commit_presentation else tool
