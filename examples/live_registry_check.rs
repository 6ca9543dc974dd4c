//! Live check of the marketplace against the npm and PyPI registries this machine's npm and pip are configured for.
//! Not part of `cargo test` (tests talk only to 127.0.0.1); scripts/test.sh runs it: `cargo run --example live_registry_check`.
//!
//! No registry address is written here: they come from `AGENT_DISCOVER_*_URL`, `config.json`, or npm's and pip's
//! own configuration, exactly as in production. The official MCP registry is not contacted.

use std::collections::BTreeMap;

use agent_discover::marketplace::{
    InstallMethod, MarketSource, Marketplace, MarketplaceConfig, plan_install,
};

/// A version as registries publish them: digits and dots, maybe a pre-release tail.
fn looks_like_version(v: &str) -> bool {
    let core = v.split(['-', '+']).next().unwrap_or("");
    !core.is_empty()
        && core
            .split('.')
            .all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

#[tokio::main]
async fn main() {
    let mut config = MarketplaceConfig::load(None).expect("marketplace configuration");
    config.ask_package_managers = true;
    config.cache_db = None;
    let m = Marketplace::new(config).expect("marketplace");

    let npm_base = m
        .address(MarketSource::Npm)
        .await
        .expect("npm registry address from npm's configuration");
    let pypi_base = m
        .address(MarketSource::Pypi)
        .await
        .expect("PyPI address from pip's configuration");
    println!("npm registry: {npm_base}\nPyPI JSON API base: {pypi_base}");

    let everything = m
        .lookup("npm:@modelcontextprotocol/server-everything")
        .await
        .expect("npm registry reachable")
        .expect("@modelcontextprotocol/server-everything exists");
    let version = everything.version.clone().unwrap_or_default();
    println!(
        "npm: {} {version} ({:?})",
        everything.name, everything.repository
    );
    assert_eq!(everything.name, "@modelcontextprotocol/server-everything");
    assert_eq!(everything.source, MarketSource::Npm);
    assert!(
        looks_like_version(&version),
        "npm latest version {version:?}"
    );
    let plan = plan_install(&everything, &BTreeMap::new()).expect("plan");
    assert_eq!(plan.method, InstallMethod::Npx);
    assert_eq!(
        plan.launch.args,
        [
            "-y".to_owned(),
            format!("@modelcontextprotocol/server-everything@{version}")
        ]
    );

    let time = m
        .lookup("pypi:mcp-server-time")
        .await
        .expect("PyPI reachable")
        .expect("mcp-server-time exists");
    let version = time.version.clone().unwrap_or_default();
    println!("pypi: {} {version} ({:?})", time.name, time.repository);
    assert_eq!(time.name, "mcp-server-time");
    assert_eq!(time.source, MarketSource::Pypi);
    assert!(looks_like_version(&version), "PyPI version {version:?}");
    assert!(!time.description.is_empty());
    let plan = plan_install(&time, &BTreeMap::new()).expect("plan");
    assert_eq!(plan.launch.args, [format!("mcp-server-time=={version}")]);
    println!("live registry check: ok");
}
