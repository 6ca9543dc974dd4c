//! The single integration-test binary: each module drives the real `agent-discover` binary or library.

// Shared helpers for spawning agent-discover and talking MCP to it.
mod harness;
// The core: registry actions over stdio, the CLI, bad input, two processes on one database.
mod registry;
// The proxy against the fixture server: activation, calls, crashes, timeouts, notifications, secrets, cleanup.
mod proxy;
// Real MCP servers from npm and PyPI, and the official Python SDK as a client.
mod interop;
// Tool search over a catalog of real tools.
mod search;
mod search_cut;
// The marketplace against a stub registry on 127.0.0.1, and the installer.
mod marketplace;
// Installing from the marketplace through the registry tool.
mod install;
// In-process embeddings against reference vectors from an independent implementation.
mod embed;
// The dashboard server: REST, WebSocket, MCP over HTTP, security, leader election, and a real browser.
mod http;
// What the proxy forwards besides calls (logging, completions, subscriptions, fields preserved), against real servers.
mod fidelity;
// The official MCP conformance suite directly and through agent-discover (per-server and aggregated endpoints).
mod conformance;
// Issue 29: the same suite against Streamable HTTP children (the HTTP fixture in both eras, server-everything), and
// suite 0.1.16.
mod conformance_http;
// Issue 18: the tasks extension (SEP-2663) through the aggregated front: create, get, update, cancel, notifications.
mod tasks;
// Client config files: clients, import, export, connect.
mod clientconfig;
// The McpRegistry lifecycle at the library level: add_server, apply_config per origin, restarts, statuses.
mod lifecycle;
// Issue 12 integrity: SEP-1303 argument errors, every request answered (seeded fuzz), tool pinning, allow/deny filters.
mod integrity;
// Issue 27: the tool scanner withholds poisoned definitions on every front until a person approves them.
mod scanner;
// Issue 14: batch introspection against the fixture's failure modes and local packages.
mod introspect;
// Issue 13: the embedding model downloaded by agent-discover itself, against a stub index and file server.
mod model;
// Issue 11 OAuth: the conformance suite's client authorization scenarios, and end to end against the TypeScript SDK.
mod oauth;
// Issue 10: registry snapshots (subscribe) from the App, over SSE and as an MCP resource.
mod subscribe;
// Issue 14: installing a catalog entry with the user's consent (elicitation) or an explicit install.
mod introspect_install;
// Issue 16: several serve replicas on one registry (sessions, changes reaching every replica).
mod replicas;
// Issue 16: replicas on one PostgreSQL registry (a real server started by the tests).
mod team;
// Issue 16: `migrate` copies a personal registry into a team's.
mod migrate;
// Issue 14: install scripts skipped at first and run only when a failure says they were needed.
mod introspect_scripts;
// Issue 14: second-pass rules (README values, entry-script secrets, USAGE headings) on local packages.
mod introspect_rules;
// Issue 31, part 5 (coverage): a third attempt with what a failed second pass names; key files, choices, opaque secrets.
mod introspect_retry;

// Issue 10: the dashboard port taken over when its leader exits (SIGKILL and clean exit).
mod leadership;
// Issue 10: lifecycle transitions are atomic for subscribers (no half-updated entry, no vanished row).
mod transitions;
// Issue 18: MCP 2026-07-28 end to end (children in their newest era, input-required results relayed, the 2026 front).
mod eras;
// Issue 18: a legacy child behind clients of both eras (log messages per request, proxy_call's questions).
mod legacy;
// Issue 15: agents over A2A (the official Python SDK as the agents), executors, sessions and their typed errors.
mod agents;
// Issue 16: the PostgreSQL backend against a real server (initdb + postgres in a temporary directory).
mod pg;
// PostgreSQL over TLS: sslmode and sslrootcert against a server with a test certificate authority.
mod pg_tls;
// Issue 12: the fast lane of proxied tool calls (progress, timeout, cancellation, crash, sampling, error shapes).
mod relay;
mod relay_2026;
// Issue 26: per-server sandbox settings through the CLI, REST and the registry tool; listings and status show them.
mod sandbox_settings;
// Network allow-lists: a confined server reaches allowed hosts by name through the filtering proxy, nothing else.
mod netallow;
// Issue 26: the sandbox from outside (a hostile fixture, network none, refusals, real npm and PyPI servers confined).
mod sandbox;
// Real launch shapes started confined: Node projects, venvs, uv, pipx, npm -g, binaries in HOME, git, credentials.
mod launch;
// Issue 27: approval policies bound to arguments (elicitation, input-required, REST, CLI, replicas, Python SDK).
mod approvals;
// Issue 31, part 4: approval rules cached under the store's change marker; a rule another process commits applies to
// the next call, fast lane included.
mod fresh_rules;
mod guards;
/// What else flows back to the agent (resources, prompts, a task's result) and credentials by origin.
mod guards_flows;
// Issue 31, part 4: the HTTP front's cheaper path answers untyped requests with their id as before.
mod http_front;
// Issue 28: code mode: scripts that call tools through the proxy, their limits, approvals and fronts.
mod codemode;
// Issue 29, part 2: the skills extension (SEP-2640) through the proxy: conformance both ways, aggregation, verification.
mod skills;
// Issue 31: a fresh process is ready at once (active servers listed from the database, calls wait for their start).
mod ready;
// Issue 31: find_tool's answer is compact (bytes per answer on the query sets).
mod answers;
// Issue 29, part 3: OpenTelemetry traces exported to an OTLP receiver in the test (protobuf and JSON), both eras.
mod telemetry;
// Issue 30, part 3: token exchange per user (RFC 8693): each user's call to a remote server carries that user's token.
mod token_exchange;
// Issue 30: a remote server each user authorizes for themselves; each user's call carries that user's own token.
mod peruser;
// Issue 30: the front as an OAuth-protected resource, visibility per group, and who made each call.
mod identity;
// Issue 30: the test authorization server (RFC 8414 metadata, JWKS, DCR, authorize, token with PKCE, introspection).
mod ident_as;
mod telemetry_spans;
// Issue 31, part 5: servers needing a newer Node run with one from the runtimes cache (introspection, activation).
mod runtimes;
// Issue 30: end to end through the real front: token exchange per user, per-user status, events that name who.
mod ident_e2e;
// Issue 31, part 4: the fast lane on the HTTP front (`src/http/lane.rs`).
mod http_lane;
// How a stdio start ends (slow, silent, crashed, stopped, not installed) and launchers fetched when missing.
mod starts;
// SEP-2243 headers to a 2026-07-28 HTTP child: mirrored from the listed tools, re-listed and retried after -32020.
mod param_headers;
// What a shipped binary says about itself (--version).
mod dist;
// Saved scripts as tools of the built-in server `scripts`: listed, found, called from every path, pinned.
mod saved_scripts;
// Large results in pages: head and link, read back through resources/read and read_result, bounded.
mod paging;
// Tool overrides: renamed, redescribed, fixed and hidden parameters on every front; reviewed and scanned.
mod overrides;
// Rate limits, concurrency caps and circuit breakers: stdio and HTTP fronts, REST, the CLI, two replicas on PostgreSQL.
mod limits;
// Policies for calls (Cedar files): deny, ask, allow per user and group, reload, `policy test`.
mod policy;
// Profiles: a named set of servers and tools served as its own view, on every front.
mod profiles;
// Each user's own keys: per-user children with their own values, the shared fallback or its refusal, bounds.
mod personal_keys;
// A profile's own tool overrides: what its clients see and call, reviewed and scanned; the aggregated front unchanged.
mod profile_overrides;
