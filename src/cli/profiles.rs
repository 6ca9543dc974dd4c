//! `agent-discover profiles`: create, list, show, change and remove profiles (named sets of servers and tool globs,
//! each served at `/mcp/profiles/NAME` and by `mcp --profile NAME`), and carry them to another registry as a file
//! (JSON, or TOML for a `.toml` path). Over the same `App` methods as the REST routes and the `registry` tool.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use clap::Subcommand;
use serde_json::Value;

use super::common::print_json;
use crate::app::App;
use crate::profiles::{FileFormat, Profile, ProfileChange, ProfileFile};

#[derive(Debug, Subcommand)]
pub enum ProfilesCommand {
    /// Create a profile from servers (every tool of each) and tool globs over SERVER__TOOL names (`*`, `?`).
    Create {
        name: String,
        /// A server whose every tool, resource and prompt the profile holds (repeatable).
        #[arg(long = "server", value_name = "NAME")]
        servers: Vec<String>,
        /// A glob over SERVER__TOOL names, e.g. `github__*_issue` (repeatable).
        #[arg(long = "tool", value_name = "GLOB")]
        tools: Vec<String>,
        /// What the profile is for.
        #[arg(long)]
        description: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// List the profiles.
    List {
        #[arg(long)]
        json: bool,
    },
    /// A profile's servers and globs, the tools it holds among the known ones, and how to connect to it.
    Show {
        name: String,
        #[arg(long)]
        json: bool,
    },
    /// Change a profile: add or remove servers and tool globs, or set its description.
    Set {
        name: String,
        /// Add a server (repeatable).
        #[arg(long = "add-server", value_name = "NAME")]
        add_servers: Vec<String>,
        /// Remove a server (repeatable).
        #[arg(long = "remove-server", value_name = "NAME")]
        remove_servers: Vec<String>,
        /// Add a tool glob (repeatable).
        #[arg(long = "add-tool", value_name = "GLOB")]
        add_tools: Vec<String>,
        /// Remove a tool glob (repeatable).
        #[arg(long = "remove-tool", value_name = "GLOB")]
        remove_tools: Vec<String>,
        #[arg(long)]
        description: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Remove a profile (its endpoint answers 404 from then on).
    Remove { name: String },
    /// Write profiles to a file (every profile without names): JSON, or TOML when the file ends in `.toml`; stdout
    /// without `--output` (JSON unless `--format toml`).
    Export {
        names: Vec<String>,
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
        /// `json` or `toml` (default: from the file name).
        #[arg(long)]
        format: Option<String>,
    },
    /// Read profiles from an export file. Every profile is checked (its servers must be registered) before any is
    /// stored; an existing profile is an error unless `--replace`.
    Import {
        file: PathBuf,
        #[arg(long)]
        replace: bool,
        /// `json` or `toml` (default: from the file name).
        #[arg(long)]
        format: Option<String>,
    },
}

pub async fn run(app: &App, cmd: ProfilesCommand) -> anyhow::Result<()> {
    match cmd {
        ProfilesCommand::Create {
            name,
            servers,
            tools,
            description,
            json,
        } => {
            let p = app.create_profile(Profile {
                name,
                description: description.unwrap_or_default(),
                servers,
                tools,
                overrides: Value::Null,
            })?;
            show(app, &p.name, json)
        }
        ProfilesCommand::List { json } => {
            let all = app.profiles()?;
            if json {
                return print_json(&serde_json::json!({"profiles": all}));
            }
            let mut out = std::io::stdout().lock();
            if all.is_empty() {
                eprintln!(
                    "no profiles yet: `agent-discover profiles create NAME --server S --tool 'S__*'`"
                );
            }
            for p in all {
                writeln!(
                    out,
                    "{}\tservers: {}\ttools: {}\t{}",
                    p.name,
                    p.servers.join(","),
                    p.tools.join(","),
                    p.description
                )?;
            }
            Ok(())
        }
        ProfilesCommand::Show { name, json } => show(app, &name, json),
        ProfilesCommand::Set {
            name,
            add_servers,
            remove_servers,
            add_tools,
            remove_tools,
            description,
            json,
        } => {
            if add_servers.is_empty()
                && remove_servers.is_empty()
                && add_tools.is_empty()
                && remove_tools.is_empty()
                && description.is_none()
            {
                anyhow::bail!(
                    "nothing to change: give --add-server, --remove-server, --add-tool, --remove-tool or --description"
                );
            }
            app.change_profile(
                &name,
                ProfileChange {
                    description,
                    add_servers,
                    remove_servers,
                    add_tools,
                    remove_tools,
                    ..ProfileChange::default()
                },
            )?;
            show(app, &name, json)
        }
        ProfilesCommand::Remove { name } => {
            if !app.remove_profile(&name)? {
                anyhow::bail!("no profile `{name}`");
            }
            eprintln!("removed profile {name}");
            Ok(())
        }
        ProfilesCommand::Export {
            names,
            output,
            format,
        } => {
            let format = match (&format, &output) {
                (Some(f), _) => FileFormat::parse(f)?,
                (None, Some(path)) => FileFormat::of_path(path),
                (None, None) => FileFormat::Json,
            };
            let file = app.export_profiles(&names)?;
            let text = file.render(format)?;
            match output {
                Some(path) => {
                    std::fs::write(&path, text)
                        .with_context(|| format!("cannot write {}", path.display()))?;
                    eprintln!(
                        "exported {} profiles to {}",
                        file.profiles.len(),
                        path.display()
                    );
                }
                None => std::io::stdout().lock().write_all(text.as_bytes())?,
            }
            Ok(())
        }
        ProfilesCommand::Import {
            file,
            replace,
            format,
        } => {
            let format = match format {
                Some(f) => FileFormat::parse(&f)?,
                None => FileFormat::of_path(&file),
            };
            let text = std::fs::read_to_string(&file)
                .with_context(|| format!("cannot read {}", file.display()))?;
            let names = app.import_profiles(ProfileFile::parse(&text, format)?, replace)?;
            eprintln!("imported {} profiles: {}", names.len(), names.join(", "));
            Ok(())
        }
    }
}

fn show(app: &App, name: &str, json: bool) -> anyhow::Result<()> {
    let v = app.show_profile(name)?;
    if json {
        return print_json(&v);
    }
    let mut out = std::io::stdout().lock();
    let list = |v: &Value| {
        v.as_array()
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .collect::<Vec<_>>()
                    .join(", ")
            })
            .unwrap_or_default()
    };
    writeln!(out, "profile:  {}", v["name"].as_str().unwrap_or_default())?;
    if let Some(d) = v["description"].as_str() {
        writeln!(out, "about:    {d}")?;
    }
    writeln!(out, "servers:  {}", list(&v["servers"]))?;
    writeln!(out, "globs:    {}", list(&v["tools"]))?;
    writeln!(out, "tools:    {}", list(&v["known_tools"]))?;
    writeln!(
        out,
        "http:     {}",
        v["endpoint"].as_str().unwrap_or_default()
    )?;
    writeln!(
        out,
        "stdio:    agent-discover {}",
        list(&v["stdio"]).replace(", ", " ")
    )?;
    Ok(())
}
