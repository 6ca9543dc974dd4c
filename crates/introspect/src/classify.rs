//! The failure taxonomy: one category per attempt, with the line that shows it (evidence), a fix hint, and what the
//! server was found to need (variable names from its messages, the usage text's arguments).
//!
//! Rules, in order, for a process that ended or never answered: credentials asked for, then usage text (arguments),
//! then a missing file, path or URL (config), then network errors, then a plain crash. A server that wrote only
//! non-JSON text on stdout and never answered is `non_json_stdout`.

use crate::category::{Category, Diagnosis};
use crate::messages::{
    asks_for_credentials, credential_names, is_config, is_network, is_usage, last_meaningful,
    mentions_version, named_argument, usage_args, usage_options,
};
use crate::probe::{Attempt, End};

/// Files an attempt under one category.
pub(crate) fn diagnose(a: &Attempt) -> Diagnosis {
    let stderr: Vec<&str> = a.stderr.iter().map(String::as_str).collect();
    match &a.end {
        End::Listed => {
            let n = a.tools.len();
            if n > 0 {
                Diagnosis::new(
                    Category::Ok,
                    format!(
                        "{n} tool(s) listed{}",
                        a.server
                            .as_ref()
                            .map(|s| format!(
                                " by {} {} (protocol {})",
                                s.name, s.version, s.protocol_version
                            ))
                            .unwrap_or_default()
                    ),
                    "nothing to fix",
                )
            } else {
                Diagnosis::new(
                    Category::OkZeroTools,
                    format!(
                        "tools/list answered with no tools{}{}",
                        a.prompts
                            .map(|p| format!("; {p} prompt(s)"))
                            .unwrap_or_default(),
                        a.resources
                            .map(|r| format!("; {r} resource(s)"))
                            .unwrap_or_default()
                    ),
                    "the server may add tools once configured (watch for tools/list_changed) or offer only prompts and resources",
                )
            }
        }
        End::SpawnFailed(msg) => Diagnosis::new(
            Category::CrashedOnStart,
            msg.clone(),
            "agent-discover could not start the child guard; check the installation",
        ),
        End::Exited | End::HardTimeout(_) => {
            if a.exit_code == Some(127) && stderr.iter().any(|l| l.contains("cannot start")) {
                return Diagnosis::new(
                    Category::NoEntryPoint,
                    last_meaningful(&stderr).unwrap_or("exit code 127 (command not found)"),
                    "the command does not exist or is not executable",
                );
            }
            from_messages(a, &stderr).unwrap_or_else(|| {
                if a.noise_count > 0 && a.json_lines == 0 {
                    return non_json(a);
                }
                let cause = a.exit.clone().unwrap_or_else(|| "ended".into());
                let line = last_meaningful(&stderr)
                    .or_else(|| a.stdout_noise.last().map(String::as_str))
                    .map(|l| format!("{cause}: {l}"))
                    .unwrap_or(cause);
                Diagnosis::new(
                    Category::CrashedOnStart,
                    line,
                    "the server ended during start-up; the evidence is its last message (often a Node or Python version, a missing native module, or a bug)",
                )
            })
        }
        End::InitTimeout => {
            if a.noise_count > 0 && a.json_lines == 0 {
                return non_json(a);
            }
            if let Some(d) = from_messages(a, &stderr) {
                return d;
            }
            Diagnosis::new(
                Category::InitTimeout,
                format!(
                    "no answer to initialize within the limit{}",
                    last_meaningful(&stderr)
                        .map(|l| format!("; last stderr line: {l}"))
                        .unwrap_or_default()
                ),
                "the server likely connects upstream before answering; give it credentials or a reachable service, or raise the initialize limit",
            )
        }
        End::InitError(msg) => {
            if mentions_version(msg) {
                return Diagnosis::new(
                    Category::ProtocolMismatch,
                    format!("initialize refused: {msg}"),
                    "the server does not speak a protocol version this client offers",
                );
            }
            let mut d = Diagnosis::new(
                Category::InitError,
                format!("initialize refused: {msg}"),
                "the server rejected the handshake; see the message (often missing configuration)",
            );
            d.needs.env = credential_names(&[msg.as_str()]);
            d
        }
        End::InitBroken(msg) => {
            if a.noise_count > 0 && a.json_lines == 0 {
                return non_json(a);
            }
            Diagnosis::new(
                Category::InitError,
                format!("initialize failed: {msg}"),
                "the server's answer to initialize could not be read as MCP",
            )
        }
        End::ProtocolMismatch(msg) => Diagnosis::new(
            Category::ProtocolMismatch,
            msg.clone(),
            "the server speaks a protocol version or message shape this client does not; a newer or older release may fit",
        ),
        End::ListTimeout => Diagnosis::new(
            Category::ToolsListTimeout,
            "initialize answered, but tools/list did not within the limit",
            "the server probably fetches its tool list upstream; give it credentials or a reachable service",
        ),
        End::ListError(msg) => {
            let names = credential_names(&[msg.as_str()]);
            if !names.is_empty() || asks_for_credentials(msg) {
                let mut d = Diagnosis::new(
                    Category::NeedsCredentials,
                    format!("tools/list refused: {msg}"),
                    &credentials_hint(&names),
                );
                d.needs.env = names;
                return d;
            }
            // A server that fetches its tool list upstream (`fetch failed`, `ECONNREFUSED`) needs the network.
            if is_network(msg) {
                return Diagnosis::new(
                    Category::NetworkRequired,
                    format!("tools/list failed: {msg}"),
                    "the server fetches its tool list from a network service; it needs that service reachable (and usually credentials for it)",
                );
            }
            Diagnosis::new(
                Category::ToolsListError,
                format!("tools/list failed: {msg}"),
                "the server answered initialize but failed to list tools; see the message",
            )
        }
        End::ListExited => from_messages(a, &stderr).unwrap_or_else(|| {
            Diagnosis::new(
                Category::ToolsListError,
                format!(
                    "the process ended during tools/list ({}){}",
                    a.exit.clone().unwrap_or_default(),
                    last_meaningful(&stderr)
                        .map(|l| format!(": {l}"))
                        .unwrap_or_default()
                ),
                "the server crashed while listing its tools",
            )
        }),
    }
}

fn non_json(a: &Attempt) -> Diagnosis {
    Diagnosis::new(
        Category::NonJsonStdout,
        format!(
            "{} non-JSON line(s) on stdout and no JSON-RPC message; first: {}",
            a.noise_count,
            a.stdout_noise.first().cloned().unwrap_or_default()
        ),
        "the server writes text to stdout instead of speaking MCP there; it may need a `stdio` argument, or it logs to stdout",
    )
}

/// Credentials, usage text, config and network messages, in that order.
fn from_messages(a: &Attempt, stderr: &[&str]) -> Option<Diagnosis> {
    let mut lines: Vec<&str> = stderr.to_vec();
    lines.extend(a.stdout_noise.iter().map(String::as_str));
    // A key asked for as a command-line option (`required option '--api-key <key>'`) next to a usage text is an
    // argument, not a variable: filed under needs_args below.
    let has_usage = lines.iter().any(|l| is_usage(l));
    if let Some(line) = lines
        .iter()
        .find(|l| asks_for_credentials(l) && !(has_usage && l.contains("--")))
    {
        let names = credential_names(&lines);
        let mut d = Diagnosis::new(Category::NeedsCredentials, *line, &credentials_hint(&names));
        d.needs.env = names;
        return Some(d);
    }
    if let Some(i) = lines.iter().position(|l| is_usage(l)) {
        let usage: Vec<&str> = lines[i..].iter().take(3).copied().collect();
        let text = usage.join(" ");
        let mut d = Diagnosis::new(
            Category::NeedsArgs,
            text.clone(),
            "the server wants command-line arguments (see its usage text); pass them as install arguments",
        );
        d.needs.args = usage_args(&text);
        // "Please provide a database URL as a command-line argument": the argument is named in the sentence.
        if d.needs.args.is_empty()
            && let Some(label) = named_argument(&text)
        {
            d.needs.args.push(label);
        }
        // Options whose value must be supplied (a bare flag or `stdio` choice is passed as is, never asked).
        for o in usage_options(&text) {
            if o.metavar.is_some() && o.literal().is_none() && !d.needs.args.contains(&o.name) {
                d.needs.args.push(o.name);
            }
        }
        return Some(d);
    }
    if let Some(line) = lines.iter().find(|l| is_config(l)) {
        return Some(Diagnosis::new(
            Category::NeedsConfig,
            *line,
            "the server looks for a file, path or URL it was not given; provide it (argument or variable) before activating",
        ));
    }
    if let Some(line) = lines.iter().find(|l| is_network(l)) {
        return Some(Diagnosis::new(
            Category::NetworkRequired,
            *line,
            "the server reaches a network service during start-up; it needs that service reachable (or a URL setting pointing at one)",
        ));
    }
    None
}

fn credentials_hint(names: &[String]) -> String {
    if names.is_empty() {
        "the server wants credentials (an API key or token); store them as secrets before activating".into()
    } else {
        format!(
            "set {} (registry set_secret) before activating",
            names.join(", ")
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tools_list_error_that_is_a_network_failure() {
        let mut a = crate::probe::Attempt::new();
        a.end = crate::probe::End::ListError("fetch failed (code -32603)".into());
        assert_eq!(diagnose(&a).category, Category::NetworkRequired);
        a.end = crate::probe::End::ListError("cannot read properties of undefined".into());
        assert_eq!(diagnose(&a).category, Category::ToolsListError);
    }

    #[test]
    fn a_folder_above_the_working_directory_refused_is_a_missing_configuration() {
        let mut a = crate::probe::Attempt::new();
        a.end = crate::probe::End::Exited;
        a.exit = Some("exit code 1".into());
        a.stderr = vec!["EACCES: permission denied, scandir '/d/introspect/scratch/9-2'".into()];
        assert_eq!(diagnose(&a).category, Category::NeedsConfig);
        a.stderr = vec!["Error: boom".into()];
        assert_eq!(diagnose(&a).category, Category::CrashedOnStart);
    }
}
