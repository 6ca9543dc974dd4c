// A conformance server on the official TypeScript SDK's 2.x line (`@modelcontextprotocol/server`, pinned in
// package.json), served over Streamable HTTP on 127.0.0.1 as the conformance repository's reference server serves
// itself: one `/mcp` for both eras. 2026-07-28 requests go to the SDK's `createMcpHandler` (whose `server/discover`
// lists only `2026-07-28`), legacy requests (`initialize`, then a session) to a session of its Streamable HTTP
// transport, both built from one server factory. The tools that ask the client (sampling, elicitation) use the SDK's
// push-style requests, which work only in legacy sessions: on the 2026-07-28 path they fail, as the reference
// server's do. The reference server itself is published to no package registry, so CI cannot install it; this one
// stands in for it with the scenarios of ts_conformance_scenarios.cjs.
//
// Usage: node ts_conformance_server_v2.cjs NODE_MODULES_DIR [--busy-initializes N]
// `--busy-initializes N`: the first N `initialize` requests are answered 503 in plain text (as a busy server, or a
// proxy in front of one, answers), the ones after them as usual.
// Prints `http://127.0.0.1:PORT/mcp` on stdout once listening; logs go to stderr.
'use strict';

const path = require('node:path');
const http = require('node:http');
const { randomUUID } = require('node:crypto');
const { createRequire } = require('node:module');

const modules = process.argv[2];
const busyAt = process.argv.indexOf('--busy-initializes');
let busy = busyAt > 0 ? Number(process.argv[busyAt + 1]) : 0;
if (!modules || !Number.isInteger(busy) || busy < 0) {
  console.error('usage: node ts_conformance_server_v2.cjs NODE_MODULES_DIR [--busy-initializes N]');
  process.exit(2);
}
const need = createRequire(path.join(path.resolve(modules), 'package.json'));
const {
  Server, ProtocolError, createMcpHandler, isLegacyRequest, hostHeaderValidationResponse, localhostAllowedHostnames,
} = need('@modelcontextprotocol/server');
const { NodeStreamableHTTPServerTransport, toNodeHandler, toWebRequest } = need('@modelcontextprotocol/node');
const S = require('./ts_conformance_scenarios.cjs');

const fail = (code, message, data) => new ProtocolError(code, message, data);

/// The server of one legacy session or one 2026-07-28 request (the SDK calls the factory with the era).
function newServer() {
  const server = new Server({ name: 'ts-conformance-v2', version: '1.0.0' }, { capabilities: S.CAPABILITIES });
  server.setRequestHandler('tools/list', async () => ({ tools: S.TOOLS }));
  server.setRequestHandler('tools/call', (req, ctx) => S.callTool(req.params, {
    request: (method, params) => ctx.mcpReq.send({ method, params }),
    notify: (method, params) => ctx.mcpReq.notify({ method, params }),
    closeSSE: () => ctx.http?.closeSSE?.(),
    fail,
  }));
  server.setRequestHandler('resources/list', async () => ({ resources: S.RESOURCES }));
  server.setRequestHandler('resources/templates/list', async () => ({ resourceTemplates: S.RESOURCE_TEMPLATES }));
  server.setRequestHandler('resources/read', async (req) => ({ contents: [S.readResource(req.params.uri, fail)] }));
  server.setRequestHandler('resources/subscribe', async () => ({}));
  server.setRequestHandler('resources/unsubscribe', async () => ({}));
  server.setRequestHandler('prompts/list', async () => ({ prompts: S.PROMPTS }));
  server.setRequestHandler('prompts/get', async (req) => S.getPrompt(req.params, fail));
  server.setRequestHandler('logging/setLevel', async () => ({}));
  server.setRequestHandler('completion/complete', async (req) => S.complete(req.params));
  return server;
}

/// Events of the legacy sessions' SSE streams, kept so a client can resume one (`Last-Event-ID`).
class EventStore {
  constructor() {
    this.events = [];
  }

  async storeEvent(streamId, message) {
    const eventId = `${streamId}_${this.events.length}`;
    this.events.push({ eventId, streamId, message });
    return eventId;
  }

  async replayEventsAfter(lastEventId, { send }) {
    const at = this.events.findIndex((e) => e.eventId === lastEventId);
    if (at < 0) return '';
    const { streamId } = this.events[at];
    for (const e of this.events.slice(at + 1)) {
      if (e.streamId === streamId) await send(e.eventId, e.message);
    }
    return streamId;
  }
}

const modern = toNodeHandler(createMcpHandler(() => newServer(), { legacy: 'reject' }));
const events = new EventStore();
const sessions = new Map();

async function readBody(req) {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  const raw = Buffer.concat(chunks).toString('utf8');
  if (!raw) return undefined;
  try {
    return JSON.parse(raw);
  } catch {
    return null;
  }
}

function reject(res, status, code, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}

/// A legacy request: to its session, or a new session for `initialize`.
async function legacy(req, res, body) {
  const sid = req.headers['mcp-session-id'];
  let transport = sid ? sessions.get(sid) : undefined;
  if (!transport) {
    if (sid) return reject(res, 404, -32001, 'Session not found');
    if (req.method !== 'POST' || body?.method !== 'initialize') {
      return reject(res, 400, -32000, 'Bad Request: No valid session ID provided');
    }
    if (busy > 0) {
      busy -= 1;
      res.writeHead(503, { 'content-type': 'text/plain', 'retry-after': '1' });
      return res.end('busy, try again');
    }
    transport = new NodeStreamableHTTPServerTransport({
      sessionIdGenerator: () => randomUUID(),
      eventStore: events,
      retryInterval: 500,
      onsessioninitialized: (id) => sessions.set(id, transport),
    });
    transport.onclose = () => {
      if (transport.sessionId) sessions.delete(transport.sessionId);
    };
    await newServer().connect(transport);
  }
  await transport.handleRequest(req, res, body);
}

const httpServer = http.createServer(async (req, res) => {
  try {
    if (new URL(req.url, 'http://x').pathname !== '/mcp') return reject(res, 404, -32000, 'not found');
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    if (body === null) return reject(res, 400, -32700, 'Parse error');
    const probe = await toWebRequest(req, body);
    // DNS-rebinding protection, for both eras.
    const refused = hostHeaderValidationResponse(probe, localhostAllowedHostnames());
    if (refused) return toNodeHandler({ fetch: async () => refused })(req, res);
    if (await isLegacyRequest(probe, body)) return await legacy(req, res, body);
    await modern(req, res, body);
  } catch (e) {
    console.error('ts-conformance-v2:', e);
    if (!res.headersSent) reject(res, 500, -32603, 'Internal error');
  }
});

httpServer.listen(0, '127.0.0.1', () => {
  process.stdout.write(`http://127.0.0.1:${httpServer.address().port}/mcp\n`);
});
