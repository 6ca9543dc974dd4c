//! MCP client config files (Claude Desktop, Claude Code, Cursor, VS Code, Windsurf, Codex, Gemini CLI): parsed into
//! [`ServerSpec`](ad_core::model::ServerSpec)s and rendered back. Pure: the caller reads and writes the files; nothing here runs anything.
//!
//! Variable references (`${VAR}`, `${VAR:-default}`, `${env:VAR}`, `${input:ID}`) never end up in clear in a spec:
//! an `env` value that uses one becomes a secret of the server under that env key; a header or URL that uses one
//! keeps a `${KEY}` placeholder (the proxy substitutes secrets there when it connects) and the value becomes secret
//! `KEY`. A value the environment does not have is reported in [`Imported::needs_input`].
//!
//! Layers, each file using only those above it: `format.rs` (the formats), `types.rs` (what parsing produces and
//! needs), `jsonc.rs` and `vars.rs` (comments, variable references), `entry.rs` (one server entry), `parse.rs` (a
//! whole file), then `render.rs` (specs back into a client's shape) and `clients.rs` (where each client keeps its
//! files, backups, rewriting a file to connect through agent-discover).
//!
//! What this crate must not know: the registry and the storage (the caller applies what was parsed, stores the
//! secrets, and reads and writes the files). It is file formats only.

mod clients;
mod entry;
mod format;
mod jsonc;
mod parse;
mod render;
mod types;
mod vars;

pub use clients::{
    CLIENTS, KnownFile, SELF_NAME, backup_path, connect_rewrite, connect_rewrite_args, known_files,
    latest_backup,
};
pub use format::Format;
pub use parse::{MAX_FILE_BYTES, MAX_SERVERS, map_name, parse, read};
pub use render::{ExportServer, Rendered, Skipped, render};
pub use types::{Env, Imported, ImportedServer, NeedsInput, Renamed};

#[cfg(test)]
mod tests;
