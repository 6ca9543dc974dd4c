//! `secrets … --mine --user USER` (a user's own values of a server's secrets), `secrets users NAME` (who has them,
//! never the values) and `secrets shared NAME on|off` (whether users without their own use the shared ones). The
//! CLI works on the database itself, where whoever can open it is an administrator: it acts for the user `--user`
//! (or `AGENT_DISCOVER_USER`) names, as `ISSUER#SUB`, the way the call log shows users.

use std::io::Write;

use super::args::{Mine, SecretsCommand};
use super::common::print_json;
use crate::app::App;

/// Runs what concerns users' own values; any other command is handed back.
pub(super) fn secrets(app: &App, cmd: SecretsCommand) -> anyhow::Result<Option<SecretsCommand>> {
    match cmd {
        SecretsCommand::Set {
            name,
            key,
            value,
            mine,
        } if mine.mine => {
            let user = user(&mine)?;
            let value = value_or_stdin(value)?;
            app.secrets.set_mine(&name, &user, &key, &value)?;
            eprintln!(
                "set {user}'s own `{key}` for `{name}` ({}); their next call runs with it",
                crate::secrets::mask(&value)
            );
        }
        SecretsCommand::Rm { name, key, mine } if mine.mine => {
            let user = user(&mine)?;
            if !app.secrets.delete_mine(&name, &user, &key)? {
                anyhow::bail!("{user} has no own `{key}` for server `{name}`");
            }
            eprintln!("removed {user}'s own `{key}` from `{name}`");
        }
        SecretsCommand::Ls { name, json, mine } if mine.mine => {
            let user = user(&mine)?;
            let list = app.secrets.list_mine(&name, &user)?;
            if json {
                print_json(&serde_json::to_value(&list)?)?;
            } else {
                let mut out = std::io::stdout().lock();
                for s in list {
                    writeln!(out, "{:<32} {:<12} {}", s.key, s.masked_value, s.updated_at)?;
                }
            }
        }
        SecretsCommand::Users { name, json } => {
            let view = app.secrets.personal_keys(&name)?;
            if json {
                print_json(&serde_json::to_value(&view)?)?;
            } else {
                let mut out = std::io::stdout().lock();
                writeln!(
                    out,
                    "users without their own values: {}",
                    if view.allow_shared {
                        "use the shared ones"
                    } else {
                        "refused"
                    }
                )?;
                for h in view.users {
                    writeln!(
                        out,
                        "{:<48} {:<32} {}",
                        h.user,
                        h.keys.join(","),
                        h.updated_at
                    )?;
                }
            }
        }
        SecretsCommand::Shared { name, allow } => {
            let allow = allow == "on";
            app.secrets.set_allows_shared(&name, allow)?;
            eprintln!(
                "users of `{name}` without their own values {}",
                if allow {
                    "use the shared ones"
                } else {
                    "are refused, with how to add theirs"
                }
            );
        }
        other => return Ok(Some(other)),
    }
    Ok(None)
}

fn user(mine: &Mine) -> anyhow::Result<String> {
    match mine.user.as_deref().map(str::trim) {
        Some(u) if !u.is_empty() => Ok(u.to_owned()),
        _ => anyhow::bail!(
            "--mine needs the user: --user ISSUER#SUB (or AGENT_DISCOVER_USER), as the call log names them"
        ),
    }
}

/// VALUE, else a line of stdin (so it stays out of shell history).
pub(super) fn value_or_stdin(value: Option<String>) -> anyhow::Result<String> {
    Ok(match value {
        Some(v) => v,
        None => {
            let mut v = String::new();
            std::io::stdin().read_line(&mut v)?;
            v.trim_end_matches(['\r', '\n']).to_owned()
        }
    })
}
