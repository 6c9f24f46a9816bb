#!/usr/bin/env bash
# Two gateway processes sharing one Redis:
#
#   examples/two_processes.sh [FIRST_PORT [SECOND_PORT]]     (default 8001 and 8002)
#
# then open http://127.0.0.1:FIRST_PORT/ and http://127.0.0.1:SECOND_PORT/. A refund asked on one
# and approved through the other's API completes; kill one mid-run and the other resumes its runs
# once their lease lapses (AGORA_LEASE_TTL, 15 s by default). AGORA_HOST, AGORA_STORE_URL (a
# shared store: Redis or PostgreSQL; AGORA_REDIS_URL, its older name, too) and AGORA_SECRET are
# read from the environment (a secret is made for both when it is not set), and
# GATEWAY_BIN names the command to run (default: the checkout's .venv/bin/agora-gateway).
set -euo pipefail
first_port="${1:-8001}"
second_port="${2:-8002}"
gateway="${GATEWAY_BIN:-$(dirname "$0")/../.venv/bin/agora-gateway}"
export AGORA_SECRET="${AGORA_SECRET:-$(python3 -c 'import secrets; print(secrets.token_hex(32))')}"
export AGORA_STORE_URL="${AGORA_STORE_URL:-${AGORA_REDIS_URL:-redis://127.0.0.1:6379/0}}"
"$gateway" serve --port "$first_port" &
first=$!
"$gateway" serve --port "$second_port" &
second=$!
trap 'kill "$first" "$second" 2>/dev/null || true; wait' EXIT
trap 'exit 143' TERM
trap 'exit 130' INT
wait
