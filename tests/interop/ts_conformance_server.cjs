// A conformance server on the official TypeScript SDK 1.x, served over Streamable HTTP on 127.0.0.1 (issue 29), in the
// legacy era only: the conformance suite's 2025-11-25 server scenarios of ts_conformance_scenarios.cjs, so the suite
// runs against an SDK other than rmcp directly and through `/mcp/servers/NAME`. ts_conformance_server_v2.cjs serves
// the same scenarios on the SDK's 2.x line in both eras, as the conformance repository's reference server does.
//
// Usage: node ts_conformance_server.cjs NODE_MODULES_DIR
// Prints `http://127.0.0.1:PORT/mcp` on stdout once listening; logs go to stderr.
'use strict';

const path = require('node:path');
const http = require('node:http');
const { randomUUID } = require('node:crypto');
const { createRequire } = require('node:module');

const modules = process.argv[2];
if (!modules) {
  console.error('usage: node ts_conformance_server.cjs NODE_MODULES_DIR');
  process.exit(2);
}
const need = createRequire(path.join(path.resolve(modules), 'package.json'));
const { Server } = need('@modelcontextprotocol/sdk/server/index.js');
const { StreamableHTTPServerTransport } = need('@modelcontextprotocol/sdk/server/streamableHttp.js');
const { InMemoryEventStore } = need('@modelcontextprotocol/sdk/examples/shared/inMemoryEventStore.js');
const T = need('@modelcontextprotocol/sdk/types.js');
const S = require('./ts_conformance_scenarios.cjs');

const fail = (code, message, data) => new T.McpError(code, message, data);
const RESULT_SCHEMAS = { 'elicitation/create': T.ElicitResultSchema, 'sampling/createMessage': T.CreateMessageResultSchema };

/// One SDK server per session, as the SDK's examples serve Streamable HTTP.
function newServer() {
  const server = new Server({ name: 'ts-conformance', version: '1.0.0' }, { capabilities: S.CAPABILITIES });
  server.setRequestHandler(T.ListToolsRequestSchema, async () => ({ tools: S.TOOLS }));
  server.setRequestHandler(T.CallToolRequestSchema, (req, extra) => S.callTool(req.params, {
    request: (method, params) => extra.sendRequest({ method, params }, RESULT_SCHEMAS[method]),
    notify: (method, params) => extra.sendNotification({ method, params }),
    closeSSE: () => extra.closeSSEStream?.(),
    fail,
  }));
  server.setRequestHandler(T.ListResourcesRequestSchema, async () => ({ resources: S.RESOURCES }));
  server.setRequestHandler(T.ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: S.RESOURCE_TEMPLATES }));
  server.setRequestHandler(T.ReadResourceRequestSchema, async (req) => ({ contents: [S.readResource(req.params.uri, fail)] }));
  server.setRequestHandler(T.SubscribeRequestSchema, async () => ({}));
  server.setRequestHandler(T.UnsubscribeRequestSchema, async () => ({}));
  server.setRequestHandler(T.ListPromptsRequestSchema, async () => ({ prompts: S.PROMPTS }));
  server.setRequestHandler(T.GetPromptRequestSchema, async (req) => S.getPrompt(req.params, fail));
  server.setRequestHandler(T.SetLevelRequestSchema, async () => ({}));
  server.setRequestHandler(T.CompleteRequestSchema, async (req) => S.complete(req.params));
  return server;
}

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

function reject(res, status, message) {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32000, message }, id: null }));
}

const httpServer = http.createServer(async (req, res) => {
  try {
    if (new URL(req.url, 'http://x').pathname !== '/mcp') return reject(res, 404, 'not found');
    const sid = req.headers['mcp-session-id'];
    const body = req.method === 'POST' ? await readBody(req) : undefined;
    if (body === null) {
      res.writeHead(400, { 'content-type': 'application/json' });
      return res.end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32700, message: 'Parse error' }, id: null }));
    }
    let transport = sid ? sessions.get(sid) : undefined;
    if (!transport) {
      if (sid) return reject(res, 404, 'Session not found');
      if (req.method !== 'POST' || !T.isInitializeRequest(body)) return reject(res, 400, 'Bad Request: No valid session ID provided');
      const { port } = httpServer.address();
      transport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        eventStore: new InMemoryEventStore(),
        retryInterval: 500,
        enableDnsRebindingProtection: true,
        allowedHosts: [`127.0.0.1:${port}`, `localhost:${port}`],
        onsessioninitialized: (id) => sessions.set(id, transport),
      });
      transport.onclose = () => {
        if (transport.sessionId) sessions.delete(transport.sessionId);
      };
      await newServer().connect(transport);
    }
    await transport.handleRequest(req, res, body);
  } catch (e) {
    console.error('ts-conformance:', e);
    if (!res.headersSent) reject(res, 500, 'Internal error');
  }
});

httpServer.listen(0, '127.0.0.1', () => {
  process.stdout.write(`http://127.0.0.1:${httpServer.address().port}/mcp\n`);
});
