//! `agent-discover skills`: a server's skills (SEP-2640), listed (nothing but `skills/list` is read) or loaded as a
//! host loads one: its `SKILL.md` and then each file of its manifest, every one verified (size, sha256 digest, the
//! frontmatter) before it is printed; a file that fails is not printed and the command fails naming the check.

use std::io::Write;
use std::sync::Arc;

use clap::Subcommand;

use super::common::print_json;
use crate::app::App;

#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// The skills a server serves: name, description and `SKILL.md` URI (no skill file is read).
    List {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Load one skill (by name or `SKILL.md` URI): every file read and verified, then printed.
    Load {
        name: String,
        skill: String,
        #[arg(long)]
        json: bool,
    },
}

pub async fn run(app: &Arc<App>, cmd: SkillsCommand) -> anyhow::Result<()> {
    // The server is started for this command only (its active flag is left as it was).
    let server = match &cmd {
        SkillsCommand::List { name, .. } | SkillsCommand::Load { name, .. } => name.clone(),
    };
    let was_active = app.registry.get(&server)?.active;
    let result = run_started(app, cmd).await;
    if !was_active {
        let id = app.registry.get(&server)?.id;
        app.registry.set_active(id, false, None)?;
    }
    app.proxy.shutdown().await;
    result
}

async fn run_started(app: &Arc<App>, cmd: SkillsCommand) -> anyhow::Result<()> {
    match cmd {
        SkillsCommand::List { name, json } => {
            app.proxy.ensure_active(&name).await?;
            let skills = app.proxy.server_skills(&name).await?;
            if json {
                return print_json(&serde_json::to_value(&skills)?);
            }
            let mut out = std::io::stdout().lock();
            for s in &skills {
                writeln!(
                    out,
                    "{}\t{}\t{}",
                    s.name(),
                    s.uri,
                    s.frontmatter.description
                )?;
            }
            Ok(())
        }
        SkillsCommand::Load { name, skill, json } => {
            app.proxy.ensure_active(&name).await?;
            let loaded = app.proxy.load_skill(&name, &skill).await?;
            if json {
                return print_json(&serde_json::to_value(&loaded)?);
            }
            let mut out = std::io::stdout().lock();
            for f in &loaded.files {
                writeln!(out, "==> {} ({} bytes, verified)", f.uri, f.size)?;
                match &f.text {
                    Some(t) => write!(out, "{t}")?,
                    None => writeln!(out, "(binary)")?,
                }
            }
            Ok(())
        }
    }
}
