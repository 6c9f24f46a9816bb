#!/usr/bin/env bash
# Two gateway processes sharing one Redis: open http://127.0.0.1:8001/ and http://127.0.0.1:8002/.
# A refund asked on one and approved through the other's API completes; kill one mid-run and the
# other resumes its runs once their lease lapses (AGORA_LEASE_TTL, 15 s by default).
set -euo pipefail
export AGORA_SECRET="${AGORA_SECRET:-$(python3 -c 'import secrets; print(secrets.token_hex(32))')}"
export AGORA_REDIS_URL="${AGORA_REDIS_URL:-redis://127.0.0.1:6379/0}"
.venv/bin/agora-gateway serve --port 8001 &
first=$!
.venv/bin/agora-gateway serve --port 8002 &
second=$!
trap 'kill $first $second' EXIT
wait
