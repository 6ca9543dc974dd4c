#!/usr/bin/env bash
# The client command the MCP conformance suite runs (`conformance client --command "scripts/conformance-client.sh"`),
# with the server URL appended: registers the server in a temporary data dir, authorizes headlessly (the suite's
# authorization endpoint redirects straight to the redirect URI with a code, so fetching the authorize URL completes
# it), lists the tools and calls each one; for the skills scenarios (sep-2640-client-*) it lists and loads skills
# instead. Scenario settings come from MCP_CONFORMANCE_SCENARIO and
# MCP_CONFORMANCE_CONTEXT (a pre-registered client, client credentials, a workload's JWT, an enterprise IdP's ID
# token). DPoP needs no setting: agent-discover uses it when the authorization server advertises it.
#
# AGENT_DISCOVER_BIN names the binary (default: target/debug/agent-discover next to this script).
set -euo pipefail

url="${*: -1}"
here="$(cd "$(dirname "$0")" && pwd)"
bin="${AGENT_DISCOVER_BIN:-$here/../target/debug/agent-discover}"
data="$(mktemp -d)"
trap 'rm -rf "$data"' EXIT
export AGENT_DISCOVER_DATA_DIR="$data" AGENT_DISCOVER_DASHBOARD=off
# A free loopback port for the redirect URI, the same for every command of this run.
AGENT_DISCOVER_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
export AGENT_DISCOVER_PORT
name=conformance
scenario="${MCP_CONFORMANCE_SCENARIO:-}"

ctx() { # a field of MCP_CONFORMANCE_CONTEXT, or nothing
  python3 -c 'import json, os, sys; v = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}").get(sys.argv[1]); print(v if isinstance(v, str) else "")' "$1"
}

env_args=(--env "OAUTH_CLIENT_METADATA_URL=https://conformance-test.local/client-metadata.json")
case "$scenario" in
  auth/client-credentials-*) env_args+=(--env "OAUTH_GRANT=client_credentials") ;;
  # Workload identity federation: the workload's JWT in a file, read at each token request.
  auth/wif-jwt-bearer)
    ctx valid_jwt >"$data/workload.jwt"
    env_args+=(--env "OAUTH_GRANT=jwt_bearer" --env "OAUTH_ASSERTION_FILE=$data/workload.jwt") ;;
  # Enterprise-managed authorization: the ID token exchanged at the IdP for an ID-JAG, then the JWT-bearer grant.
  auth/enterprise-managed-authorization)
    env_args+=(--env "OAUTH_GRANT=id_jag" --env "OAUTH_IDP_TOKEN_ENDPOINT=$(ctx idp_token_endpoint)"
      --env "OAUTH_IDP_CLIENT_ID=$(ctx idp_client_id)") ;;
esac
"$bin" add "$name" --transport streamable-http --url "$url" "${env_args[@]}" >/dev/null

# The skills extension's client scenarios (SEP-2640): list the server's skills (nothing else is read: no prefetch),
# then, but for no-prefetch, load the first one as a host does. `skills load` verifies each file (size, digest,
# frontmatter) before using it and stops at the first that fails, exiting non-zero with the failed check named.
case "$scenario" in
  sep-2640-client-*)
    skills="$("$bin" skills list "$name" --json)"
    [ "$scenario" = sep-2640-client-no-prefetch ] && exit 0
    skill="$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])[0]["frontmatter"]["name"])' "$skills")"
    exec "$bin" skills load "$name" "$skill"
    ;;
esac
client_id="$(ctx client_id)"
client_secret="$(ctx client_secret)"
[ -n "$client_id" ] && printf '%s' "$client_id" | "$bin" secrets set "$name" OAUTH_CLIENT_ID
[ -n "$client_secret" ] && printf '%s' "$client_secret" | "$bin" secrets set "$name" OAUTH_CLIENT_SECRET
private_key="$(ctx private_key_pem)"
signing_alg="$(ctx signing_algorithm)"
# `secrets set` reads one line: the PEM goes in without its line breaks.
[ -n "$private_key" ] && printf '%s' "$private_key" | tr -d '\n' | "$bin" secrets set "$name" OAUTH_PRIVATE_KEY
[ -n "$signing_alg" ] && printf '%s' "$signing_alg" | "$bin" secrets set "$name" OAUTH_SIGNING_ALG
id_token="$(ctx idp_id_token)"
[ -n "$id_token" ] && printf '%s' "$id_token" | "$bin" secrets set "$name" OAUTH_ID_TOKEN

# `auth` prints each authorize URL on stdout and listens for the callback; following the URL completes it. Bounded:
# when following the URL fails (the suite's server gone, the callback port taken), `auth` would wait for a callback
# that never comes, and the scenario must fail rather than hold the suite.
authorize() {
  coproc AUTH { timeout 100 "$bin" auth "$name"; }
  local pid=$AUTH_PID line
  while IFS= read -r line <&"${AUTH[0]}"; do
    curl -sS -L -o /dev/null "$line" || true
  done
  wait "$pid"
}

# Calls a tool; when the server asks for (more) authorization, authorizes and tries again.
call() {
  local tool=$1 out attempt
  for attempt in 1 2 3 4; do
    if out="$("$bin" call "${name}__${tool}" --args '{}' 2>&1)"; then
      printf '%s\n' "$out"
      return 0
    fi
    if ! grep -q "needs authorization" <<<"$out"; then
      printf '%s\n' "$out" >&2
      return 1
    fi
    authorize
  done
  return 1
}

authorize
tools="$("$bin" show "$name" --json | python3 -c 'import json, sys; [print(t["name"]) for t in json.load(sys.stdin)["tools"]]')"
for tool in $tools; do
  call "$tool"
done
