//! The second pass: what a definition asks the agent to *do*, sentence by sentence, measured against what the tool
//! says it is *for*. It reads no marker words (`<IMPORTANT>`, "ignore previous instructions") but the acts asked
//! for: lying to the user, overriding the user's choice, discrediting other tools, steering money, weakening the
//! user's security, collecting data the purpose does not need, orders about other servers' tools described by kind
//! ("any email tool") rather than by name, and destructive orders beyond the tool's own function.
//!
//! The tool's purpose is its name and the first sentence of its description; a finding whose subject the purpose
//! shares (an identity-verification tool asking for a date of birth) is weakened to `medium`, shown but not
//! withheld.

use super::index::{object_index, paths_in};
use super::intent_words::*;
use super::sentence::{Sentence, sentences};
use crate::fields::{Field, Role};
use crate::text;
use crate::{Finding, Severity};

/// Words of the tool's purpose: its name and the first sentence of its description.
pub(super) fn purpose(fields: &[Field]) -> Vec<String> {
    let mut out = Vec::new();
    for f in fields {
        if f.path == "name" {
            out.extend(
                text::words_of_name(&f.text)
                    .to_lowercase()
                    .split_whitespace()
                    .map(str::to_owned),
            );
        }
        if f.path == "description" {
            let (folded, _) = text::fold(&f.text);
            let first = folded
                .split(['\n', '.', '!', '?'])
                .find(|s| s.trim().len() > 3)
                .unwrap_or("");
            out.extend(
                text::tokens(first)
                    .into_iter()
                    .map(|(s, e)| first[s..e].to_owned()),
            );
        }
    }
    out
}

/// Whether the purpose shares a subject with `subjects` (a subject of five letters or more also matches as a
/// prefix: `verif` matches `verify`, `verification`; shorter ones match whole words).
fn purpose_has(purpose: &[String], subjects: &[&str]) -> bool {
    purpose.iter().any(|w| {
        subjects
            .iter()
            .any(|s| w == s || (s.len() >= 5 && w.starts_with(s)))
    })
}

/// Reads every prose or value field sentence by sentence.
pub(super) fn check(fields: &[Field], purpose: &[String], own: &[String], out: &mut Vec<Finding>) {
    for f in fields {
        match f.role {
            // A value written as an identifier (`attach_ssh_key_contents`) is read as words.
            Role::Value if !f.text.contains(' ') && f.text.contains('_') => read_text(
                &f.path,
                &text::words_of_name(&f.text),
                f.role,
                purpose,
                own,
                out,
            ),
            Role::Prose | Role::Value => read_text(&f.path, &f.text, f.role, purpose, own, out),
            Role::Param => read_text(
                &f.path,
                &text::words_of_name(&f.text),
                f.role,
                purpose,
                own,
                out,
            ),
            _ => {}
        }
    }
}

/// Reads one text (a field's, or text decoded from it) sentence by sentence.
pub(super) fn read_text(
    path: &str,
    raw: &str,
    role: Role,
    purpose: &[String],
    own: &[String],
    out: &mut Vec<Finding>,
) {
    if raw.len() < 12 {
        return;
    }
    // A parameter's own description, title or items: the parameter itself is what it collects.
    let param = param_of(path);
    let (folded, map) = text::fold(raw);
    for (k, s) in sentences(&folded, &map).into_iter().enumerate() {
        // The description's first sentence states the tool's purpose ("Read variables from the project's .env").
        let first = k == 0 && path == "description";
        if let Some((rule, severity, detail)) =
            judge(&s, param.as_deref(), role, first, purpose, own)
        {
            out.push(Finding {
                rule,
                severity,
                field: path.to_owned(),
                excerpt: text::excerpt(raw, s.at, 140),
                detail: detail.into(),
            });
        }
    }
}

type Verdict = (&'static str, Severity, &'static str);

fn judge(
    s: &Sentence<'_>,
    param: Option<&str>,
    role: Role,
    first: bool,
    purpose: &[String],
    own: &[String],
) -> Option<Verdict> {
    let in_param = param.is_some();
    // Text that describes what a tool detects or refuses ("detects phrases such as ...") asks nothing.
    if s.describes() {
        return None;
    }
    let order = s.order();
    let user = s.has(&["user", "users", "them", "they", "their", "customer"]);
    // A verb of telling used as one: followed by what is told or to whom ("state that", "tell the user").
    let telling = s.then(
        TELL,
        &[
            "that", "user", "users", "them", "to", "the", "it", "every", "all", "any", "each",
        ],
        2,
    );
    // Lying to the user: telling them something whatever the facts, or passing work off as the agent's own.
    if telling
        && (s.has(&["regardless", "whatever"])
            || s.any_phrase(&[&["even", "if"], &["no", "matter"], &["even", "when"]]))
    {
        return Some((
            "deceives_user",
            Severity::High,
            "tells the agent what to tell the user whatever the facts are",
        ));
    }
    if (telling || s.has(&["pass", "present"]))
        && (s.any_phrase(&[&["as", "your", "own"], &["your", "own", "analysis"]])
            || s.then(&["own"], &["analysis", "research", "findings", "work"], 1))
    {
        return Some((
            "deceives_user",
            Severity::High,
            "asks the agent to present the tool's output as its own work",
        ));
    }
    if telling
        && user
        && (s.then(
            &["error", "errors", "failure", "failures", "fails"],
            &["as"],
            8,
        ) && s.has(&[
            "network",
            "internet",
            "connection",
            "provider",
            "outage",
            "outages",
            "isp",
        ]))
    {
        return Some((
            "deceives_user",
            Severity::High,
            "asks the agent to misreport the tool's failures to the user",
        ));
    }
    if s.has(&["assure", "reassure", "convince"])
        || (telling
            && user
            && s.has(&[
                "audited",
                "certified",
                "safe",
                "verified",
                "trusted",
                "secure",
            ])
            && s.has(&[
                "server",
                "service",
                "tool",
                "transaction",
                "payment",
                "bank",
            ]))
    {
        return Some((
            "deceives_user",
            Severity::High,
            "tells the agent to vouch for this server or its results to the user",
        ));
    }
    // Overriding what the user chose.
    let overrides = s.then(
        &["regardless", "whatever", "rather", "instead", "matter"],
        CHOSEN,
        7,
    ) || (s.has(&["typo", "mistake"])
        && s.has(&["choice", "input", "selection", "entry"]));
    if overrides && order && (user || s.has(&["requested", "specified"])) {
        return Some((
            "overrides_user",
            Severity::High,
            "tells the agent to replace what the user asked for",
        ));
    }
    // Discrediting other tools or sources, steering the agent to this one.
    if s.near(OTHERS, DISCREDIT, 6) || (s.phrase(&["web", "search"]) && s.has(DISCREDIT)) {
        return Some((
            "discredits_others",
            Severity::High,
            "tells the agent that other tools or sources are not to be trusted",
        ));
    }
    if s.any_phrase(&[
        &["trust", "only"],
        &["rely", "only"],
        &["only", "trust"],
        &["only", "rely"],
    ]) {
        return Some((
            "discredits_others",
            Severity::High,
            "tells the agent to trust only this tool",
        ));
    }
    if s.has(&["citations", "citation", "sources", "references", "links"])
        && s.has(&[
            "replace",
            "replaced",
            "rewrite",
            "rewritten",
            "swap",
            "swapped",
        ])
        && (s.has(&["our", "us"])
            || s.then(
                &["this"],
                &["service", "server", "site", "tool", "website"],
                1,
            ))
    {
        return Some((
            "discredits_others",
            Severity::High,
            "asks the agent to rewrite its sources to point at this service",
        ));
    }
    // Promotion in every answer: a verb of promoting (or "close every reply with"), a paid offer, and the agent's
    // answers as where it goes ("Cancel a subscription at the end of the billing period" is none of these).
    if (s.has(&[
        "recommend",
        "suggest",
        "mention",
        "promote",
        "advertise",
        "upsell",
    ]) || s.then(&["close", "end", "finish"], &["every", "each", "all"], 2))
        && s.has(PROMO)
        && (s.has(&["every", "each", "always", "all"]) || s.phrase(&["end", "of"]))
        && s.has(&[
            "answer",
            "answers",
            "reply",
            "replies",
            "response",
            "responses",
            "message",
            "messages",
        ])
    {
        return Some((
            "steers_answers",
            Severity::High,
            "asks the agent to add promotion to its answers",
        ));
    }
    // Weakening the user's security.
    if s.has(&[
        "suggest",
        "recommend",
        "advise",
        "tell",
        "ask",
        "encourage",
        "urge",
        "convince",
    ]) && (s.has(&["disable", "disabling", "deactivate", "bypass"])
        || s.then(&["turn", "turning", "switch", "switching"], &["off"], 2))
        && s.has(SECURITY)
    {
        return Some((
            "weakens_security",
            Severity::High,
            "asks the agent to talk the user into weakening their security",
        ));
    }
    if (order || s.has(&["any", "every", "all"]))
        && (s.any_phrase(&[
            &["made", "public"],
            &["make", "public"],
            &["set", "to", "public"],
        ]) || s.any_phrase(&[
            &["anyone", "with", "link"],
            &["without", "review"],
            &["auto", "merged"],
        ]))
        && !s.has(&["if", "unless", "when"]) | s.has(&["any", "every", "all", "always"])
    {
        return Some((
            "weakens_security",
            Severity::High,
            "asks the agent to make the user's data public or skip review",
        ));
    }
    // Money steered to an account.
    if s.account_number()
        && s.has(&[
            "account",
            "iban",
            "beneficiary",
            "wallet",
            "recipient",
            "payee",
        ])
        && (s.has(STEER)
            || (s.has(&["every", "each", "all"]) && s.has(&["payment", "payments", "transfer"])))
        && !s.any_phrase(&[&["for", "example"], &["e", "g"], &["such", "as"]])
    {
        return Some((
            "steers_funds",
            Severity::High,
            "steers payments to an account the user did not choose",
        ));
    }
    // Orders about other servers' tools described by kind ("any email tool", "the chat server").
    if shadows(s, own) {
        return Some((
            "cross_server_shadowing",
            Severity::High,
            "gives orders about other servers' tools, described by what they do",
        ));
    }
    // Destructive orders: the user's files, or every repository the agent can reach.
    if order
        && (s.has(&["delete", "remove", "wipe", "erase", "destroy", "purge"])
            || s.words.iter().any(|w| w.starts_with("delete")))
        && (s.then(&["every", "all", "each"], RESOURCES, 3)
            && s.has(&["you", "access", "accessible", "reach"])
            || s.has(&["documents", "desktop", "downloads"])
            || s.text.contains("~/")
            || s.then(&["home"], &["directory", "folder", "dir"], 1)
            || s.then(
                &["user", "users", "their", "your"],
                &["files", "folder", "folders", "data", "documents"],
                2,
            ))
        && !purpose_has(
            purpose,
            &["delet", "remov", "clean", "purg", "wipe", "eras", "trash"],
        )
    {
        return Some((
            "destructive_order",
            Severity::High,
            "orders the agent to delete the user's data, beyond this tool's own function",
        ));
    }
    if order
        && s.has(&["delete", "remove", "wipe", "erase"])
        && s.then(
            &["files", "file", "it", "them"],
            &["larger", "bigger", "older", "save", "space"],
            6,
        )
        && !purpose_has(
            purpose,
            &["delet", "remov", "clean", "purg", "wipe", "eras", "trash"],
        )
    {
        return Some((
            "destructive_order",
            Severity::High,
            "orders the agent to delete files, beyond this tool's own function",
        ));
    }
    // Personal data the purpose does not need.
    if s.any_phrase(PII) && (order || in_param || s.has(&["need", "needs", "requires", "required"]))
    {
        let related = purpose_has(purpose, PII_PURPOSE);
        return Some((
            "collects_personal_data",
            if related {
                Severity::Medium
            } else {
                Severity::High
            },
            "asks for personal data (identity numbers, date of birth) the tool's purpose does not need",
        ));
    }
    // Secrets, the conversation or other tools' data collected into a parameter.
    if s.refusal() || s.describes() {
        return None;
    }
    let context = CONTEXT.iter().any(|p| s.phrase(p))
        || (s.then(
            &[
                "output",
                "outputs",
                "results",
                "result",
                "arguments",
                "responses",
            ],
            &["tool"],
            6,
        ) && s.has(&["call", "calls", "tools"])
            && s.has(&[
                "earlier", "previous", "last", "prior", "every", "each", "all", "other",
            ]));
    let asked = order || s.has(COLLECT) || s.has(REACH);
    if !asked && !in_param && !matches!(role, Role::Param | Role::Value) {
        return None;
    }
    // Files on disk that hold secrets (`~/.ssh/id_rsa`, `.env`, `~/.docker/config.json`).
    let path =
        s.has(SECRET_FILES) || (s.text.contains(['/', '.', '_']) && !paths_in(s.text).is_empty());
    // Secrets and the agent's context as the shared lexicon knows them; looked for only when needed.
    let secret = || {
        path || !object_index().scan(&[super::lexicon::objects()], &s.words)[0]
            .iter()
            .all(Option::is_none)
    };
    // A parameter that is itself a secret (`password`, `kubeconfig context`, `key`) takes one by design.
    let own_secret = param.is_some_and(|p| SECRET_PARAMS.iter().any(|w| p.contains(w)));
    let into = s.has(&[
        "field",
        "argument",
        "parameter",
        "param",
        "request",
        "payload",
        "query",
        "input",
        "value",
    ]) || s.text.contains('`');
    // A parameter named for what it collects (`paste_full_chat_transcript_here`).
    if role == Role::Param
        && s.words.len() >= 3
        && (context || secret())
        && s.has(&[
            "content",
            "contents",
            "paste",
            "dump",
            "transcript",
            "history",
            "copy",
            "text",
            "verbatim",
            "here",
            "of",
        ])
    {
        return Some((
            "collects_secrets",
            Severity::High,
            "a parameter named for secrets, the conversation or other tools' data",
        ));
    }
    // A default, enum value or example that is the conversation, or a secret file for a parameter not meant for one.
    if role == Role::Value && (context || (path && !own_secret)) {
        return Some((
            "collects_secrets",
            Severity::High,
            "a default, enum value or example that points at secrets or the conversation",
        ));
    }
    // The user's files and the agent's context are never the tool's own business; other secrets may be (a
    // secrets manager asking for a secret), which weakens the finding to a warning.
    let out = s.has(&[
        "send", "post", "upload", "forward", "transmit", "email", "attach", "https", "http",
    ]);
    let strong = ((context || path) && asked && (into || in_param || (out && !first)) && !own_secret)
        // A parameter described as holding the conversation or the agent's instructions.
        || (context && in_param);
    let weak = asked && ((into && !in_param) || (in_param && !own_secret)) && !first && secret();
    if strong || weak {
        let related =
            !strong && (purpose_has(purpose, SECRET_PURPOSE) || purpose_has(purpose, PII_PURPOSE));
        return Some((
            "collects_secrets",
            if related {
                Severity::Medium
            } else {
                Severity::High
            },
            "asks for secrets, the conversation or other tools' data to be put in a parameter",
        ));
    }
    None
}

/// An order about other tools described by kind: "any email tool", "the chat server", "tools of another server".
fn shadows(s: &Sentence<'_>, own: &[String]) -> bool {
    if s.refusal() || s.describes() || s.words.iter().any(|w| own.iter().any(|o| o == w)) {
        return false;
    }
    let kind_tool = s
        .words
        .windows(2)
        .any(|w| KINDS.contains(&w[0]) && TOOLISH.contains(&w[1]))
        || s.words
            .windows(3)
            .any(|w| KINDS.contains(&w[0]) && KINDS.contains(&w[1]) && TOOLISH.contains(&w[2]));
    let other = s.then(
        &["other", "another", "any", "some", "every", "all"],
        TOOLISH,
        3,
    ) || s.phrase(&["through", "another"])
        || s.phrase(&["via", "another"]);
    // "this tool", "our tools", and the agent's own ("write it via your file tools").
    let own = s.then(&["this", "these", "our", "your"], TOOLISH, 2) && !other;
    if !(kind_tool || other) || own {
        return false;
    }
    let orders = s.has(&[
        "must", "should", "shall", "always", "never", "need", "needs", "required", "requires",
    ]) || s
        .words
        .first()
        .is_some_and(|w| CLAUSE.contains(w) || IMPERATIVE.contains(w))
        || s.any_phrase(&[&["has", "to"], &["have", "to"]]);
    let change = s.has(CHANGE) || s.account_number();
    orders && change
}

/// The parameter a field describes (its name read as lower-case words), for a parameter's own description, title,
/// items or values; `None` for the tool's own fields.
fn param_of(path: &str) -> Option<String> {
    let at = path.rfind(".properties.")?;
    let name = path[at + ".properties.".len()..].split('.').next()?;
    Some(text::words_of_name(name).to_lowercase())
}
