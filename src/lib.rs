//! agent-discover: an MCP server registry, marketplace and proxy. Modules in reading order, from the bottom layer up.

pub mod app;
pub mod calllog;
pub mod cli;
pub mod clientconfig;
pub mod config;
pub mod configimport;
pub mod embed;
pub mod error;
pub mod events;
pub mod fixture;
pub mod fixture_conformance;
pub mod guard;
pub mod health;
pub mod http;
pub mod install;
pub mod lifecycle;
pub mod marketplace;
pub mod mcp;
pub mod model;
pub mod pinning;
pub mod proxy;
pub mod registry;
pub mod search;
pub mod secrets;
pub mod store;
pub mod telemetry;
