//! An agent's id: made from its card's name, checked as a server name is; the label its stored headers are sealed
//! under.

use ad_core::error::{Error, Result};

/// Makes a card name into an agent id (`^[a-zA-Z0-9][a-zA-Z0-9._-]{0,63}$`).
pub(super) fn id_from_name(name: &str) -> String {
    let s: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect();
    let s = s.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    s.chars()
        .take(64)
        .collect::<String>()
        .trim_end_matches(['-', '.'])
        .to_owned()
}

pub(super) fn check_id(id: &str) -> Result<()> {
    id.parse::<ad_core::model::ServerName>()
        .map(|_| ())
        .map_err(|_| {
            Error::invalid(
                "agent id",
                format!(
                    "{:?}: 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit",
                    ad_core::model::truncate_for_message(id)
                ),
            )
        })
}

pub fn headers_aad(id: &str) -> String {
    format!("agent:{id}:headers")
}
