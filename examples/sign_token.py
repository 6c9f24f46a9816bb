"""Sign an actor token for a user your app already knows (run on your server, never in a browser).

AGORA_SECRET=... python examples/sign_token.py user-42 member,admin acme --ttl 3600
"""

from __future__ import annotations

import argparse
import os

from pydantic import ValidationError

from gateway import sign_actor_token
from tools import Actor, UserError


def main() -> None:
    parser = argparse.ArgumentParser(description="Print a signed actor token (AGORA_SECRET signs it).")
    parser.add_argument("user_id", nargs="?", default="user-42", help="the user's id (default user-42)")
    parser.add_argument("roles", nargs="?", default="member", help="comma-separated roles (default member)")
    parser.add_argument("tenant", nargs="?", default=None, help="the user's tenant (default none)")
    parser.add_argument("--ttl", type=int, default=3600, help="seconds the token is valid (default 3600)")
    args = parser.parse_args()
    if args.ttl <= 0:
        parser.error("--ttl must be a positive number of seconds")
    secret = os.environ.get("AGORA_SECRET")
    if not secret:
        parser.exit(2, "sign_token.py: set AGORA_SECRET to the gateway's secret first (the token is signed with it)\n")
    roles = [role.strip() for role in args.roles.split(",") if role.strip()]
    try:
        token = sign_actor_token(Actor(id=args.user_id, roles=roles, tenant_ref=args.tenant), secret, ttl=args.ttl)
    except ValidationError as exc:
        parser.exit(2, f"sign_token.py: not a usable actor: {exc.errors()[0]['msg'].removeprefix('Value error, ')}\n")
    except UserError as exc:
        parser.exit(2, f"sign_token.py: {exc}\n")
    print(token)


if __name__ == "__main__":
    main()
