//! The installer: turns a marketplace entry (server.json packages/remotes) into a launch config, and warms or probes the tools it needs.
//!
//! Rules (the server.json schema, read where it is precise, decided here where it is not):
//! - Method order: npm (`npx`), pypi (`uvx`), oci (`docker`), then remotes, unless the caller asks for one.
//! - `npx -y <runtimeArguments> <id>@<version> <packageArguments>`; `uvx <runtimeArguments> <id>==<version>
//!   <packageArguments>`; `docker run -i --rm -e VAR… <runtimeArguments> <image> <packageArguments>` (the image gets
//!   `:<version>` unless it already has a tag or digest; `-e VAR` passes values through the environment so secrets are
//!   never on the command line).
//! - Arguments: positional -> the value; named -> `--flag value` as two words. The flag is taken as written when it
//!   has dashes (current schema) and gets `--` when it has none (2025-07 entries). The joined form `--flag=value` is
//!   used when the schema entry writes the name with a trailing `=`, or when the value starts with `-` (so it cannot
//!   be read as another flag). A named argument of format `boolean` is a bare flag: present for `true`, absent for
//!   `false`. `isRepeated` arguments get one value (a single input cannot carry several).
//! - Values: a fixed `value` is used as is (the schema says users do not change it); otherwise the input named after
//!   the item (env/header name, flag with or without dashes, positional `valueHint`), then `default`. `{var}`
//!   placeholders are filled from the inputs, then the item's `variables` (value, then default); an undeclared
//!   placeholder stays as written, except in a URL, where it is reported missing.
//! - Secrets: secret environment variables go to `plan.secrets` only (the caller's secret store puts them in the
//!   child's environment). A secret header goes to `plan.secrets` under its name and the header becomes
//!   `${Name}`; a secret URL/header variable becomes `${var}` with its value in `plan.secrets` (the proxy fills
//!   `${…}` in URLs and headers from secrets at connect time). A non-secret value built from a secret variable is
//!   itself treated as secret.
//! - Required values that are missing (no input, no default) are listed in `plan.missing`, never guessed.
//! - Identifiers match `^[@a-zA-Z0-9._/-]+$` (OCI also `:`), never start with `-`, never contain `..`; versions
//!   match `^[A-Za-z0-9][A-Za-z0-9._+-]*$`. Nothing is run through a shell.
//!
//! Parts, each a layer over the one before: `types` (the plan and launch config handed out), `validate`
//! (identifiers, versions, names and values checked before use), `resolve` (filling values from the inputs,
//! defaults and `{var}` templates), `plan` (choosing the method and building the launch config), `warm` (running the
//! package managers: warming a cache ahead of the first start, probing the tools' versions).

mod plan;
mod resolve;
mod types;
mod validate;
mod warm;

pub use plan::{plan_install, plan_install_with, suggest_name};
pub use types::{InputKind, InstallPlan, LaunchConfig, MissingInput, Transport};
pub use warm::{
    PROBE_TIMEOUT, Prereqs, WARM_TIMEOUT, probe_prereqs, warm_cache, warm_cache_with_timeout,
};
