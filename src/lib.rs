//! agent-discover, the application: the composition root (`app`), the use cases over it (lifecycle, health, the
//! OAuth authorization flow, config import, the registry feed, install, pinning review, approval policies and
//! approvals, sandbox settings, the catalog, code mode's scripts, migrate) and the fronts that adapt them (MCP in `mcp`, REST and WebSocket in `http`, the command line in `cli`).
//!
//! Must not know: SQL (the store crate's), how a child is spawned or framed (the proxy crate's), file formats of MCP
//! clients (clientconfig's), or any test server. The lower crates are re-exported under their module names so tests,
//! benches and examples reach the whole system through one path (`agent_discover::store`, ...).

pub use ad_a2a as a2a;
pub use ad_agents as agents;
pub use ad_clientconfig as clientconfig;
pub use ad_codemode as codemode;
pub use ad_core::{clock, error, events, model, telemetry, trace};
pub use ad_embed as embed;
pub use ad_introspect as introspect;
pub use ad_marketplace as marketplace;
pub use ad_oauth as oauth;
pub use ad_proxy as proxy;
pub use ad_proxy::guard;
pub use ad_registry::{approval, calllog, config, pinning, registry, secrets};
pub use ad_search as search;
pub use ad_store as store;
pub use ad_store::args;

pub mod app;
pub mod approvals;
pub mod authflow;
pub mod catalog;
pub mod cli;
pub mod configimport;
pub mod consent;
pub mod feed;
pub mod find;
pub mod footprint;
pub mod guards;
pub mod health;
pub mod http;
pub mod ident;
pub mod install;
pub mod lifecycle;
pub mod limits;
pub mod mcp;
pub mod migrate;
pub mod otel;
pub mod overrides;
pub mod pins;
pub mod policy;
pub mod profile_overrides;
pub mod profiles;
pub mod sandbox;
pub mod saved_scripts;
pub mod scan_model;
pub mod scripts;
