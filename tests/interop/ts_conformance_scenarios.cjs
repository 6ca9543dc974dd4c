// The conformance suite's 2025-11-25 server scenarios as its scenario descriptions define them (tools, resources,
// prompts, completions), independent of the SDK that serves them: ts_conformance_server.cjs serves them on the
// official TypeScript SDK 1.x, ts_conformance_server_v2.cjs on its 2.x line (2026-07-28 and the legacy era).
'use strict';

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

async function elicit(io, params) {
  try {
    const r = await io.request('elicitation/create', params);
    return text(`Elicitation completed: action=${r.action}, content=${JSON.stringify(r.content ?? {})}`);
  } catch (e) {
    return { isError: true, content: [{ type: 'text', text: `elicitation failed: ${e.message}` }] };
  }
}

/// A `tools/call`: `params` as the client sent them; `io` is the SDK's side of the request: `request(method, params)`
/// asks the client, `notify(method, params)` tells it, `closeSSE()` closes the request's SSE stream (if the SDK can),
/// `fail(code, message, data)` makes the SDK's protocol error.
async function callTool(params, io) {
  const args = params.arguments ?? {};
  const log = (data) => io.notify('notifications/message', { level: 'info', data });
  switch (params.name) {
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
      const token = params._meta?.progressToken;
      for (const [i, progress] of [0, 50, 100].entries()) {
        if (i > 0) await pause(50);
        if (token !== undefined) {
          await io.notify('notifications/progress', { progressToken: token, progress, total: 100 });
        }
      }
      return text('Tool with progress executed successfully');
    }
    case 'test_error_handling':
      return { isError: true, content: [{ type: 'text', text: 'This tool intentionally returns an error for testing' }] };
    case 'test_reconnection':
      await pause(100);
      io.closeSSE();
      await pause(300);
      return text('Reconnection test completed successfully');
    case 'test_sampling':
      try {
        const r = await io.request('sampling/createMessage', {
          messages: [{ role: 'user', content: { type: 'text', text: String(args.prompt ?? '') } }],
          maxTokens: 100,
        });
        return text(`LLM response: ${r.content?.type === 'text' ? r.content.text : ''}`);
      } catch (e) {
        return { isError: true, content: [{ type: 'text', text: `sampling failed: ${e.message}` }] };
      }
    case 'test_elicitation':
      return elicit(io, {
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
      return elicit(io, ELICIT_DEFAULTS);
    case 'test_elicitation_sep1330_enums':
      return elicit(io, ELICIT_ENUMS);
    case 'json_schema_2020_12_tool':
      return text(`json_schema_2020_12_tool called with ${JSON.stringify(args)}`);
    default:
      throw io.fail(-32602, `unknown tool \`${params.name}\``);
  }
}

const RESOURCES = [
  { uri: 'test://static-text', name: 'Static Text Resource', description: 'A static text resource for testing', mimeType: 'text/plain' },
  { uri: 'test://static-binary', name: 'Static Binary Resource', description: 'A static binary resource (image) for testing', mimeType: 'image/png' },
  { uri: 'test://watched-resource', name: 'Watched Resource', description: 'A resource that can be subscribed to', mimeType: 'text/plain' },
];

/// A resource's contents; `fail(code, message, data)` makes the SDK's protocol error.
function readResource(uri, fail) {
  if (uri === 'test://static-text') return { uri, mimeType: 'text/plain', text: 'This is the content of the static text resource.' };
  if (uri === 'test://static-binary') return { uri, mimeType: 'image/png', blob: PNG };
  if (uri === 'test://watched-resource') return { uri, mimeType: 'text/plain', text: 'Watched resource content.' };
  const m = /^test:\/\/template\/([^/]+)\/data$/.exec(uri);
  if (m) return { uri, mimeType: 'application/json', text: JSON.stringify({ id: m[1], templateTest: true, data: `Data for ID: ${m[1]}` }) };
  throw fail(-32002, `Resource not found: ${uri}`, { uri });
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

/// A prompt; `fail(code, message, data)` makes the SDK's protocol error.
function getPrompt({ name, arguments: a = {} }, fail) {
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
      throw fail(-32602, `unknown prompt \`${name}\``);
  }
}

function complete(params) {
  const prefix = params.argument?.value ?? '';
  const values = ['paris', 'park', 'party'].filter((v) => v.startsWith(prefix));
  return { completion: { values, total: values.length, hasMore: false } };
}

const RESOURCE_TEMPLATES = [{
  uriTemplate: 'test://template/{id}/data', name: 'Resource Template',
  description: 'A resource template with parameter substitution', mimeType: 'application/json',
}];

const CAPABILITIES = {
  tools: { listChanged: true },
  resources: { subscribe: true, listChanged: true },
  prompts: { listChanged: true },
  logging: {},
  completions: {},
};

module.exports = {
  TOOLS, RESOURCES, RESOURCE_TEMPLATES, PROMPTS, CAPABILITIES, callTool, readResource, getPrompt, complete,
};
