// A conformance server built on the official TypeScript SDK, served over Streamable HTTP on 127.0.0.1 (issue 29): the
// tools, resources and prompts the conformance suite's 2025-11-25 server scenarios call, as the scenario descriptions
// define them, written for agent-discover's tests. The conformance repository's own reference server is built on the
// same SDK but is not published to any package registry, so CI cannot install it; this one stands in for it, so the
// suite runs against an SDK other than rmcp directly and through `/mcp/servers/NAME`.
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

// A 1x1 red PNG and a WAV header with no samples.
const PNG = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';
const WAV = 'UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA=';
const pause = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t) => ({ content: [{ type: 'text', text: t }] });
const noArgs = { type: 'object', properties: {} };

const TOOLS = [
  ['test_simple_text', 'Returns simple text content', noArgs],
  ['test_image_content', 'Returns image content', noArgs],
  ['test_audio_content', 'Returns audio content', noArgs],
  ['test_embedded_resource', 'Returns an embedded resource', noArgs],
  ['test_multiple_content_types', 'Returns text, image and resource content', noArgs],
  ['test_tool_with_logging', 'Sends three log messages while it runs', noArgs],
  ['test_tool_with_progress', 'Sends three progress notifications while it runs', noArgs],
  ['test_error_handling', 'Always returns a tool error', noArgs],
  ['test_reconnection', 'Closes its SSE stream mid-call; the result arrives after the client reconnects', noArgs],
  ['test_sampling', 'Asks the client to sample an LLM completion', {
    type: 'object',
    properties: { prompt: { type: 'string', description: 'The prompt to send to the LLM' } },
    required: ['prompt'],
  }],
  ['test_elicitation', 'Asks the user for a username and an email', {
    type: 'object',
    properties: { message: { type: 'string', description: 'The message to show the user' } },
    required: ['message'],
  }],
  ['test_elicitation_sep1034_defaults', 'Elicitation with defaults for every primitive type', noArgs],
  ['test_elicitation_sep1330_enums', 'Elicitation with every enum variant', noArgs],
  ['json_schema_2020_12_tool', 'A tool whose input schema uses JSON Schema 2020-12 keywords', {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'object',
    $defs: { address: { $anchor: 'address', type: 'object', properties: { street: { type: 'string' }, city: { type: 'string' } } } },
    properties: {
      name: { type: 'string' },
      address: { $ref: '#/$defs/address' },
      contact: { allOf: [{ anyOf: [{ type: 'object', properties: { email: { type: 'string' } } }, { type: 'object', properties: { phone: { type: 'string' } } }] }] },
    },
    additionalProperties: false,
  }],
].map(([name, description, inputSchema]) => ({ name, description, inputSchema }));

const ELICIT_DEFAULTS = {
  message: 'Please review and update the form fields with defaults',
  requestedSchema: {
    type: 'object',
    properties: {
      name: { type: 'string', description: 'User name', default: 'John Doe' },
      age: { type: 'integer', description: 'User age', default: 30 },
      score: { type: 'number', description: 'User score', default: 95.5 },
      status: { type: 'string', description: 'User status', enum: ['active', 'inactive', 'pending'], default: 'active' },
      verified: { type: 'boolean', description: 'Verification status', default: true },
    },
    required: [],
  },
};

const ELICIT_ENUMS = {
  message: 'Please select options from the enum fields',
  requestedSchema: {
    type: 'object',
    properties: {
      untitledSingle: { type: 'string', description: 'Select one option', enum: ['option1', 'option2', 'option3'] },
      titledSingle: { type: 'string', description: 'Select one option with titles', oneOf: [
        { const: 'value1', title: 'First Option' }, { const: 'value2', title: 'Second Option' }, { const: 'value3', title: 'Third Option' }] },
      legacyEnum: { type: 'string', description: 'Select one option (legacy)', enum: ['opt1', 'opt2', 'opt3'], enumNames: ['Option One', 'Option Two', 'Option Three'] },
      untitledMulti: { type: 'array', description: 'Select multiple options', items: { type: 'string', enum: ['option1', 'option2', 'option3'] } },
      titledMulti: { type: 'array', description: 'Select multiple options with titles', items: { anyOf: [
        { const: 'value1', title: 'First Choice' }, { const: 'value2', title: 'Second Choice' }, { const: 'value3', title: 'Third Choice' }] } },
    },
    required: [],
  },
};

async function elicit(extra, params) {
  try {
    const r = await extra.sendRequest({ method: 'elicitation/create', params }, T.ElicitResultSchema);
    return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
  } catch (e) {
    return { isError: true, content: [{ type: 'text', text: `elicitation failed: ${e.message}` }] };
  }
}

async function callTool(req, extra) {
  const args = req.params.arguments ?? {};
  const log = (data) => extra.sendNotification({ method: 'notifications/message', params: { level: 'info', data } });
  switch (req.params.name) {
    case 'test_simple_text':
      return text('This is a simple text response for testing.');
    case 'test_image_content':
      return { content: [{ type: 'image', data: PNG, mimeType: 'image/png' }] };
    case 'test_audio_content':
      return { content: [{ type: 'audio', data: WAV, mimeType: 'audio/wav' }] };
    case 'test_embedded_resource':
      return { content: [{ type: 'resource', resource: { uri: 'test://embedded-resource', mimeType: 'text/plain', text: 'This is an embedded resource content.' } }] };
    case 'test_multiple_content_types':
      return { content: [
        { type: 'text', text: 'Multiple content types test:' },
        { type: 'image', data: PNG, mimeType: 'image/png' },
        { type: 'resource', resource: { uri: 'test://mixed-content-resource', mimeType: 'application/json', text: '{"test":"data","value":123}' } },
      ] };
    case 'test_tool_with_logging':
      await log('Tool execution started');
      await pause(50);
      await log('Tool processing data');
      await pause(50);
      await log('Tool execution completed');
      return text('Tool with logging executed successfully');
    case 'test_tool_with_progress': {
      const token = req.params._meta?.progressToken;
      for (const [i, progress] of [0, 50, 100].entries()) {
        if (i > 0) await pause(50);
        if (token !== undefined) {
          await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress, total: 100 } });
        }
      }
      return text('Tool with progress executed successfully');
    }
    case 'test_error_handling':
      return { isError: true, content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] };
    case 'test_reconnection':
      await pause(100);
      if (extra.closeSSEStream) extra.closeSSEStream();
      await pause(300);
      return text('Reconnection test completed successfully');
    case 'test_sampling':
      try {
        const r = await extra.sendRequest({ method: 'sampling/createMessage', params: {
          messages: [{ role: 'user', content: { type: 'text', text: String(args.prompt ?? '') } }],
          maxTokens: 100,
        } }, T.CreateMessageResultSchema);
        return text(`LLM response: ${r.content?.type === 'text' ? r.content.text : ''}`);
      } catch (e) {
        return { isError: true, content: [{ type: 'text', text: `sampling failed: ${e.message}` }] };
      }
    case 'test_elicitation':
      return elicit(extra, {
        message: String(args.message ?? ''),
        requestedSchema: {
          type: 'object',
          properties: {
            username: { type: 'string', description: "User's response" },
            email: { type: 'string', description: "User's email address" },
          },
          required: ['username', 'email'],
        },
      });
    case 'test_elicitation_sep1034_defaults':
      return elicit(extra, ELICIT_DEFAULTS);
    case 'test_elicitation_sep1330_enums':
      return elicit(extra, ELICIT_ENUMS);
    case 'json_schema_2020_12_tool':
      return text(`json_schema_2020_12_tool called with ${JSON.stringify(args)}`);
    default:
      throw new T.McpError(T.ErrorCode.InvalidParams, `unknown tool \`${req.params.name}\``);
  }
}

const RESOURCES = [
  { uri: 'test://static-text', name: 'Static Text Resource', description: 'A static text resource for testing', mimeType: 'text/plain' },
  { uri: 'test://static-binary', name: 'Static Binary Resource', description: 'A static binary resource (image) for testing', mimeType: 'image/png' },
  { uri: 'test://watched-resource', name: 'Watched Resource', description: 'A resource that can be subscribed to', mimeType: 'text/plain' },
];

function readResource(uri) {
  if (uri === 'test://static-text') return { uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' };
  if (uri === 'test://static-binary') return { uri, mimeType: 'image/png', blob: PNG };
  if (uri === 'test://watched-resource') return { uri, mimeType: 'text/plain', text: 'Watched resource content.' };
  const m = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
  if (m) return { uri, mimeType: 'application/json', text: JSON.stringify({ id: m[1], templateTest: true, data: `Data for ID: ${m[1]}` }) };
  throw new T.McpError(-32002, `Resource not found: ${uri}`, { uri });
}

const PROMPTS = [
  { name: 'test_simple_prompt', description: 'A simple prompt without arguments' },
  { name: 'test_prompt_with_arguments', description: 'A prompt with required arguments', arguments: [
    { name: 'arg1', description: 'First test argument', required: true },
    { name: 'arg2', description: 'Second test argument', required: true }] },
  { name: 'test_prompt_with_embedded_resource', description: 'A prompt that includes an embedded resource', arguments: [
    { name: 'resourceUri', description: 'URI of the resource to embed', required: true }] },
  { name: 'test_prompt_with_image', description: 'A prompt that includes an image' },
];

function getPrompt({ name, arguments: a = {} }) {
  const user = (content) => ({ role: 'user', content });
  const say = (t) => user({ type: 'text', text: t });
  switch (name) {
    case 'test_simple_prompt':
      return { messages: [say('This is a simple prompt for testing.')] };
    case 'test_prompt_with_arguments':
      return { messages: [say(`Prompt with arguments: arg1='${a.arg1 ?? ''}', arg2='${a.arg2 ?? ''}'`)] };
    case 'test_prompt_with_embedded_resource':
      return { messages: [
        user({ type: 'resource', resource: { uri: a.resourceUri ?? '', mimeType: 'text/plain', text: 'Embedded resource content for testing.' } }),
        say('Please process the embedded resource above.'),
      ] };
    case 'test_prompt_with_image':
      return { messages: [user({ type: 'image', data: PNG, mimeType: 'image/png' }), say('Please analyze the image above.')] };
    default:
      throw new T.McpError(T.ErrorCode.InvalidParams, `unknown prompt \`${name}\``);
  }
}

/// One SDK server per session, as the SDK's examples serve Streamable HTTP.
function newServer() {
  const server = new Server({ name: 'ts-conformance', version: '1.0.0' }, {
    capabilities: {
      tools: { listChanged: true },
      resources: { subscribe: true, listChanged: true },
      prompts: { listChanged: true },
      logging: {},
      completions: {},
    },
  });
  server.setRequestHandler(T.ListToolsRequestSchema, async () => ({ tools: TOOLS }));
  server.setRequestHandler(T.CallToolRequestSchema, callTool);
  server.setRequestHandler(T.ListResourcesRequestSchema, async () => ({ resources: RESOURCES }));
  server.setRequestHandler(T.ListResourceTemplatesRequestSchema, async () => ({ resourceTemplates: [{
    uriTemplate: 'test://template/{id}/data', name: 'Resource Template',
    description: 'A resource template with parameter substitution', mimeType: 'application/json',
  }] }));
  server.setRequestHandler(T.ReadResourceRequestSchema, async (req) => ({ contents: [readResource(req.params.uri)] }));
  server.setRequestHandler(T.SubscribeRequestSchema, async () => ({}));
  server.setRequestHandler(T.UnsubscribeRequestSchema, async () => ({}));
  server.setRequestHandler(T.ListPromptsRequestSchema, async () => ({ prompts: PROMPTS }));
  server.setRequestHandler(T.GetPromptRequestSchema, async (req) => getPrompt(req.params));
  server.setRequestHandler(T.SetLevelRequestSchema, async () => ({}));
  server.setRequestHandler(T.CompleteRequestSchema, async (req) => {
    const prefix = req.params.argument?.value ?? '';
    const values = ['paris', 'park', 'party'].filter((v) => v.startsWith(prefix));
    return { completion: { values, total: values.length, hasMore: false } };
  });
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
