"""JSON-RPC over HTTP for A2A: protocol 1.0 method names, and the 0.3 names when asked for.

The ``A2A-Version`` header picks the protocol; without it a call is 0.3 (as the SDK reads it).
1.0 methods take and return ProtoJSON of the SDK's protobuf types; 0.3 methods go through the
SDK's ``RequestHandler03`` and its 0.3 pydantic models (``kind`` fields, lowercase states).
A 1.0 name called as 0.3 (or the reverse) is refused with -32009, as the SDK does.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncGenerator, AsyncIterable
from dataclasses import dataclass
from typing import Any, TypeVar

from a2a.compat.v0_3 import types as v03
from a2a.compat.v0_3.request_handler import RequestHandler03
from a2a.server.context import ServerCallContext
from a2a.server.jsonrpc_models import InvalidRequestError as RpcInvalidRequest
from a2a.server.jsonrpc_models import JSONParseError, JSONRPCError, MethodNotFoundError
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    SendMessageResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
)
from a2a.utils.constants import PROTOCOL_VERSION_0_3
from a2a.utils.errors import A2AError, InternalError, InvalidParamsError, VersionNotSupportedError
from a2a.utils.proto_utils import to_stream_response
from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ValidationError

from gateway import GatewayError, parse_json

from ._handler import GatewayRequestHandler
from ._proto import ProtoParseError, from_json, to_json
from ._view import StreamEvent

__all__ = [
    "V03_METHODS",
    "V03_STREAMING_METHODS",
    "V10_METHODS",
    "JsonRpcCall",
    "JsonRpcDispatcher",
    "RefusedCall",
    "RpcResult",
    "read_call",
]

logger = logging.getLogger("channels.a2a")

_P = TypeVar("_P")

V10_METHODS = frozenset(
    {
        "SendMessage",
        "SendStreamingMessage",
        "GetTask",
        "ListTasks",
        "CancelTask",
        "SubscribeToTask",
        "GetExtendedAgentCard",
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    }
)
"""Protocol 1.0 methods (``A2A-Version: 1.0``); push notification ones answer -32003."""

_V03_MODELS: dict[str, type[BaseModel]] = {
    "message/send": v03.SendMessageRequest,
    "message/stream": v03.SendStreamingMessageRequest,
    "tasks/get": v03.GetTaskRequest,
    "tasks/cancel": v03.CancelTaskRequest,
    "tasks/resubscribe": v03.TaskResubscriptionRequest,
    "agent/getAuthenticatedExtendedCard": v03.GetAuthenticatedExtendedCardRequest,
    "tasks/pushNotificationConfig/set": v03.SetTaskPushNotificationConfigRequest,
    "tasks/pushNotificationConfig/get": v03.GetTaskPushNotificationConfigRequest,
    "tasks/pushNotificationConfig/list": v03.ListTaskPushNotificationConfigRequest,
    "tasks/pushNotificationConfig/delete": v03.DeleteTaskPushNotificationConfigRequest,
}
V03_METHODS = frozenset(_V03_MODELS)
"""Protocol 0.3 methods (no ``A2A-Version`` header, or ``0.3``)."""


@dataclass(frozen=True, kw_only=True)
class JsonRpcCall:
    """One JSON-RPC request whose envelope is valid."""

    id: str | int | None
    method: str
    params: Any
    body: dict[str, Any]
    legacy: bool
    """A 0.3 call: 0.3 shapes in and out."""


RpcResult = dict[str, Any] | AsyncGenerator[dict[str, Any], None]
"""A whole JSON-RPC response, or the responses of a stream."""


V03_STREAMING_METHODS = frozenset({"message/stream", "tasks/resubscribe"})
"""0.3 methods whose every answer is an event stream, a refusal included (one frame)."""


class RefusedCall(GatewayError):
    """A request refused before it reached a method: answer with ``error`` (in-band, HTTP 200)."""

    status, code = 400, "jsonrpc_refused"

    def __init__(
        self, error: A2AError | JSONRPCError, request_id: str | int | None = None, *, method: str | None = None
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.request_id = request_id
        """The request's ``id`` when it could be read (``None`` otherwise, as JSON-RPC says)."""
        self.method = method
        """The request's method when it could be read."""


def _is_version(actual: str, expected: str) -> bool:
    try:
        return Version(actual).major == Version(expected).major
    except InvalidVersion:
        return False


def read_call(raw: bytes, version: str | None) -> JsonRpcCall:
    """Parse and check a request body: JSON, the JSON-RPC 2.0 envelope, a known method.

    Raises:
        RefusedCall: With -32700, -32600, -32601 or -32009.
    """
    try:
        body = parse_json(raw)
    except ValueError as exc:
        raise RefusedCall(JSONParseError(message=str(exc))) from None
    if isinstance(body, list):
        raise RefusedCall(RpcInvalidRequest(message="Batch requests are not supported"))
    if not isinstance(body, dict):
        raise RefusedCall(RpcInvalidRequest(message="A request is a JSON object"))
    request_id = body.get("id")
    if isinstance(request_id, bool) or not isinstance(request_id, str | int | None):
        raise RefusedCall(RpcInvalidRequest(message="id must be a string, an integer or null"))
    if body.get("jsonrpc") != "2.0":
        raise RefusedCall(RpcInvalidRequest(message="'jsonrpc' must be exactly '2.0'"), request_id)
    method = body.get("method")
    if not isinstance(method, str) or not method:
        raise RefusedCall(RpcInvalidRequest(message="method must be a non-empty string"), request_id)
    legacy = method in V03_METHODS
    if not legacy and method not in V10_METHODS:
        raise RefusedCall(MethodNotFoundError(message=f"Method not found: {method[:80]}"), request_id)
    params = body.get("params", {})
    if not isinstance(params, dict):
        raise RefusedCall(InvalidParamsError(message="params must be an object"), request_id, method=method)
    actual = version or PROTOCOL_VERSION_0_3
    expected = PROTOCOL_VERSION_0_3 if legacy else "1.0"
    if not _is_version(actual, expected):
        raise RefusedCall(
            VersionNotSupportedError(
                message=f"A2A version '{actual[:20]}' is not supported by method {method}."
                f" Expected version '{expected}'."
            ),
            request_id,
            method=method,
        )
    return JsonRpcCall(id=request_id, method=method, params=params, body=body, legacy=legacy)


def _parse(params: Any, message: _P) -> _P:
    try:
        return from_json(params, message)
    except (ProtoParseError, TypeError, ValueError) as exc:
        raise InvalidParamsError(message="Invalid params", data={"parseError": str(exc)}) from None


def _result(call: JsonRpcCall, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call.id, "result": result}


def _list_tasks(response: ListTasksResponse, include_artifacts: bool) -> dict[str, Any]:
    # As the SDK: every field printed, artifacts left out unless asked for.
    result: dict[str, Any] = to_json(response, all_fields=True)
    if not include_artifacts:
        for task in result["tasks"]:
            task.pop("artifacts", None)
    return result


class JsonRpcDispatcher:
    """Runs checked calls against a ``GatewayRequestHandler`` (0.3 ones through ``RequestHandler03``)."""

    def __init__(self, handler: GatewayRequestHandler) -> None:
        self.handler = handler
        self.handler03 = RequestHandler03(request_handler=handler)

    async def dispatch(self, call: JsonRpcCall, context: ServerCallContext) -> RpcResult:
        """The response of one call: a JSON-RPC response, or a stream of them.

        Raises:
            A2AError: The call failed (the caller answers with ``error_body``).
        """
        if call.legacy:
            return await self._v03(call, context)
        return await self._v10(call, context)

    def _stream(self, call: JsonRpcCall, events: AsyncGenerator[StreamEvent, None]) -> AsyncGenerator[dict[str, Any]]:
        async def responses() -> AsyncGenerator[dict[str, Any]]:
            async with contextlib.aclosing(events):
                async for event in events:
                    yield _result(call, to_json(to_stream_response(event)))

        return responses()

    async def _v10(self, call: JsonRpcCall, context: ServerCallContext) -> RpcResult:
        handler, params = self.handler, call.params
        match call.method:
            case "SendMessage":
                reply = await handler.on_message_send(_parse(params, SendMessageRequest()), context)
                response = (
                    SendMessageResponse(task=reply) if isinstance(reply, Task) else SendMessageResponse(message=reply)
                )
                return _result(call, to_json(response))
            case "SendStreamingMessage":
                request = _parse(params, SendMessageRequest())
                return self._stream(call, handler.on_message_send_stream(request, context))
            case "SubscribeToTask":
                return self._stream(
                    call, handler.on_subscribe_to_task(_parse(params, SubscribeToTaskRequest()), context)
                )
            case "GetTask":
                task = await handler.on_get_task(_parse(params, GetTaskRequest()), context)
                return _result(call, to_json(task) if task is not None else None)
            case "CancelTask":
                task = await handler.on_cancel_task(_parse(params, CancelTaskRequest()), context)
                return _result(call, to_json(task) if task is not None else None)
            case "ListTasks":
                request = _parse(params, ListTasksRequest())
                listed = await handler.on_list_tasks(request, context)
                return _result(call, _list_tasks(listed, request.include_artifacts))
            case "GetExtendedAgentCard":
                card = await handler.on_get_extended_agent_card(_parse(params, GetExtendedAgentCardRequest()), context)
                return _result(call, to_json(card))
            case "CreateTaskPushNotificationConfig":
                await handler.on_create_task_push_notification_config(
                    _parse(params, TaskPushNotificationConfig()), context
                )
            case "GetTaskPushNotificationConfig":
                await handler.on_get_task_push_notification_config(
                    _parse(params, GetTaskPushNotificationConfigRequest()), context
                )
            case "ListTaskPushNotificationConfigs":
                await handler.on_list_task_push_notification_configs(
                    _parse(params, ListTaskPushNotificationConfigsRequest()), context
                )
            case "DeleteTaskPushNotificationConfig":
                await handler.on_delete_task_push_notification_config(
                    _parse(params, DeleteTaskPushNotificationConfigRequest()), context
                )
        raise InternalError(message=f"Method {call.method} has no handler")

    async def _v03(self, call: JsonRpcCall, context: ServerCallContext) -> RpcResult:
        request = _v03_request(call)
        handler = self.handler03
        match call.method:
            case "message/send":
                result = await handler.on_message_send(request, context)
                return _dump(v03.SendMessageSuccessResponse(id=call.id, result=result))
            case "message/stream":
                return _dumped(handler.on_message_send_stream(request, context))
            case "tasks/resubscribe":
                return _dumped(handler.on_subscribe_to_task(request, context))
            case "tasks/get":
                task = await handler.on_get_task(request, context)
                return _dump(v03.GetTaskSuccessResponse(id=call.id, result=task))
            case "tasks/cancel":
                task = await handler.on_cancel_task(request, context)
                return _dump(v03.CancelTaskSuccessResponse(id=call.id, result=task))
            case "agent/getAuthenticatedExtendedCard":
                card = await handler.on_get_extended_agent_card(request, context)
                return _dump(v03.GetAuthenticatedExtendedCardSuccessResponse(id=call.id, result=card))
        # The push notification methods: the handler refuses them (-32003).
        await self.handler.on_delete_task_push_notification_config(DeleteTaskPushNotificationConfigRequest(), context)
        raise InternalError(message=f"Method {call.method} has no handler")


def _v03_request(call: JsonRpcCall) -> Any:
    """The call as the SDK's 0.3 request model: -32602 for bad params, -32600 for the rest."""
    try:
        return _V03_MODELS[call.method].model_validate(call.body)
    except ValidationError as exc:
        errors = exc.errors()
        detail = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in errors[:5])
        if all(e["loc"][:1] == ("params",) for e in errors):
            raise InvalidParamsError(message=f"Invalid params: {detail}") from None
        error = RpcInvalidRequest(message=f"Invalid request: {detail}")
        raise RefusedCall(error, call.id, method=call.method) from None


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def _dumped(responses: AsyncIterable[BaseModel]) -> AsyncGenerator[dict[str, Any]]:
    async def frames() -> AsyncGenerator[dict[str, Any]]:
        try:
            async for response in responses:
                yield _dump(response)
        finally:
            # RequestHandler03's streams are async generators (typed as iterables).
            close = getattr(responses, "aclose", None)
            if close is not None:
                await close()

    return frames()
