//! The JavaScript that runs before every script, in its context: it takes away every way to make code from a string
//! (`eval`, the `Function` constructors, reached directly or through any function's `constructor`) and the stack-trace
//! hooks that hand out the functions on the stack, then defines the script's API (`call`, `tools`, `find_tool`,
//! `find_tools`, `console`) as read-only globals over the host functions, which it keeps in its closure: the script
//! never sees the host object. There is no module loader, so `import()` fails; there is no `require`, `fetch`,
//! `process`, timer, file or socket API to begin with.

/// A function expression: called once with the host object and the tools known at the start
/// (`[[server_ident, tool_ident, exposed_name], ...]`).
pub(crate) const PRELUDE: &str = r#"(function (host, known) {
  "use strict";
  const G = globalThis;
  const hide = (o, k) => Object.defineProperty(o, k, { value: undefined, writable: false, enumerable: false, configurable: false });
  const fixed = (o, k, v) => Object.defineProperty(o, k, { value: v, writable: false, enumerable: true, configurable: false });

  // No code from strings: eval and every Function constructor, however reached.
  delete G.eval;
  for (const F of [Function, (async function () {}).constructor, (function* () {}).constructor, (async function* () {}).constructor]) {
    hide(F.prototype, "constructor");
  }
  delete G.Function;
  // No stack-trace hooks: they would hand out the functions on the stack.
  hide(Error, "prepareStackTrace");
  hide(Error, "captureStackTrace");

  const args = (a) => (a === undefined || a === null ? {} : a);
  const call = async function call(name, a) {
    if (typeof name !== "string") throw new TypeError("call(name, args): name must be a string such as \"server__tool\"");
    return host.call(name, args(a));
  };

  const tools = {};
  const add = (list) => {
    for (const [s, t, exposed] of list) {
      let server = Object.prototype.hasOwnProperty.call(tools, s) ? tools[s] : undefined;
      if (server === undefined) {
        server = {};
        fixed(tools, s, server);
      }
      if (!Object.prototype.hasOwnProperty.call(server, t)) {
        fixed(server, t, async function (a) { return host.call(exposed, args(a)); });
      }
    }
  };
  add(known);

  const find_tool = async function find_tool(query) {
    if (typeof query !== "string") throw new TypeError("find_tool(query): query must be a string");
    const found = await host.find_tool(query);
    add(host.tools());
    return found;
  };
  const find_tools = async function find_tools(intents) {
    if (!Array.isArray(intents) || !intents.every((i) => typeof i === "string")) {
      throw new TypeError("find_tools(intents): intents must be an array of strings");
    }
    const found = await host.find_tools(intents);
    add(host.tools());
    return found;
  };

  const console = {};
  for (const level of ["log", "info", "warn", "error", "debug"]) {
    fixed(console, level, function (...a) { host.log(level, a); });
  }
  Object.freeze(console);

  fixed(G, "call", call);
  fixed(G, "tools", tools);
  fixed(G, "find_tool", find_tool);
  fixed(G, "find_tools", find_tools);
  fixed(G, "console", console);
})"#;

/// The script's body wrapped as an async function called at once, on the first line so line numbers are the
/// script's own.
pub(crate) fn wrap(code: &str) -> String {
    format!("(async () => {{{code}\n}})()")
}
