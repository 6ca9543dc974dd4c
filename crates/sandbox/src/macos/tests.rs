//! Unit tests of the Seatbelt profile generator: the profile read back with a small s-expression parser, rule by rule.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use ad_core::sandbox::{Grant, GrantSource, Network, Plan};

use super::{Resolved, sbpl_path, seatbelt_profile, seatbelt_profile_with};

const HOME: &str = "/Users/alice";
const STATE: &str = "/Users/alice/Library/Application Support/agent-discover/servers/notes";

#[derive(Debug, Clone, PartialEq)]
enum Sexp {
    Atom(String),
    Str(String),
    List(Vec<Sexp>),
}

/// Parses SBPL as this generator writes it: lists, atoms, strings with `\\` and `\"` escapes, `;` comments. Fails on
/// unbalanced parentheses and unterminated strings.
fn parse(text: &str) -> Result<Vec<Sexp>, String> {
    let mut stack: Vec<Vec<Sexp>> = vec![Vec::new()];
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ';' => while chars.next_if(|&n| n != '\n').is_some() {},
            '(' => stack.push(Vec::new()),
            ')' => {
                let list = stack.pop().expect("the stack is never empty here");
                let Some(parent) = stack.last_mut() else {
                    return Err("a `)` closes nothing".into());
                };
                parent.push(Sexp::List(list));
            }
            '"' => {
                let mut s = String::new();
                loop {
                    match chars.next() {
                        None => return Err("an unterminated string".into()),
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('\\' | '"')) => s.push(e),
                            other => return Err(format!("an unexpected escape {other:?}")),
                        },
                        Some(c) => s.push(c),
                    }
                }
                stack.last_mut().expect("not empty").push(Sexp::Str(s));
            }
            c if c.is_whitespace() => {}
            c => {
                let mut atom = String::from(c);
                while let Some(n) = chars.next_if(|&n| !n.is_whitespace() && !"()\";".contains(n)) {
                    atom.push(n);
                }
                stack.last_mut().expect("not empty").push(Sexp::Atom(atom));
            }
        }
    }
    match stack.len() {
        1 => Ok(stack.pop().expect("one")),
        n => Err(format!("{} unclosed `(`", n - 1)),
    }
}

#[derive(Debug)]
struct Rule {
    action: String,
    ops: Vec<String>,
    filters: Vec<Sexp>,
}

fn rules(profile: &str) -> Vec<Rule> {
    parse(profile)
        .expect("the profile parses")
        .into_iter()
        .filter_map(|form| {
            let Sexp::List(items) = form else { return None };
            let Some(Sexp::Atom(action)) = items.first() else {
                return None;
            };
            if action != "allow" && action != "deny" {
                return None;
            }
            let mut rule = Rule {
                action: action.clone(),
                ops: Vec::new(),
                filters: Vec::new(),
            };
            for item in &items[1..] {
                match item {
                    Sexp::Atom(op) => rule.ops.push(op.clone()),
                    other => rule.filters.push(other.clone()),
                }
            }
            Some(rule)
        })
        .collect()
}

/// Every `(subpath P)` / `(literal P)` inside `filter`, however nested, as (kind, P).
fn paths(filter: &Sexp) -> Vec<(String, String)> {
    let Sexp::List(items) = filter else {
        return Vec::new();
    };
    if let [Sexp::Atom(kind), Sexp::Str(path)] = items.as_slice()
        && (kind == "subpath" || kind == "literal")
    {
        return vec![(kind.clone(), path.clone())];
    }
    items.iter().flat_map(paths).collect()
}

fn covers(kind: &str, granted: &str, target: &str) -> bool {
    match kind {
        "literal" => target == granted,
        _ => target == granted || granted == "/" || target.starts_with(&format!("{granted}/")),
    }
}

impl Rule {
    fn allows(&self, op: &str) -> bool {
        self.action == "allow" && self.ops.iter().any(|o| o == op)
    }
    fn writes(&self) -> bool {
        self.action == "allow" && self.ops.iter().any(|o| o.starts_with("file-write"))
    }
    fn paths(&self) -> Vec<(String, String)> {
        self.filters.iter().flat_map(paths).collect()
    }
    fn names(&self, kind: &str, path: &str) -> bool {
        self.paths().iter().any(|(k, p)| k == kind && p == path)
    }
    fn covers(&self, target: &str) -> bool {
        self.paths().iter().any(|(k, p)| covers(k, p, target))
    }
}

fn grant(path: &str, write: bool, source: GrantSource) -> Grant {
    Grant {
        path: PathBuf::from(path),
        write,
        source,
    }
}

fn plan(network: Network, grants: Vec<Grant>) -> Plan {
    Plan {
        server: "notes".into(),
        network,
        net_proxy: None,
        grants,
        env: BTreeMap::from([
            ("HOME".to_string(), STATE.to_string()),
            ("PATH".to_string(), "/usr/bin:/bin".to_string()),
        ]),
        cwd: PathBuf::from(STATE),
    }
}

/// A server of the marketplace: its package, its state, a temp directory under `/var` (a symlink on macOS), a file
/// the user granted to read and one to write, a relative path and an absent one (both skipped).
fn sample(network: Network) -> Plan {
    plan(
        network,
        vec![
            grant("/opt/servers/notes", false, GrantSource::Package),
            grant(STATE, true, GrantSource::State),
            grant("/var/folders/xy/T/notes", true, GrantSource::Env),
            grant("/Users/alice/notes.md", false, GrantSource::User),
            grant("/Users/alice/out/log.txt", true, GrantSource::User),
            grant("data", false, GrantSource::Arguments),
            grant("/absent/lib", false, GrantSource::Runtime),
        ],
    )
}

/// A filesystem where `/var` and `/tmp` are symlinks into `/private` (as on macOS), names with a `.` are files, and
/// everything under `/absent` is missing.
fn fake(path: &Path) -> Option<Resolved> {
    let text = path.to_str()?;
    if text.starts_with("/absent") {
        return None;
    }
    let real = match text {
        t if t.starts_with("/var/") || t.starts_with("/tmp/") => format!("/private{t}"),
        t => t.to_string(),
    };
    let dir = !path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().contains('.'));
    Some(Resolved {
        path: PathBuf::from(real),
        dir,
    })
}

fn profile(plan: &Plan) -> String {
    seatbelt_profile_with(plan, fake)
}

#[test]
fn starts_closed_and_only_allows_after() {
    for network in [Network::Full, Network::None] {
        let text = profile(&sample(network));
        assert!(text.starts_with("(version 1)\n(deny default)\n"), "{text}");
        let rules = rules(&text);
        assert_eq!(rules[0].action, "deny");
        assert_eq!(rules[0].ops, ["default"]);
        assert!(rules[1..].iter().all(|r| r.action == "allow"), "{text}");
        // Running and mapping as code: only where named, never everywhere.
        for rule in rules
            .iter()
            .filter(|r| r.allows("process-exec") || r.allows("file-map-executable"))
        {
            assert!(!rule.paths().is_empty(), "{rule:?}");
        }
    }
}

#[test]
fn read_grants_are_readable_and_runnable_but_not_writable() {
    let text = profile(&sample(Network::Full));
    let rules = rules(&text);
    for (path, kind) in [
        ("/opt/servers/notes", "subpath"),
        ("/Users/alice/notes.md", "literal"),
    ] {
        assert!(
            rules.iter().any(|r| r.allows("file-read*")
                && r.allows("process-exec")
                && r.allows("file-map-executable")
                && r.names(kind, path)),
            "{path} is not readable:\n{text}"
        );
        assert!(
            !rules.iter().any(|r| r.writes() && r.covers(path)),
            "{path} is writable:\n{text}"
        );
    }
}

#[test]
fn write_grants_are_writable() {
    let text = profile(&sample(Network::Full));
    let rules = rules(&text);
    for dir in [STATE, "/private/var/folders/xy/T/notes"] {
        assert!(
            rules.iter().any(|r| r.allows("file-read*")
                && r.allows("file-write*")
                && r.names("subpath", dir)),
            "{dir} is not writable:\n{text}"
        );
    }
    // A file: its content only (as Landlock grants it), not removing or replacing it.
    let file = "/Users/alice/out/log.txt";
    assert!(
        rules
            .iter()
            .any(|r| r.allows("file-write-data") && r.names("literal", file)),
        "{text}"
    );
    assert!(
        !rules
            .iter()
            .any(|r| r.allows("file-write*") && r.covers(file)),
        "{text}"
    );
}

#[test]
fn grants_are_resolved_and_relative_or_absent_ones_skipped() {
    let text = profile(&sample(Network::Full));
    let named: Vec<String> = rules(&text)
        .iter()
        .flat_map(|r| r.paths())
        .map(|(_, p)| p)
        .collect();
    assert!(named.iter().all(|p| p.starts_with('/')), "{named:?}");
    assert!(named.iter().any(|p| p == "/private/var/folders/xy/T/notes"));
    assert!(
        !named
            .iter()
            .any(|p| p.starts_with("/var/") || p == "data" || p.starts_with("/absent"))
    );
    assert!(
        !text.contains("\"data\"") && !text.contains("/absent"),
        "{text}"
    );
}

#[test]
fn a_grant_named_twice_gives_one_rule() {
    let mut plan = sample(Network::None);
    plan.grants
        .push(grant("/opt/servers/notes", false, GrantSource::User));
    plan.grants.push(grant(STATE, true, GrantSource::State));
    let text = profile(&plan);
    assert_eq!(
        text.matches("(subpath \"/opt/servers/notes\")").count(),
        1,
        "{text}"
    );
    assert_eq!(text.matches("(local unix-socket").count(), 1, "{text}");
}

const NETWORK_OPS: [&str; 5] = [
    "network*",
    "network-outbound",
    "network-inbound",
    "network-bind",
    "system-socket",
];

#[test]
fn no_network_means_unix_sockets_in_the_state_directory_only() {
    let text = profile(&sample(Network::None));
    let rules = rules(&text);
    let network: Vec<&Rule> = rules
        .iter()
        .filter(|r| r.ops.iter().any(|o| NETWORK_OPS.contains(&o.as_str())))
        .collect();
    assert!(!text.contains("(allow network*"), "{text}");
    for rule in &network {
        assert!(
            !rule.filters.is_empty(),
            "an unfiltered network rule: {rule:?}"
        );
        for filter in &rule.filters {
            let Sexp::List(items) = filter else {
                panic!("{rule:?}")
            };
            match items.as_slice() {
                [Sexp::Atom(side), Sexp::Atom(kind), Sexp::List(_)] => {
                    assert!(side == "local" || side == "remote", "{rule:?}");
                    assert_eq!(kind, "unix-socket");
                    let named = paths(filter);
                    assert_eq!(
                        named,
                        [("subpath".to_string(), STATE.to_string())],
                        "{rule:?}"
                    );
                }
                [Sexp::Atom(domain), Sexp::Atom(family)] => {
                    assert_eq!(
                        (domain.as_str(), family.as_str()),
                        ("socket-domain", "AF_UNIX")
                    );
                }
                _ => panic!("an unexpected network filter: {rule:?}"),
            }
        }
    }
    assert!(
        network.iter().any(|r| r.allows("network-outbound")),
        "{text}"
    );
    assert!(network.iter().any(|r| r.allows("network-bind")), "{text}");
    for service in [
        "com.apple.dnssd.service",
        "com.apple.trustd",
        "SystemConfiguration",
    ] {
        assert!(!text.contains(service), "{service}:\n{text}");
    }
}

#[test]
fn no_network_without_a_state_directory_allows_no_socket_path() {
    let plan = plan(
        Network::None,
        vec![grant("/opt/servers/notes", false, GrantSource::Package)],
    );
    let text = profile(&plan);
    assert!(!text.contains("unix-socket"), "{text}");
    assert!(
        !rules(&text)
            .iter()
            .any(|r| r.allows("network-outbound") || r.allows("network-bind"))
    );
}

#[test]
fn full_network_allows_the_network_and_name_resolution() {
    let text = profile(&sample(Network::Full));
    let rules = rules(&text);
    assert!(
        rules
            .iter()
            .any(|r| r.allows("network*") && r.filters.is_empty()),
        "{text}"
    );
    assert!(text.contains("(global-name \"com.apple.SystemConfiguration.configd\")"));
    assert!(text.contains("(global-name \"com.apple.trustd.agent\")"));
}

#[test]
fn paths_are_escaped() {
    let odd = r#"/data/we"ird\dir (x)"#;
    let text = profile(&plan(
        Network::None,
        vec![grant(odd, true, GrantSource::User)],
    ));
    assert!(
        text.contains(r#"(subpath "/data/we\"ird\\dir (x)")"#),
        "{text}"
    );
    let rules = rules(&text);
    assert!(
        rules
            .iter()
            .any(|r| r.allows("file-write*") && r.names("subpath", odd)),
        "{text}"
    );
}

#[test]
fn paths_that_cannot_be_written_as_is_are_skipped() {
    use std::os::unix::ffi::OsStrExt;
    let not_utf8 = PathBuf::from(std::ffi::OsStr::from_bytes(b"/data/\xff"));
    assert_eq!(sbpl_path(&not_utf8), None);
    for bad in [
        "relative",
        "./here",
        "/data/\nx",
        "/data/a\u{7f}",
        "/data/../etc",
        "/data/./x",
        "/data//x",
        "/data/",
    ] {
        assert_eq!(sbpl_path(Path::new(bad)), None, "{bad:?}");
    }
    assert_eq!(
        sbpl_path(Path::new("/a b/c")).as_deref(),
        Some("\"/a b/c\"")
    );
    assert_eq!(sbpl_path(Path::new("/")).as_deref(), Some("\"/\""));
    let mut plan = plan(
        Network::Full,
        vec![grant("/data/\n(allow default)", true, GrantSource::User)],
    );
    plan.grants.push(Grant {
        path: not_utf8,
        write: true,
        source: GrantSource::User,
    });
    let text = profile(&plan);
    assert!(!text.contains("/data"), "{text}");
    assert!(!text.contains("(allow default)"), "{text}");
}

#[test]
fn the_users_home_is_never_granted() {
    // The state directory lives under HOME: HOME itself is covered by no rule but the metadata one.
    for network in [Network::Full, Network::None] {
        let text = profile(&sample(network));
        for rule in rules(&text) {
            if rule.ops == ["file-read-metadata"] {
                continue;
            }
            assert!(!rule.covers(HOME), "{rule:?}");
            assert!(!rule.covers("/Users/alice/.ssh/id_ed25519"), "{rule:?}");
        }
    }
    // Nothing under HOME granted: HOME appears nowhere, whatever the environment says.
    let mut plan = plan(
        Network::Full,
        vec![grant(
            "/private/var/folders/xy/T/agent-discover/notes",
            true,
            GrantSource::State,
        )],
    );
    plan.env.insert("HOME".into(), HOME.into());
    plan.cwd = PathBuf::from(HOME);
    let text = profile(&plan);
    assert!(!text.contains(HOME) && !text.contains("alice"), "{text}");
}

#[test]
fn profiles_are_balanced_s_expressions() {
    let odd = plan(
        Network::None,
        vec![
            grant(r#"/x/"((;\""#, false, GrantSource::User),
            grant(STATE, true, GrantSource::State),
        ],
    );
    for plan in [sample(Network::Full), sample(Network::None), odd] {
        let text = profile(&plan);
        let forms = parse(&text).unwrap_or_else(|e| panic!("{e}:\n{text}"));
        assert!(forms.iter().all(|f| matches!(f, Sexp::List(_))), "{text}");
    }
    // The checker itself.
    assert!(parse("(a (b \")\") ; )\n)").is_ok());
    for bad in ["(a", "a)", "(a \"b)", "(a \"\\q\")", "(a))(", "(a ; )"] {
        assert!(parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn the_filesystem_decides_directory_or_file_and_resolves_links() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("pkg");
    std::fs::create_dir(&dir).unwrap();
    let file = tmp.path().join("config.json");
    std::fs::write(&file, "{}").unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&dir, &link).unwrap();
    let plan = plan(
        Network::None,
        vec![
            grant(dir.to_str().unwrap(), false, GrantSource::Package),
            grant(file.to_str().unwrap(), true, GrantSource::User),
            grant(link.to_str().unwrap(), false, GrantSource::Arguments),
            grant(
                tmp.path().join("missing").to_str().unwrap(),
                false,
                GrantSource::User,
            ),
        ],
    );
    let text = seatbelt_profile(&plan);
    let real = |p: &Path| {
        std::fs::canonicalize(p)
            .unwrap()
            .to_str()
            .unwrap()
            .to_string()
    };
    let rules = rules(&text);
    assert!(
        rules
            .iter()
            .any(|r| r.allows("file-read*") && r.names("subpath", &real(&dir))),
        "{text}"
    );
    assert!(
        rules
            .iter()
            .any(|r| r.allows("file-write-data") && r.names("literal", &real(&file))),
        "{text}"
    );
    assert!(
        !text.contains("\"link\"") && !text.contains("/link\""),
        "{text}"
    );
    assert!(!text.contains("missing"), "{text}");
}
