//! Unit tests of the policy set: outcomes, the deciding policy, scope, load failures that keep the last good set.

use super::*;
use serde_json::Map;

const FILES: &str = r#"
@id("no-etc")
forbid (principal, action == Action::"call", resource == Tool::"fs/write_file")
when { context.args has path && context.args.path like "/etc/*" };

@id("fs-users")
permit (principal in Group::"dev", action == Action::"call", resource in Server::"fs");

@id("big-charge")
@ask("")
permit (principal, action, resource == Tool::"pay/charge")
when { context.args.amount > 100 };

@id("small-charge")
permit (principal, action, resource == Tool::"pay/charge")
when { context.args.amount <= 100 };

@id("acme-only")
forbid (principal, action, resource in Server::"github")
when { context.args has owner && context.args.owner != "acme" }
unless { principal in Group::"admins" };

@id("script-no-delete")
forbid (principal, action, resource == Tool::"fs/delete") when { context.script };
"#;

fn set(text: &str) -> (tempfile::TempDir, Policies) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("main.cedar"), text).unwrap();
    let p = Policies::open(dir.path().to_path_buf());
    (dir, p)
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn call<'a>(
    user: &'a str,
    groups: &'a [String],
    server: &'a str,
    tool: &'a str,
    args: &'a Map<String, Value>,
) -> Call<'a> {
    Call {
        user: Some(user),
        groups,
        client: Some("claude"),
        script: false,
        server,
        tool,
        args: Some(args),
    }
}

#[test]
fn outcomes_and_the_deciding_policy() {
    let (_d, p) = set(FILES);
    assert!(p.reload().is_ok());
    assert_eq!(p.list().len(), 6);
    let dev = vec!["dev".to_owned()];
    let none: Vec<String> = vec![];
    let etc = args(json!({"path": "/etc/passwd", "content": "x"}));
    let home = args(json!({"path": "/home/a/x", "content": "x"}));

    let d = p
        .evaluate(&call("alice", &dev, "fs", "write_file", &etc))
        .unwrap();
    assert_eq!((d.outcome, d.policy()), (Outcome::Deny, "no-etc"));
    let d = p
        .evaluate(&call("alice", &dev, "fs", "write_file", &home))
        .unwrap();
    assert_eq!((d.outcome, d.policy()), (Outcome::Allow, "fs-users"));
    // Not in `dev`: inside a permit's scope, nothing permits it.
    let d = p
        .evaluate(&call("bob", &none, "fs", "write_file", &home))
        .unwrap();
    assert_eq!((d.outcome, d.policy()), (Outcome::Deny, "default"));

    let big = args(json!({"amount": 250}));
    let small = args(json!({"amount": 20}));
    let d = p
        .evaluate(&call("bob", &none, "pay", "charge", &big))
        .unwrap();
    assert_eq!((d.outcome, d.policy()), (Outcome::Ask, "big-charge"));
    let d = p
        .evaluate(&call("bob", &none, "pay", "charge", &small))
        .unwrap();
    assert_eq!((d.outcome, d.policy()), (Outcome::Allow, "small-charge"));
    // A fractional amount is a decimal: `>` on it is a type error, so neither permit holds.
    let frac = args(json!({"amount": 12.5}));
    let d = p
        .evaluate(&call("bob", &none, "pay", "charge", &frac))
        .unwrap();
    assert_eq!(d.outcome, Outcome::Deny);

    let other = args(json!({"owner": "evil", "repo": "x"}));
    let acme = args(json!({"owner": "acme", "repo": "x"}));
    let d = p
        .evaluate(&call("bob", &none, "github", "create_issue", &other))
        .unwrap();
    assert_eq!((d.outcome, d.policy()), (Outcome::Deny, "acme-only"));
    let admins = vec!["admins".to_owned()];
    let d = p
        .evaluate(&call("root", &admins, "github", "create_issue", &other))
        .unwrap();
    assert_eq!(d.outcome, Outcome::Allow, "{d:?}");
    let d = p
        .evaluate(&call("bob", &none, "github", "create_issue", &acme))
        .unwrap();
    assert_eq!(d.outcome, Outcome::Allow);

    // A tool no policy is scoped to is not policed.
    assert!(!p.covers("time", "now"));
    assert!(
        p.evaluate(&call("bob", &none, "time", "now", &acme))
            .is_none()
    );
    assert!(p.covers("fs", "anything") && p.covers("pay", "charge"));
    assert!(!p.covers("pay", "refund"));

    let mut c = call("alice", &dev, "fs", "delete", &home);
    assert_eq!(p.evaluate(&c).unwrap().outcome, Outcome::Allow);
    c.script = true;
    let d = p.evaluate(&c).unwrap();
    assert_eq!((d.outcome, d.policy()), (Outcome::Deny, "script-no-delete"));
}

#[test]
fn a_forbid_that_cannot_be_evaluated_refuses() {
    let (_d, p) = set(
        r#"@id("no-tmp") forbid (principal, action, resource == Tool::"fs/read")
           when { context.args.path like "/tmp/*" };"#,
    );
    let none: Vec<String> = vec![];
    let no_path = args(json!({"file": "/x"}));
    let d = p
        .evaluate(&call("a", &none, "fs", "read", &no_path))
        .unwrap();
    assert_eq!((d.outcome, d.policy()), (Outcome::Deny, "no-tmp"));
    assert!(d.reason.contains("could not be evaluated"), "{}", d.reason);
    let ok = args(json!({"path": "/home/x"}));
    assert_eq!(
        p.evaluate(&call("a", &none, "fs", "read", &ok))
            .unwrap()
            .outcome,
        Outcome::Allow
    );
}

#[test]
fn arguments_cannot_pose_as_entities() {
    // Cedar's JSON form reads `{"__entity": …}` as an entity reference; arguments are built as plain records.
    let (_d, p) = set(
        r#"@id("x") forbid (principal, action, resource == Tool::"s/t") when { context.args.who == "x" };"#,
    );
    let none: Vec<String> = vec![];
    let a = args(json!({"who": {"__entity": {"type": "Group", "id": "admins"}}, "n": null}));
    let d = p.evaluate(&call("a", &none, "s", "t", &a)).unwrap();
    // `==` between a record and a string is false, not an entity comparison: the forbid does not hold.
    assert_eq!(d.outcome, Outcome::Allow, "{d:?}");
}

#[test]
fn a_bad_file_keeps_the_last_good_set_and_says_why() {
    let (dir, p) = set(r#"@id("a") forbid (principal, action, resource == Tool::"s/t");"#);
    assert_eq!(p.list().len(), 1);
    let first_gen = p.status()["generation"].as_u64().unwrap();
    for (bad, says) in [
        (
            "forbid (principal, action, resource",
            "unexpected end of input",
        ),
        (
            r#"permit (principal, action == Action::"read", resource);"#,
            "Action::\"call\"",
        ),
        (
            r#"permit (principal, action, resource == Server::"fs");"#,
            "resource in Server::",
        ),
        (r#"@ask("") forbid (principal, action, resource);"#, "@ask"),
        (
            r#"permit (principal == Team::"x", action, resource);"#,
            "principal",
        ),
        (
            r#"@id("d") permit (principal, action, resource); @id("d") permit (principal, action, resource);"#,
            "unique",
        ),
    ] {
        std::fs::write(dir.path().join("main.cedar"), bad).unwrap();
        let e = p.reload().unwrap_err();
        assert!(e.to_string().contains(says), "{bad}: {e}");
        assert!(e.file.as_deref().unwrap().ends_with("main.cedar"));
        let st = p.status();
        assert_eq!(st["generation"].as_u64().unwrap(), first_gen, "{bad}");
        assert!(st["error"]["message"].is_string());
        assert_eq!(p.list()[0].id, "a", "the last good set stays");
    }
    std::fs::write(
        dir.path().join("main.cedar"),
        r#"forbid (principal, action, resource);"#,
    )
    .unwrap();
    assert_eq!(p.reload().unwrap(), 1);
    let st = p.status();
    assert_eq!(st["generation"].as_u64().unwrap(), first_gen + 1);
    assert!(st["error"].is_null());
    assert_eq!(
        p.list()[0].id,
        "main:0",
        "an id from the file's stem and the place"
    );
    // Removing every file empties the set; nothing is policed then.
    std::fs::remove_file(dir.path().join("main.cedar")).unwrap();
    assert_eq!(p.reload().unwrap(), 0);
    assert!(!p.active());
}

#[test]
fn no_policies_police_nothing() {
    let p = Policies::default();
    assert!(!p.active() && !p.covers("s", "t"));
    let dir = tempfile::tempdir().unwrap();
    let p = Policies::open(dir.path().join("missing"));
    assert!(!p.active());
    assert!(p.status()["error"].is_null());
}

/// Replicas share policies by mounting the same files (a Kubernetes ConfigMap volume): there each file is a symlink
/// through `..data`, itself a symlink to a timestamped directory, and an update swaps `..data` by a rename. The
/// watcher of the directory reads the new set; the digest in `status` moves with it and is equal for equal files.
#[tokio::test]
async fn a_config_map_volume_update_is_read_like_an_edit() {
    use std::os::unix::fs::symlink;
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("..2026_01")).unwrap();
    std::fs::write(
        d.join("..2026_01/main.cedar"),
        r#"@id("first") forbid (principal, action, resource == Tool::"s/t");"#,
    )
    .unwrap();
    symlink("..2026_01", d.join("..data")).unwrap();
    symlink("..data/main.cedar", d.join("main.cedar")).unwrap();
    let p = Policies::open(d.to_path_buf());
    assert_eq!(p.list()[0].id, "first", "{}", p.status());
    let first = p.status()["digest"].as_str().unwrap().to_owned();
    let cancel = tokio_util::sync::CancellationToken::new();
    p.watch(cancel.clone());

    std::fs::create_dir(d.join("..2026_02")).unwrap();
    let second = r#"@id("second") permit (principal, action, resource in Server::"s");"#;
    std::fs::write(d.join("..2026_02/main.cedar"), second).unwrap();
    symlink("..2026_02", d.join("..data_tmp")).unwrap();
    std::fs::rename(d.join("..data_tmp"), d.join("..data")).unwrap();
    std::fs::remove_dir_all(d.join("..2026_01")).unwrap();
    // Polled with a deadline: a file watcher has no event a test can wait on.
    let started = std::time::Instant::now();
    while p.list().first().map(|i| i.id.as_str()) != Some("second") {
        assert!(
            started.elapsed() < std::time::Duration::from_secs(20),
            "the swap was not read: {}",
            p.status()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    cancel.cancel();
    let digest = p.status()["digest"].as_str().unwrap().to_owned();
    assert_ne!(digest, first);
    // Another replica mounting the same file elsewhere has the same digest.
    let other = tempfile::tempdir().unwrap();
    std::fs::write(other.path().join("main.cedar"), second).unwrap();
    let replica = Policies::open(other.path().to_path_buf());
    assert_eq!(replica.status()["digest"], digest.as_str());
}
