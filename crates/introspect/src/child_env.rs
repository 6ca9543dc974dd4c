//! The environment a package's process starts from (probe, `--help`): our PATH and locale, an empty HOME, nothing else.

use std::collections::BTreeMap;
use std::path::Path;

/// The environment every child starts from: our PATH and locale, nothing else (no inherited secrets).
pub(crate) fn base_env(home: &Path) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    for key in ["PATH", "LANG", "LC_ALL", "TZ", "SYSTEMROOT"] {
        if let Ok(v) = std::env::var(key) {
            env.insert(key.to_owned(), v);
        }
    }
    // The test harness's marker, so leftovers of test runs can still be found.
    if let Ok(v) = std::env::var("AGENT_DISCOVER_TEST_RUN") {
        env.insert("AGENT_DISCOVER_TEST_RUN".into(), v);
    }
    let home = home.display().to_string();
    env.insert("HOME".into(), home.clone());
    env.insert("USERPROFILE".into(), home.clone());
    env.insert("TMPDIR".into(), home);
    env.insert("NO_COLOR".into(), "1".into());
    env
}

/// Spawns a package's process for an attempt: confined by the sandbox in the attempt's scratch directory `base`
/// (HOME and TMPDIR there, the working directory `isolation.cwd`), or only isolated when the sandbox is off.
pub(crate) fn spawn_confined(
    options: &crate::options::Options,
    base: &Path,
    program: &str,
    args: &[String],
    env: &BTreeMap<String, String>,
    ring: std::sync::Arc<ad_proxy::spawn::StderrRing>,
    isolation: &ad_proxy::spawn::Isolation,
) -> ad_core::error::Result<ad_proxy::spawn::Spawned> {
    match ad_proxy::sandbox::scratch_plan(
        &options.sandbox,
        base,
        &isolation.cwd,
        program,
        args,
        env,
        &options.read,
    )? {
        Some(plan) => {
            ad_proxy::spawn::spawn_sandboxed(&options.guard_exe, program, args, &plan, ring)
        }
        None => ad_proxy::spawn::spawn_with(
            &options.guard_exe,
            program,
            args,
            env,
            ring,
            Some(isolation),
        ),
    }
}
