//! Batch introspection of MCP packages: install each into a cache, start it walled off from our environment, list its
//! tools, prompts and resources through rmcp, tear it down, and file the outcome under one category of a failure
//! taxonomy with the evidence line and a fix hint. A failed package is retried once with placeholder values for the
//! variables and arguments it was found to need (second pass).
//!
//! Stages are timed apart, each under its own limit ([`Limits`]): install (not counted against the protocol),
//! pre-flight, spawn, initialize, tools/list, prompts/list and resources/list, teardown; the whole protocol part is
//! also under a hard limit. Every child runs under the child guard in its own process group with an empty HOME and
//! working directory; teardown ends the group, and the record says how many processes outlived it (0 expected).
//!
//! It must not know the composition root (the root package's `App`), the catalog use case (the root package's
//! `src/catalog.rs`, which fronts the CLI, stores the records and feeds the tool catalog), or SQL: it hands back
//! [`Record`]s, and storing them is the caller's job.

mod category;
mod child_env;
mod classify;
mod formats;
mod help;
mod install;
mod messages;
mod options;
mod placeholders;
mod probe;
mod retry;
pub mod targets;
mod types;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use serde::{Deserialize, Serialize};

pub use category::{Category, Diagnosis};
pub use options::{Limits, Options, default_concurrency};
pub use placeholders::Placeholder;
pub use probe::{IntrospectedTool, ServerInfo};
pub use targets::{Ecosystem, Target};
pub use types::{Needs, StageTime, clip};

/// The outcome of the first attempt when a second one was made.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FirstPass {
    pub category: Category,
    pub evidence: String,
}

/// Everything learned about one package.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// `npm:<name>`, `pypi:<name>` or `command:<program>`.
    pub key: String,
    pub ecosystem: Ecosystem,
    pub package: String,
    /// The installed version (or the requested one when install failed).
    pub version: Option<String>,
    /// The package's own description (npm `description`, PyPI `Summary`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    pub category: Category,
    pub evidence: String,
    pub hint: String,
    /// 1, or 2 when the second pass ran.
    pub pass: u8,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_pass: Option<FirstPass>,
    /// The placeholder values of the second pass (never real secrets). When the second pass enumerated the server,
    /// these are what unlocked it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub placeholders: Vec<Placeholder>,
    /// When the second pass enumerated a server that the first did not: where the placeholders that unlocked it were
    /// found (`help` for a server rescued by its `--help`, `usage`, `stderr`, `readme`, `server.json`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub rescued_by: Vec<String>,
    /// The package is a library, not a program: no npm `bin`, no console script. It cannot be an MCP server run by
    /// npx or uvx, so batch figures may exclude it (category `no_entry_point`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub library: bool,
    #[serde(default)]
    pub needs: Needs,
    /// The command that was started (after install).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerInfo>,
    #[serde(default)]
    pub tools: Vec<IntrospectedTool>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<usize>,
    /// Oddities that did not decide the category (`stdout_noise`, `untyped_schema`, `engines`, ...).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flags: Vec<String>,
    pub stages: Vec<StageTime>,
    /// Processes of the package still alive after teardown (across both passes).
    pub left_behind: usize,
    pub duration_ms: u64,
    /// The official registry's name when the target came from there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registry_name: Option<String>,
    /// The runtime that ran the package's last attempt (`{"kind":"node","version":"22.23.3","source":"cache"}`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<ad_proxy::runtime::RuntimeInfo>,
}

impl Record {
    fn failed(
        target: &Target,
        diagnosis: Diagnosis,
        stages: Vec<StageTime>,
        started: Instant,
    ) -> Record {
        Record {
            key: target.key(),
            ecosystem: target.ecosystem,
            package: target.package.clone(),
            version: target.version.clone(),
            description: None,
            category: diagnosis.category,
            evidence: diagnosis.evidence,
            hint: diagnosis.hint,
            pass: 1,
            first_pass: None,
            placeholders: Vec::new(),
            rescued_by: Vec::new(),
            library: diagnosis.library,
            needs: diagnosis.needs,
            launch: None,
            server: None,
            tools: Vec::new(),
            prompts: None,
            resources: None,
            flags: Vec::new(),
            stages,
            left_behind: 0,
            duration_ms: started.elapsed().as_millis() as u64,
            registry_name: target.registry_name.clone(),
            runtime: None,
        }
    }
}

/// Progress of a batch, for a progress bar.
#[derive(Debug, Clone)]
pub enum Progress {
    Started {
        key: String,
    },
    Finished {
        record: Box<Record>,
        done: usize,
        total: usize,
    },
}

/// Introspects every target, `options.concurrency` at a time; `on_progress` sees each start and each record as it
/// is finished (in completion order). Returns the records in completion order.
pub async fn run_batch(
    targets: Vec<Target>,
    options: &Options,
    mut on_progress: impl FnMut(Progress),
) -> Vec<Record> {
    use futures::StreamExt;
    let total = targets.len();
    let options = Arc::new(options.clone());
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let mut stream = futures::stream::iter(targets.into_iter().map(|t| {
        let options = options.clone();
        let tx = tx.clone();
        async move {
            let _ = tx.send(t.key());
            introspect(&t, &options).await
        }
    }))
    .buffer_unordered(options.concurrency.max(1));
    let mut records = Vec::with_capacity(total);
    loop {
        tokio::select! {
            biased;
            Some(key) = rx.recv() => on_progress(Progress::Started { key }),
            next = stream.next() => match next {
                Some(record) => {
                    while let Ok(key) = rx.try_recv() {
                        on_progress(Progress::Started { key });
                    }
                    records.push(record.clone());
                    on_progress(Progress::Finished { record: Box::new(record), done: records.len(), total });
                }
                None => break,
            },
        }
    }
    records
}

/// Introspects one target: install, pre-flight, first attempt, and (when it failed for a reason placeholders may
/// lift) a second attempt.
pub async fn introspect(target: &Target, options: &Options) -> Record {
    let started = Instant::now();
    let mut stages = Vec::new();
    let mut installed = match install::install(target, options, &mut stages).await {
        Ok(i) => i,
        Err(diagnosis) => return Record::failed(target, diagnosis, stages, started),
    };
    let scratch = match Scratch::new(&options.cache_dir) {
        Ok(s) => s,
        Err(e) => {
            let d = Diagnosis::new(
                Category::CrashedOnStart,
                format!("cannot create a scratch directory: {e}"),
                "check that the cache directory is writable",
            );
            return Record::failed(target, d, stages, started);
        }
    };
    let mut env = target.env.clone();
    // An npm package runs with a Node its `engines.node` accepts (the system's, or one installed in the cache).
    let mut runtime = None;
    let mut runtime_flags = Vec::new();
    if target.ecosystem == Ecosystem::Npm
        && let Some(c) = ad_proxy::runtime::choose(
            &options.runtimes,
            options.system_node.as_deref(),
            installed.engines.as_deref(),
            false,
        )
        .await
    {
        c.apply(&mut env);
        if c.info.source == "cache" {
            runtime_flags.push(format!(
                "node runtime: {} from the cache (engines.node {})",
                c.info.version,
                installed.engines.as_deref().unwrap_or("?")
            ));
        }
        runtime = Some(c);
    }
    let mut attempt = probe::run(
        &installed.launch,
        &target.args,
        &env,
        &scratch.path,
        options,
        "",
    )
    .await;
    stages.extend(attempt.stages.iter().cloned());
    let mut diagnosis = classify::diagnose(&attempt);
    let mut left_behind = attempt.left_behind;
    let mut flags = installed.flags.clone();
    // Install scripts were skipped: when the start-up failure is one they explain, run them and start again.
    if !diagnosis.category.is_ok()
        && let Some(dir) = &installed.scripts_skipped_in
    {
        let lines: Vec<&str> = attempt
            .stderr
            .iter()
            .chain(attempt.stdout_noise.iter())
            .map(String::as_str)
            .collect();
        if let Some(why) = install::scripts_explain(&lines) {
            if let Err(d) = install::run_scripts(dir, options, &mut stages, &why).await {
                let mut r = Record::failed(target, d, stages, started);
                r.left_behind = left_behind;
                r.flags = vec![format!("started without install scripts: {why}")];
                return r;
            }
            flags.push(format!("install scripts run: {why}"));
            let again = probe::run(
                &installed.launch,
                &target.args,
                &env,
                &scratch.path,
                options,
                "",
            )
            .await;
            attempt = followed(again, "after scripts", &mut stages, &mut left_behind);
            diagnosis = classify::diagnose(&attempt);
        }
    }
    // It failed the way an old Node fails: once more with a newer one.
    if !diagnosis.category.is_ok()
        && ad_proxy::runtime::fetch_enabled()
        && runtime.as_ref().is_some_and(|r| r.info.source == "system")
        && let Some(sign) = ad_proxy::runtime::too_old_signature(
            attempt
                .stderr
                .iter()
                .chain(attempt.stdout_noise.iter())
                .map(String::as_str),
        )
        && let Some(c) = ad_proxy::runtime::choose(
            &options.runtimes,
            options.system_node.as_deref(),
            installed.engines.as_deref(),
            true,
        )
        .await
        && c.info.source == "cache"
    {
        c.apply(&mut env);
        runtime_flags.push(format!(
            "node runtime: started again with {} from the cache ({sign})",
            c.info.version
        ));
        let again = probe::run(
            &installed.launch,
            &target.args,
            &env,
            &scratch.path,
            options,
            "n",
        )
        .await;
        attempt = followed(again, "newer node", &mut stages, &mut left_behind);
        diagnosis = classify::diagnose(&attempt);
        runtime = Some(c);
    }
    // It failed on an ES module import named without its `.js`: once more with a resolver that adds it (kept for the
    // second pass).
    if !diagnosis.category.is_ok()
        && target.ecosystem == Ecosystem::Npm
        && let Some(module) = ad_proxy::esm::extensionless_import(output_lines(&attempt))
    {
        let node_options = ad_proxy::esm::node_options(env.get("NODE_OPTIONS").map(String::as_str));
        env.insert("NODE_OPTIONS".into(), node_options);
        runtime_flags.push(format!(
            "esm resolver: an import without its extension ({module}.js)"
        ));
        let again = probe::run(
            &installed.launch,
            &target.args,
            &env,
            &scratch.path,
            options,
            "e",
        )
        .await;
        attempt = followed(again, "esm resolver", &mut stages, &mut left_behind);
        diagnosis = classify::diagnose(&attempt);
    }
    // It failed inside a dependency that moved on since the project's release: again with that day's dependencies.
    // Tried once at most (a failed dated install is not tried again after pass 2).
    let mut dated = target.ecosystem == Ecosystem::Pypi
        && !diagnosis.category.is_ok()
        && install::drift_signature(output_lines(&attempt)).is_some();
    if dated
        && redo_dated(
            target,
            &mut installed,
            &attempt,
            options,
            &mut stages,
            &mut flags,
        )
        .await
    {
        let again = probe::run(
            &installed.launch,
            &target.args,
            &env,
            &scratch.path,
            options,
            "d",
        )
        .await;
        attempt = followed(again, "dated dependencies", &mut stages, &mut left_behind);
        diagnosis = classify::diagnose(&attempt);
    }
    flags.extend(runtime_flags);
    flags.extend(attempt.flags.iter().cloned());
    let mut record = Record {
        key: target.key(),
        ecosystem: target.ecosystem,
        package: installed.name.clone(),
        version: installed.version.clone().or_else(|| target.version.clone()),
        description: installed.description.clone(),
        category: diagnosis.category,
        evidence: String::new(),
        hint: String::new(),
        pass: 1,
        first_pass: None,
        placeholders: Vec::new(),
        rescued_by: Vec::new(),
        library: false,
        needs: Needs::default(),
        launch: Some(
            std::iter::once(installed.launch.clone())
                .chain(target.args.iter().cloned())
                .collect(),
        ),
        server: attempt.server.clone(),
        tools: attempt.tools.clone(),
        prompts: attempt.prompts,
        resources: attempt.resources,
        flags: Vec::new(),
        stages: Vec::new(),
        left_behind: 0,
        duration_ms: 0,
        registry_name: target.registry_name.clone(),
        runtime: match target.ecosystem {
            Ecosystem::Pypi => {
                ad_proxy::runtime::python_beside(std::path::Path::new(&installed.launch)).await
            }
            _ => runtime.as_ref().map(|c| c.info.clone()),
        },
    };
    let mut needs = diagnosis.needs.clone();
    if options.second_pass && diagnosis.category.retry_with_placeholders() {
        // A server that wants arguments (or a stdio switch) is asked for its `--help` first.
        let help = if diagnosis.category.asks_for_help() {
            let (text, st) = help::run(
                &installed.launch,
                &target.args,
                &scratch.path,
                options,
                env.get("PATH").map(String::as_str),
            )
            .await;
            stages.push(st);
            // No help in time (a slow interpreter on a loaded machine): the usage the failure printed.
            text.map(|t| help::parse(&t))
                .filter(|h| !h.is_empty())
                .or_else(|| {
                    let lines = output_lines(&attempt).join("\n");
                    Some(help::parse(&lines)).filter(|h| !h.is_empty())
                })
        } else {
            None
        };
        if let Some(usage) = help.as_ref().and_then(|h| h.usage.as_ref()) {
            let mut u = format!("help: {usage}");
            clip(&mut u, 300);
            flags.push(u);
        }
        let mut plan = placeholders::plan(
            target,
            &installed,
            &attempt,
            &diagnosis,
            help.as_ref(),
            &scratch.path,
        );
        needs = merge_needs(&needs, &plan.needs);
        if !plan.placeholders.is_empty() {
            // Values in the format the first attempt's messages ask for (`Must start with 'sk_'`).
            let notes = formats::apply(&output_lines(&attempt), &mut plan.placeholders, false);
            if !notes.is_empty() {
                flags.push(format!("placeholder formats: {}", notes.join(", ")));
            }
            let mut formatted = false;
            let mut third = false;
            loop {
                for p in plan
                    .placeholders
                    .iter()
                    .filter(|p| p.kind == placeholders::Kind::Env)
                {
                    env.insert(p.name.clone(), p.value.clone());
                }
                let mut args = target.args.clone();
                args.extend(plan.placeholders.iter().flat_map(Placeholder::argv));
                let (tag, label) = match (third, formatted) {
                    (true, _) => ("3", "pass 3"),
                    (false, true) => ("2f", "pass 2, formats"),
                    (false, false) => ("2", "pass 2"),
                };
                let second =
                    probe::run(&installed.launch, &args, &env, &scratch.path, options, tag).await;
                stages.extend(second.stages.iter().map(|s| StageTime {
                    stage: format!("{} ({label})", s.stage),
                    ..s.clone()
                }));
                left_behind += second.left_behind;
                let second_diagnosis = classify::diagnose(&second);
                // The placeholders' format was refused: once more with values in the format asked for.
                if !formatted && !second_diagnosis.category.is_ok() {
                    let notes =
                        formats::apply(&output_lines(&second), &mut plan.placeholders, true);
                    if !notes.is_empty() {
                        flags.push(format!(
                            "placeholder formats (after pass 2): {}",
                            notes.join(", ")
                        ));
                        formatted = true;
                        continue;
                    }
                }
                // The arguments it wanted got it further, to a dependency that moved on: again with dated ones.
                if !dated
                    && !second_diagnosis.category.is_ok()
                    && redo_dated(
                        target,
                        &mut installed,
                        &second,
                        options,
                        &mut stages,
                        &mut flags,
                    )
                    .await
                {
                    dated = true;
                    continue;
                }
                // It still says what it needs: options its messages name, a configuration its schema refused.
                if !third && !second_diagnosis.category.is_ok() {
                    let (notes, st) = retry::after_pass2(
                        &installed.launch,
                        installed.readme.as_deref(),
                        &target.args,
                        &output_lines(&second),
                        &mut plan.placeholders,
                        &scratch.path,
                        options,
                        env.get("PATH").map(String::as_str),
                    )
                    .await;
                    stages.extend(st.map(|s| StageTime {
                        stage: format!("{} (pass 3)", s.stage),
                        ..s
                    }));
                    if !notes.is_empty() {
                        flags.push(format!("pass 3: {}", notes.join(", ")));
                        third = true;
                        continue;
                    }
                }
                record.first_pass = Some(FirstPass {
                    category: diagnosis.category,
                    evidence: diagnosis.evidence.clone(),
                });
                record.pass = 2;
                record.placeholders = plan.placeholders.clone();
                needs = merge_needs(&needs, &second_diagnosis.needs);
                flags.extend(second.flags.iter().map(|f| format!("{f} (pass 2)")));
                record.server = second.server.clone();
                record.tools = second
                    .tools
                    .iter()
                    .cloned()
                    .map(|mut t| {
                        t.under_placeholders = true;
                        t
                    })
                    .collect();
                record.prompts = second.prompts;
                record.resources = second.resources;
                record.launch = Some(
                    std::iter::once(installed.launch.clone())
                        .chain(args.iter().cloned())
                        .collect(),
                );
                if second_diagnosis.category.is_ok() {
                    let mut sources: Vec<String> = record
                        .placeholders
                        .iter()
                        .map(|p| p.source.clone())
                        .collect();
                    sources.sort();
                    sources.dedup();
                    record.rescued_by = sources;
                }
                diagnosis = second_diagnosis;
                break;
            }
        }
    }
    record.category = diagnosis.category;
    record.evidence = diagnosis.evidence;
    record.hint = diagnosis.hint;
    record.needs = needs;
    record.flags = flags;
    record.stages = stages;
    record.left_behind = left_behind;
    record.duration_ms = started.elapsed().as_millis() as u64;
    drop(scratch);
    record
}

/// A PyPI project whose `attempt` failed inside a dependency newer than itself is installed again with its release
/// day's dependencies (`installed` replaced); false when that does not apply or the install failed (said in `flags`).
async fn redo_dated(
    target: &Target,
    installed: &mut types::Installed,
    attempt: &probe::Attempt,
    options: &Options,
    stages: &mut Vec<StageTime>,
    flags: &mut Vec<String>,
) -> bool {
    if target.ecosystem != Ecosystem::Pypi {
        return false;
    }
    let Some(sign) = install::drift_signature(output_lines(attempt)) else {
        return false;
    };
    let Some(version) = installed.version.clone() else {
        return false;
    };
    match install::reinstall_dated(target, &version, options, stages).await {
        Some(Ok(i)) => {
            for f in &i.flags {
                if !flags.contains(f) {
                    flags.push(if f.starts_with("dependencies as of") {
                        format!("{f} (after `{sign}`)")
                    } else {
                        f.clone()
                    });
                }
            }
            *installed = i;
            true
        }
        Some(Err(d)) => {
            flags.push(format!(
                "dependencies as of the release: the install failed ({})",
                d.evidence
            ));
            false
        }
        None => false,
    }
}

/// What an attempt wrote on stderr and as noise on stdout.
fn output_lines(attempt: &probe::Attempt) -> Vec<&str> {
    attempt
        .stderr
        .iter()
        .chain(attempt.stdout_noise.iter())
        .map(String::as_str)
        .collect()
}

fn merge_needs(a: &Needs, b: &Needs) -> Needs {
    let mut env = a.env.clone();
    for n in &b.env {
        if !env.contains(n) {
            env.push(n.clone());
        }
    }
    let mut args = a.args.clone();
    for n in &b.args {
        if !args.contains(n) {
            args.push(n.clone());
        }
    }
    Needs { env, args }
}

/// A per-package scratch directory (HOME, working directory, placeholder paths), removed when dropped.
struct Scratch {
    path: PathBuf,
}

impl Scratch {
    fn new(cache_dir: &Path) -> std::io::Result<Scratch> {
        use std::sync::atomic::{AtomicU64, Ordering};
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path = cache_dir
            .join("scratch")
            .join(format!("{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)?;
        Ok(Scratch { path })
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A further attempt's outcome in place of the last: its stages recorded with `why` (`start (newer node)`), its
/// processes left behind counted.
fn followed(
    again: probe::Attempt,
    why: &str,
    stages: &mut Vec<StageTime>,
    left_behind: &mut usize,
) -> probe::Attempt {
    stages.extend(again.stages.iter().map(|s| StageTime {
        stage: format!("{} ({why})", s.stage),
        ..s.clone()
    }));
    *left_behind += again.left_behind;
    again
}
