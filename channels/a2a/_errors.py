"""Gateway errors as A2A errors, and A2A errors as JSON-RPC error objects.

A2A errors are the SDK's (``a2a.utils.errors``) with the SDK's JSON-RPC codes: -32001 task not
found, -32002 not cancelable, -32003 push notifications unsupported, -32004 unsupported
operation, -32009 version not supported, and the JSON-RPC ones (-32700 parse error, -32600
invalid request, -32601 method not found, -32602 invalid params, -32603 internal error).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from a2a.server.jsonrpc_models import JSONRPCError
from a2a.server.request_handlers import build_error_response
from a2a.utils.errors import (
    JSON_RPC_ERROR_CODE_MAP,
    A2AError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)

from gateway import (
    ApprovalExpiredError,
    ApprovalForbiddenError,
    ApprovalNotFoundError,
    ApprovalSettledError,
    PersonaNotFoundError,
    QueueFullError,
    RememberRefusedError,
    RunNotActiveError,
    RunNotFoundError,
    ThreadBusyError,
    ThreadForbiddenError,
    ThreadNotFoundError,
    UnknownAgentError,
)

__all__ = ["error_body", "map_gateway_errors"]


@contextlib.contextmanager
def map_gateway_errors() -> Iterator[None]:
    """Raise the A2A error that fits a gateway error; rate limits and outages pass through.

    Someone else's thread or run reads as not found: a caller learns nothing of other callers.
    """
    try:
        yield
    except (RunNotFoundError, ThreadNotFoundError) as exc:
        raise TaskNotFoundError() from exc
    except ThreadForbiddenError as exc:
        raise InvalidParamsError(message="This contextId cannot be used: start a new context") from exc
    except ThreadBusyError as exc:
        raise UnsupportedOperationError(
            message="A task is already working in this context: wait for it or cancel it"
        ) from exc
    except QueueFullError as exc:
        raise UnsupportedOperationError(message=f"{exc}: wait for the tasks ahead") from exc
    except RunNotActiveError as exc:
        raise TaskNotCancelableError() from exc
    except (
        ApprovalNotFoundError,
        ApprovalForbiddenError,
        ApprovalSettledError,
        ApprovalExpiredError,
        RememberRefusedError,
    ) as exc:
        raise InvalidParamsError(message=str(exc)) from exc
    except (UnknownAgentError, PersonaNotFoundError) as exc:
        raise InvalidParamsError(message=str(exc)) from exc


def error_body(request_id: str | int | None, error: A2AError | JSONRPCError, *, legacy: bool) -> dict[str, Any]:
    """The JSON-RPC response of an error.

    Protocol 1.0 carries the SDK's ``google.rpc.ErrorInfo`` details in ``data``; 0.3 callers get
    the error's own ``data``.
    """
    if not legacy or isinstance(error, JSONRPCError):
        return build_error_response(request_id, error)
    code = JSON_RPC_ERROR_CODE_MAP.get(type(error), -32603)
    body: dict[str, Any] = {"code": code, "message": error.message}
    if error.data is not None:
        body["data"] = error.data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}
