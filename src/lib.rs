//! agent-discover: an MCP server registry, marketplace and proxy. Modules in reading order, from the bottom layer up.

pub mod app;
pub mod cli;
pub mod config;
pub mod error;
pub mod events;
pub mod fixture;
pub mod mcp;
pub mod model;
pub mod registry;
pub mod store;
