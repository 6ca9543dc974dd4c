// Interop check (issue 30) with the official MCP TypeScript SDK's OAuth client: it connects to agent-discover's
// protected front, discovers the resource metadata and the authorization server, registers itself, runs the
// authorization code flow with PKCE (headless: the authorize URL is fetched and its redirect read instead of opening
// a browser), finishes the authorization, reconnects, lists the tools and calls one.
// Usage: node ts_identity_check.mjs SDK_DIR MCP_URL TOOL TEXT
// Prints one JSON line {"tools": [...], "result": "..."}; exits non-zero with a message on any failure.
import { pathToFileURL } from "node:url";

const [sdkDir, url, tool, text] = process.argv.slice(2);
const sdk = (p) => import(pathToFileURL(`${sdkDir}/dist/esm/${p}`).href);
const { Client } = await sdk("client/index.js");
const { StreamableHTTPClientTransport } = await sdk("client/streamableHttp.js");
const { UnauthorizedError } = await sdk("client/auth.js");

const REDIRECT = "http://127.0.0.1:9/callback";
let code;

const provider = {
  stored: {},
  get redirectUrl() {
    return REDIRECT;
  },
  get clientMetadata() {
    return {
      client_name: "ts-identity-check",
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  },
  clientInformation() {
    return this.stored.client;
  },
  saveClientInformation(info) {
    this.stored.client = info;
  },
  tokens() {
    return this.stored.tokens;
  },
  saveTokens(tokens) {
    this.stored.tokens = tokens;
  },
  saveCodeVerifier(v) {
    this.stored.verifier = v;
  },
  codeVerifier() {
    return this.stored.verifier;
  },
  async redirectToAuthorization(authorizationUrl) {
    // The test authorization server approves at once: read the code from its redirect.
    const resp = await fetch(authorizationUrl, { redirect: "manual" });
    const location = resp.headers.get("location") ?? "";
    if (!location.startsWith(REDIRECT)) {
      throw new Error(`authorize answered ${resp.status} ${location}`);
    }
    code = new URL(location).searchParams.get("code");
  },
};

async function connect() {
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  const client = new Client({ name: "ts-identity-check", version: "1.0.0" });
  await client.connect(transport);
  return { client, transport };
}

let session;
try {
  session = await connect();
} catch (e) {
  if (!(e instanceof UnauthorizedError) || !code) {
    throw e;
  }
  // The first transport started the flow; finish it with the code, then connect again with the token.
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  await transport.finishAuth(code);
  session = await connect();
}
if (!provider.stored.tokens) {
  throw new Error("the client never obtained a token");
}
const tools = (await session.client.listTools()).tools.map((t) => t.name);
const result = await session.client.callTool({ name: tool, arguments: { text } });
const out = result.content.filter((c) => c.type === "text").map((c) => c.text).join("");
console.log(JSON.stringify({ tools, result: out }));
await session.client.close();
