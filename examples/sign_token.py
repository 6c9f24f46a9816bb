"""Sign an actor token for a user your app already knows (run on your server, never in a browser).

AGORA_SECRET=... python examples/sign_token.py user-42 member,admin acme
"""

from __future__ import annotations

import os
import sys

from gateway import sign_actor_token
from tools import Actor


def main() -> None:
    user_id = sys.argv[1] if len(sys.argv) > 1 else "user-42"
    roles = sys.argv[2].split(",") if len(sys.argv) > 2 else ["member"]
    tenant = sys.argv[3] if len(sys.argv) > 3 else None
    secret = os.environ.get("AGORA_SECRET")
    if not secret:
        raise SystemExit("Set AGORA_SECRET to the gateway's secret first (the token is signed with it).")
    print(sign_actor_token(Actor(id=user_id, roles=roles, tenant_ref=tenant), secret, ttl=3600))


if __name__ == "__main__":
    main()
