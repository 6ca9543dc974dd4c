//! `agent-discover migrate`: copies a personal (SQLite) registry into a team's (PostgreSQL) one, re-sealing every
//! encrypted value (secrets, users' own values, OAuth records, agent headers) from the personal key to the team's.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use ad_registry::personal::personal_seal;

use crate::secrets::{KEY_FILE, SealKey};
use crate::store::Store;
use crate::store::copy::{CopyReport, Sealed};

/// Where to copy from and to, and how.
#[derive(Debug, Clone)]
pub struct MigrateRequest {
    /// `sqlite:PATH`.
    pub from: String,
    /// `postgres://…` or `postgresql://…`.
    pub to: String,
    /// The personal key file (default: `secrets.key` next to the SQLite file).
    pub from_key_file: Option<PathBuf>,
    /// Replace servers the target already has (default: skip them).
    pub replace: bool,
}

/// `sqlite:PATH` → PATH.
pub fn parse_from(from: &str) -> Result<PathBuf> {
    match from.strip_prefix("sqlite:") {
        Some(p) if !p.is_empty() => Ok(PathBuf::from(p.strip_prefix("//").unwrap_or(p))),
        _ => Err(Error::invalid(
            "--from",
            format!("expected sqlite:PATH, got {from:?}"),
        )),
    }
}

/// Checks the target is a PostgreSQL URL.
pub fn parse_to(to: &str) -> Result<&str> {
    if to.starts_with("postgres://") || to.starts_with("postgresql://") {
        Ok(to)
    } else {
        Err(Error::invalid(
            "--to",
            "expected a postgres://… URL of the team registry",
        ))
    }
}

/// Runs the copy (blocking: call it off the async runtime's workers).
pub fn migrate(req: &MigrateRequest) -> Result<CopyReport> {
    let path = parse_from(&req.from)?;
    let url = parse_to(&req.to)?;
    if !path.is_file() {
        return Err(Error::NotFound {
            what: "source registry",
            name: path.display().to_string(),
        });
    }
    let key_file = req
        .from_key_file
        .clone()
        .unwrap_or_else(|| path.parent().unwrap_or(Path::new(".")).join(KEY_FILE));
    let personal = SealKey::from_file(&key_file)?;
    let team = SealKey::from_env()?;
    let source = Store::open(&path)?;
    let target = Store::open_url(url)
        .map_err(|e| Error::Unavailable(format!("cannot reach the team registry: {e}")))?;
    if let Some((id, key, blob)) = target.any_secret()? {
        let team = team.as_ref().ok_or_else(no_team_key)?;
        if team.open(&crate::secrets::aad(id, &key), &blob).is_none() {
            return Err(Error::invalid(
                "AGENT_DISCOVER_MASTER_KEY",
                "it does not open the team registry's secrets (not the team's key)",
            ));
        }
    }
    let reseal = |what: Sealed<'_>, blob: &[u8]| -> Result<Vec<u8>> {
        let personal = personal.as_ref().ok_or_else(|| {
            Error::invalid(
                "--from-key-file",
                format!(
                    "{} does not exist, and the registry has encrypted values",
                    key_file.display()
                ),
            )
        })?;
        let team = team.as_ref().ok_or_else(no_team_key)?;
        let wrong_key = || {
            Error::invalid(
                "--from-key-file",
                format!(
                    "{} does not open the personal registry's secrets (wrong key)",
                    key_file.display()
                ),
            )
        };
        // A user's own value is sealed with a key derived for that user from each side's master key.
        let mut derived = None;
        let (from, to) = match what {
            Sealed::Secret { from, to, key } => {
                (crate::secrets::aad(from, key), crate::secrets::aad(to, key))
            }
            Sealed::OAuth { from, to, kind } => {
                (crate::oauth::aad(from, kind), crate::oauth::aad(to, kind))
            }
            Sealed::AgentHeaders { id } => {
                let aad = crate::agents::headers_aad(id);
                (aad.clone(), aad)
            }
            Sealed::Personal {
                from,
                to,
                user,
                key,
            } => {
                let (opener, from) = personal_seal(personal, from, user, key)?;
                let (sealer, to) = personal_seal(team, to, user, key)?;
                derived = Some((opener, sealer));
                (from, to)
            }
        };
        let (opener, sealer) = match &derived {
            Some((opener, sealer)) => (opener, sealer),
            None => (personal, team),
        };
        let clear = opener.open(&from, blob).ok_or_else(wrong_key)?;
        sealer.seal(&to, &clear)
    };
    source.copy_into(&target, req.replace, &reseal)
}

fn no_team_key() -> Error {
    Error::invalid(
        "AGENT_DISCOVER_MASTER_KEY",
        "set it to the team registry's master key (64 hex digits) to copy encrypted values",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn from_and_to_syntax() {
        assert_eq!(
            parse_from("sqlite:/a/b.db").unwrap(),
            PathBuf::from("/a/b.db")
        );
        assert_eq!(
            parse_from("sqlite:///a/b.db").unwrap(),
            PathBuf::from("/a/b.db")
        );
        assert!(parse_from("/a/b.db").is_err());
        assert!(parse_from("sqlite:").is_err());
        assert!(parse_to("postgres://u@127.0.0.1/db").is_ok());
        assert!(parse_to("mysql://x").is_err());
    }
}
