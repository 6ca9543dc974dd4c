//! The held requests' store (`held.rs` drives the exchanges): the per-process key that signs `requestState` tokens
//! bound to one request, the child requests parked until the client's retry answers them, and the exchanges in
//! flight per server that a legacy child's requests are routed to. The same key signs the approval tokens of
//! `approval.rs` (#27), under a prefix of their own, so a retry carrying one is never taken for a held request's.

// Sampling and roots are deprecated by SEP-2577, but they are what legacy children ask for.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::atomic::AtomicU64;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use rmcp::ErrorData as McpError;
use rmcp::model::{
    CallToolResponse, GetPromptResponse, InputRequest, InputRequiredResult, ReadResourceResponse,
};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

use ad_core::error::{Error, Result};

use crate::sync::lock;

/// The prefix of the tokens minted here (a 2026-07-28 child's own `requestState` is never looked at).
const PREFIX: &str = "adrs1";
/// The prefix of approval tokens (`approval.rs`): a retry that carries one is an approval's, never a held request's.
pub(crate) const APPROVAL_PREFIX: &str = "adap1";

/// What a held exchange ends with.
pub(crate) enum Outcome {
    Call(CallToolResponse),
    Prompt(GetPromptResponse),
    Read(ReadResourceResponse),
}

/// What the exchange with the child reports to the request that drives it.
pub(crate) enum Step {
    /// The child asks the client something; the client's result (as JSON) or a refusal goes back on `reply`.
    Ask {
        request: InputRequest,
        reply: oneshot::Sender<std::result::Result<Value, McpError>>,
    },
    Done(Result<Outcome>),
}

/// The request a token belongs to: a retry must repeat it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Binding {
    pub server: String,
    /// `tools/call`, `prompts/get` or `resources/read`.
    pub method: String,
    /// The tool, prompt or resource URI as the child knows it.
    pub name: String,
    /// SHA-256 of the request's arguments (JSON), hex.
    pub args: String,
}

impl Binding {
    pub fn new(server: &str, method: &str, name: &str, args: Option<&Value>) -> Binding {
        // Keys sorted: a retry may send the same arguments in another order (serde_json keeps insertion order here).
        let args = serde_json::to_vec(&ad_registry::pinning::canonical(
            args.unwrap_or(&Value::Null),
        ))
        .unwrap_or_default();
        Binding {
            server: server.to_owned(),
            method: method.to_owned(),
            name: name.to_owned(),
            args: hex(&Sha256::digest(&args)),
        }
    }

    fn asking(&self, asked: InputRequiredResult) -> Outcome {
        match self.method.as_str() {
            "prompts/get" => Outcome::Prompt(asked.into()),
            "resources/read" => Outcome::Read(asked.into()),
            _ => Outcome::Call(asked.into()),
        }
    }
}

/// Lower-case hex of `bytes` (one allocation, no formatter per byte: this runs on every held call).
fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(DIGITS[usize::from(b >> 4)] as char);
        out.push(DIGITS[usize::from(b & 15)] as char);
    }
    out
}

/// What a token says, signed.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Claims {
    /// The process that minted it.
    pub(super) p: String,
    /// The held exchange.
    pub(super) i: u64,
    /// Expiry, milliseconds since the Unix epoch.
    pub(super) e: u64,
    pub(super) b: Binding,
}

/// What an approval token says, signed (`approval.rs`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ApprovalClaims {
    /// The process that minted it.
    pub p: String,
    /// `ask`: the person's answer is wanted (in `inputResponses.approval`); `go`: approved, the call goes on and `s`
    /// is the child's own `requestState` to hand back to it.
    pub k: String,
    /// The approval's id.
    pub i: String,
    /// The deadline, milliseconds since the Unix epoch.
    pub e: u64,
    /// The digest of (server, tool, arguments) the approval is bound to.
    pub d: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub s: Option<String>,
    /// Whether "for this session" was offered (the caller has a session).
    #[serde(default)]
    pub o: bool,
}

/// The process a token names, to tell another process's token from a forged one.
trait Minted {
    fn process(&self) -> &str;
}

impl Minted for Claims {
    fn process(&self) -> &str {
        &self.p
    }
}

impl Minted for ApprovalClaims {
    fn process(&self) -> &str {
        &self.p
    }
}

/// Why a token is refused (the `requestState` value in the error's data).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// Not a token of ours, or altered.
    Tampered,
    Expired,
    /// Minted for another request (server, method, name or arguments differ).
    Mismatched,
    /// Minted by another agent-discover process, which holds the call.
    Elsewhere,
    /// Ours and valid, but the call has ended or was answered already.
    Gone,
}

impl Refusal {
    fn as_str(self) -> &'static str {
        match self {
            Refusal::Tampered => "tampered",
            Refusal::Expired => "expired",
            Refusal::Mismatched => "mismatched",
            Refusal::Elsewhere => "elsewhere",
            Refusal::Gone => "gone",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Refusal::Tampered => "requestState failed its integrity check",
            Refusal::Expired => {
                "requestState has expired: the call it belongs to passed its deadline"
            }
            Refusal::Mismatched => {
                "requestState belongs to another request (server, tool, prompt, resource or arguments differ)"
            }
            Refusal::Elsewhere => {
                "requestState was issued by another agent-discover process, which holds the call; send the retry there"
            }
            Refusal::Gone => {
                "the call this requestState belongs to has ended or was answered already"
            }
        }
    }

    /// The JSON-RPC error the client gets: invalid params, the reason in `data.requestState`.
    pub fn error(self, server: &str) -> Error {
        Error::Child {
            server: server.to_owned(),
            error: Box::new(McpError::invalid_params(
                self.message(),
                Some(json!({"requestState": self.as_str()})),
            )),
        }
    }
}

/// One child request asked of the client: the key its answer comes under, the request, and where the answer goes.
pub(super) struct Asked {
    pub(super) key: String,
    pub(super) request: InputRequest,
    pub(super) reply: oneshot::Sender<std::result::Result<Value, McpError>>,
}

/// A child's requests waiting for the client's answers.
pub(super) struct Parked {
    pub(super) steps: mpsc::Receiver<Step>,
    pub(super) asks: Vec<Asked>,
    pub(super) token: String,
    pub(super) expires: u64,
    pub(super) cancel: CancellationToken,
    /// What the child was refused earlier in the exchange (the caller could not answer it).
    pub(super) refused: Option<&'static str>,
}

impl Parked {
    /// The input-required result asking what is still unanswered.
    pub(super) fn asking(&self, binding: &Binding) -> Outcome {
        binding.asking(InputRequiredResult::new(
            Some(
                self.asks
                    .iter()
                    .map(|a| (a.key.clone(), a.request.clone()))
                    .collect(),
            ),
            Some(self.token.clone()),
        ))
    }
}

/// One exchange in flight: its id and where its child's requests go.
type Asking = (u64, mpsc::Sender<Step>);

/// The signing key, the held requests and the exchanges that take a child's requests.
pub(crate) struct Held {
    key: aws_lc_rs::hmac::Key,
    pub(super) process: String,
    pub(crate) next: AtomicU64,
    pub(super) parked: std::sync::Mutex<HashMap<u64, Parked>>,
    /// Exchanges in flight per server whose child requests are minted into input-required results, newest last.
    pub(crate) asking: std::sync::Mutex<HashMap<String, Vec<Asking>>>,
    /// Approval `go` tokens already used, with their expiry (`approval.rs`): each carries one round of an approved
    /// call, once.
    spent: std::sync::Mutex<HashMap<String, u64>>,
}

pub(super) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

impl Held {
    pub fn new() -> Held {
        let random = ad_registry::secrets::random_bytes();
        Held {
            key: aws_lc_rs::hmac::Key::new(aws_lc_rs::hmac::HMAC_SHA256, &random),
            process: random[..6].iter().map(|b| format!("{b:02x}")).collect(),
            next: AtomicU64::new(1),
            parked: Default::default(),
            asking: Default::default(),
            spent: Default::default(),
        }
    }

    pub(super) fn seal(&self, claims: &Claims) -> String {
        self.sign(PREFIX, claims)
    }

    /// An approval token (`approval.rs`).
    pub(crate) fn seal_approval(&self, claims: &ApprovalClaims) -> String {
        self.sign(APPROVAL_PREFIX, claims)
    }

    fn sign(&self, prefix: &str, claims: &impl Serialize) -> String {
        let payload = B64.encode(serde_json::to_vec(claims).unwrap_or_default());
        let signed = format!("{prefix}.{payload}");
        let tag = aws_lc_rs::hmac::sign(&self.key, signed.as_bytes());
        format!("{signed}.{}", B64.encode(tag.as_ref()))
    }

    /// What a token under `prefix` says, when this process signed it.
    fn unseal<T: Minted + serde::de::DeserializeOwned>(
        &self,
        prefix: &str,
        token: &str,
    ) -> std::result::Result<T, Refusal> {
        let (signed, tag) = token.rsplit_once('.').ok_or(Refusal::Tampered)?;
        let payload = signed
            .strip_prefix(prefix)
            .and_then(|p| p.strip_prefix('.'))
            .ok_or(Refusal::Tampered)?;
        let tag = B64.decode(tag).map_err(|_| Refusal::Tampered)?;
        let claims: Option<T> = B64
            .decode(payload)
            .ok()
            .and_then(|p| serde_json::from_slice(&p).ok());
        if aws_lc_rs::hmac::verify(&self.key, signed.as_bytes(), &tag).is_err() {
            // Not signed with our key: another process's (it names itself), or forged.
            return Err(match claims {
                Some(c) if c.process() != self.process => Refusal::Elsewhere,
                _ => Refusal::Tampered,
            });
        }
        claims.ok_or(Refusal::Tampered)
    }

    /// The held exchange a token names, checked against the retry's request at time `now` (ms).
    pub(super) fn open(
        &self,
        token: &str,
        binding: &Binding,
        now: u64,
    ) -> std::result::Result<u64, Refusal> {
        let claims: Claims = self.unseal(PREFIX, token)?;
        if &claims.b != binding {
            return Err(Refusal::Mismatched);
        }
        if now >= claims.e {
            return Err(Refusal::Expired);
        }
        Ok(claims.i)
    }

    /// What an approval token says, when this process signed it (its digest and deadline are the caller's to check).
    pub(crate) fn open_approval(
        &self,
        token: &str,
    ) -> std::result::Result<ApprovalClaims, Refusal> {
        self.unseal(APPROVAL_PREFIX, token)
    }

    /// Marks an approval `go` token as used; false when it was used before. Tokens past their expiry are forgotten
    /// (they are refused as expired anyway).
    pub(crate) fn spend(&self, id: &str, expires: u64, now: u64) -> bool {
        let mut spent = lock(&self.spent);
        spent.retain(|_, e| *e > now);
        spent.insert(id.to_owned(), expires).is_none()
    }

    /// A random id, for approvals (hex, 128 bits).
    pub(crate) fn new_id(&self) -> String {
        ad_registry::secrets::random_bytes()[..16]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    /// This process's name in tokens (random per process).
    pub(crate) fn process(&self) -> &str {
        &self.process
    }

    /// The exchange with `server` a child request belongs to: a legacy child does not say which of our requests it
    /// asks for, so the newest one that is not already waiting for the client's answer (a child blocked on an answer
    /// rarely asks again), else the newest, when `parked_ok` (no other call of the child is in flight, which the
    /// request would otherwise belong to).
    pub fn asking_for(&self, server: &str, parked_ok: bool) -> Option<mpsc::Sender<Step>> {
        let asking = lock(&self.asking);
        let all = asking.get(server)?;
        let parked = lock(&self.parked);
        all.iter()
            .rev()
            .find(|(id, _)| !parked.contains_key(id))
            .or(all.last().filter(|_| parked_ok))
            .map(|(_, tx)| tx.clone())
    }

    pub(crate) fn forget(&self, server: &str, id: u64) {
        let mut asking = lock(&self.asking);
        if let Some(v) = asking.get_mut(server) {
            v.retain(|(i, _)| *i != id);
            if v.is_empty() {
                asking.remove(server);
            }
        }
        lock(&self.parked).remove(&id);
    }

    pub(super) fn park(&self, id: u64, parked: Parked) {
        let now = now_ms();
        let mut all = lock(&self.parked);
        // Requests nobody came back for: their calls are timed out by now; dropping them refuses the child's request.
        all.retain(|_, p| {
            let live = p.expires > now;
            if !live {
                p.cancel.cancel();
            }
            live
        });
        all.insert(id, parked);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_names_the_arguments_by_the_hex_of_their_digest() {
        let args = json!({"text": "ping", "n": [1, 2]});
        // Over the keys sorted: `{"n":[1,2],"text":"ping"}`.
        let want: String = Sha256::digest(br#"{"n":[1,2],"text":"ping"}"#)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(
            Binding::new("fx", "tools/call", "echo", Some(&args)).args,
            want
        );
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
    }

    fn binding() -> Binding {
        Binding::new(
            "fx",
            "tools/call",
            "test_elicitation",
            Some(&json!({"a": 1})),
        )
    }

    fn mint(held: &Held, id: u64, expires: u64) -> String {
        held.seal(&Claims {
            p: held.process.clone(),
            i: id,
            e: expires,
            b: binding(),
        })
    }

    /// Issue 29: a parked exchange (its client was sent an input-required result and has not come back) takes a
    /// child's request only when no other call of the child is in flight; an exchange whose call runs takes it first.
    #[test]
    fn a_parked_exchange_takes_a_childs_request_only_when_nothing_else_calls_the_child() {
        let held = Held::new();
        let (parked_tx, parked_steps) = mpsc::channel(1);
        lock(&held.asking)
            .entry("fx".into())
            .or_default()
            .push((1, parked_tx));
        held.park(
            1,
            Parked {
                steps: parked_steps,
                asks: Vec::new(),
                token: String::new(),
                expires: now_ms() + 60_000,
                cancel: CancellationToken::new(),
                refused: None,
            },
        );
        assert!(held.asking_for("fx", true).is_some());
        assert!(held.asking_for("fx", false).is_none());
        assert!(held.asking_for("other", true).is_none());
        let (running_tx, _running_steps) = mpsc::channel(1);
        lock(&held.asking)
            .get_mut("fx")
            .unwrap()
            .push((2, running_tx.clone()));
        let took = held.asking_for("fx", false).expect("the running exchange");
        assert!(took.same_channel(&running_tx));
        held.forget("fx", 2);
        held.forget("fx", 1);
        assert!(held.asking_for("fx", true).is_none());
    }

    #[test]
    fn a_token_opens_only_for_its_own_request_before_it_expires() {
        let held = Held::new();
        let token = mint(&held, 7, 10_000);
        assert_eq!(held.open(&token, &binding(), 9_999), Ok(7));
        assert_eq!(held.open(&token, &binding(), 10_000), Err(Refusal::Expired));
        let other_args = Binding::new(
            "fx",
            "tools/call",
            "test_elicitation",
            Some(&json!({"a": 2})),
        );
        assert_eq!(held.open(&token, &other_args, 0), Err(Refusal::Mismatched));
        let other_tool = Binding::new("fx", "tools/call", "test_sampling", Some(&json!({"a": 1})));
        assert_eq!(held.open(&token, &other_tool, 0), Err(Refusal::Mismatched));
        let other_method = Binding::new(
            "fx",
            "prompts/get",
            "test_elicitation",
            Some(&json!({"a": 1})),
        );
        assert_eq!(
            held.open(&token, &other_method, 0),
            Err(Refusal::Mismatched)
        );
    }

    #[test]
    fn altered_forged_and_foreign_tokens_are_refused() {
        let held = Held::new();
        let token = mint(&held, 7, u64::MAX);
        assert_eq!(
            held.open(&format!("{token}-TAMPERED"), &binding(), 0),
            Err(Refusal::Tampered)
        );
        // A payload rewritten (another call id, a later expiry) keeps the old tag: refused.
        let (_, tag) = token.rsplit_once('.').unwrap();
        let forged_claims = Claims {
            p: held.process.clone(),
            i: 8,
            e: u64::MAX,
            b: binding(),
        };
        let forged = format!(
            "{PREFIX}.{}.{tag}",
            B64.encode(serde_json::to_vec(&forged_claims).unwrap())
        );
        assert_eq!(held.open(&forged, &binding(), 0), Err(Refusal::Tampered));
        for junk in ["", "x", "adrs1.", "adrs1.e30.AAAA", "a.b.c"] {
            assert_eq!(
                held.open(junk, &binding(), 0),
                Err(Refusal::Tampered),
                "{junk}"
            );
        }
        // Another process's token (its own key and name): it holds the call.
        let other = Held::new();
        let theirs = mint(&other, 7, u64::MAX);
        assert_eq!(held.open(&theirs, &binding(), 0), Err(Refusal::Elsewhere));
        assert_eq!(other.open(&theirs, &binding(), 0), Ok(7));
    }

    #[test]
    fn approval_tokens_are_apart_from_held_tokens_and_unforgeable() {
        let held = Held::new();
        let claims = ApprovalClaims {
            p: held.process.clone(),
            k: "ask".into(),
            i: held.new_id(),
            e: 10_000,
            d: "digest".into(),
            s: None,
            o: true,
        };
        let token = held.seal_approval(&claims);
        assert!(token.starts_with("adap1."), "{token}");
        assert_eq!(held.open_approval(&token), Ok(claims.clone()));
        // Never taken for a held request's token, nor the other way round.
        assert_eq!(held.open(&token, &binding(), 0), Err(Refusal::Tampered));
        let theirs = mint(&held, 7, u64::MAX);
        assert_eq!(held.open_approval(&theirs), Err(Refusal::Tampered));
        // Rewritten claims (another digest, a later deadline) keep the old tag: refused.
        let (_, tag) = token.rsplit_once('.').unwrap();
        for forged in [
            ApprovalClaims {
                d: "other".into(),
                ..claims.clone()
            },
            ApprovalClaims {
                e: u64::MAX,
                ..claims.clone()
            },
            ApprovalClaims {
                k: "go".into(),
                ..claims.clone()
            },
        ] {
            let forged = format!(
                "{APPROVAL_PREFIX}.{}.{tag}",
                B64.encode(serde_json::to_vec(&forged).unwrap())
            );
            assert_eq!(held.open_approval(&forged), Err(Refusal::Tampered));
        }
        assert_eq!(
            held.open_approval(&format!("{token}x")),
            Err(Refusal::Tampered)
        );
        let other = Held::new();
        let foreign = other.seal_approval(&ApprovalClaims {
            p: other.process.clone(),
            ..claims
        });
        assert_eq!(held.open_approval(&foreign), Err(Refusal::Elsewhere));
        assert_ne!(held.new_id(), held.new_id());
        // A go token serves once, until it expires.
        assert!(held.spend("g1", 100, 0));
        assert!(!held.spend("g1", 100, 50));
        assert!(held.spend("g2", 100, 50));
        assert!(held.spend("g1", 300, 100), "forgotten once expired");
    }

    #[test]
    fn a_refusal_is_invalid_params_naming_why() {
        let Error::Child { error, .. } = Refusal::Expired.error("fx") else {
            panic!("not a JSON-RPC error")
        };
        assert_eq!(error.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        assert_eq!(error.data, Some(json!({"requestState": "expired"})));
    }
}
