//! What the proxy holds, data only: the handle ([`Proxy`]) and its shared state ([`Inner`]), each child's slot and
//! connection ([`Slot`], [`Child`]), and the structures that point back into them (the rmcp client handler of a
//! child, both ends of the fast lane and its calls in flight), with the plain records they keep (progress routes,
//! subscriptions, task owners, the children started with users' own keys). The object graph is declared here, in one
//! place, so that the files acting on it (named in each field's doc) all sit above it; none of them is imported
//! here. What a field keeps for one of them that points nowhere into the graph is that file's leaf, imported from
//! below (`callguard/guarding.rs`, `pages/store.rs`, `local/server.rs`, `limits/`, `personal/bounds.rs`).
//! [`Proxy::new`] builds it empty.

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolResponse, ClientJsonRpcMessage, ErrorData, ProgressToken, RequestId,
    ServerCapabilities, ServerJsonRpcMessage, TaskStatusNotificationParams, Tool,
};
use rmcp::service::RunningService;
use rmcp::{Peer, RoleClient, RoleServer};
use serde_json::value::RawValue;
use tokio::sync::{Notify, watch};

use crate::callguard::guarding::Guarding;
use crate::coalesce::Sink;
use crate::held::store::Held;
use crate::limits::{Admission, Limits};
use crate::local::server::Local;
use crate::metrics::CallMetrics;
use crate::pages::store::Pages;
use crate::personal::bounds::PersonalBounds;
use crate::spawn::StderrRing;
use ad_core::error::Error;
use ad_core::events::EventBus;
use ad_core::model::Transport;
use ad_registry::calllog::CallLog;
use ad_registry::config::Timeouts;
use ad_registry::registry::Registry;
use ad_registry::secrets::Secrets;

/// Told about every finished proxied call: server, tool, latency, success.
pub type CallObserver = Arc<dyn Fn(&str, &str, Duration, bool) + Send + Sync>;

/// A 2026-07-28 request that asked for log messages (`_meta` logLevel) while it waits on a child: it gets the
/// child's messages at or above its level on its own stream.
#[allow(deprecated)]
pub(super) struct LogCaller {
    /// Unique in this process, to remove it when the request ends.
    pub(super) id: u64,
    pub(super) peer: Peer<RoleServer>,
    pub(super) level: rmcp::model::LoggingLevel,
    /// On a per-server endpoint: `logger` as the child sent it.
    pub(super) scoped: bool,
}

/// The application's rule: which servers and tools a principal may see, and whether it sees everything (an admin).
pub trait Rule: Send + Sync {
    /// Whether `p` may see `server` (`tool` `None`) or one of its tools.
    fn allows(&self, p: &ad_core::identity::Principal, server: &str, tool: Option<&str>) -> bool;
    /// Whether `p` administers this front: sees every server, every user's calls, and may change the registry.
    fn is_admin(&self, p: &ad_core::identity::Principal) -> bool;
}

/// The rule set once by the application (`visibility.rs`).
pub type Visibility = Arc<dyn Rule>;

/// The proxy handle; cheap to clone.
#[derive(Clone)]
pub struct Proxy {
    pub(super) inner: Arc<Inner>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Proxy { .. }")
    }
}

/// What every clone of a [`Proxy`] shares.
pub(crate) struct Inner {
    pub(super) registry: Registry,
    pub(super) secrets: Secrets,
    pub(super) oauth: ad_oauth::OAuth,
    pub(super) events: EventBus,
    pub(super) calllog: Arc<CallLog>,
    pub(super) timeouts: Timeouts,
    pub(super) guard_exe: PathBuf,
    /// How stdio children are confined (`sandbox.rs`).
    pub(super) sandbox: ad_registry::config::SandboxConfig,
    /// The guards on calls: settings and decisions (`callguard.rs`).
    pub(super) guards: Guarding,
    pub(super) children: Mutex<HashMap<String, Slot>>,
    /// Serialises activate/deactivate/restart of one server.
    pub(super) locks: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    /// When following an active flag last failed here, by server (see [`Proxy::follow`]).
    pub(super) follow_failures: Mutex<HashMap<String, Instant>>,
    /// Servers flagged active whose restore at startup has not finished here (`restore.rs`).
    pub(super) restoring: Mutex<HashMap<String, Restoring>>,
    /// Where each call's progress goes, by the server called and the progress token rmcp gave the request (each
    /// child's connection numbers its tokens from the same start, so the token alone may name two calls).
    pub(super) progress: Mutex<HashMap<(String, ProgressToken), ProgressRoute>>,
    /// Held (written) by a call from just before its request is handed to rmcp until its progress route and caller
    /// are registered (`call.rs`): whatever the child sends about the request comes after, and a progress
    /// notification or a child's request read meanwhile waits here ([`Inner::registered`]) instead of finding no
    /// call to go to.
    pub(super) registering: tokio::sync::RwLock<()>,
    /// Connected MCP clients (legacy sessions), newest last, for forwarding child requests.
    pub(super) clients: Mutex<Vec<(u64, Peer<RoleServer>)>>,
    /// Which client is calling each server right now (most recent last).
    pub(super) callers: Mutex<HashMap<String, Vec<CallerEntry>>>,
    /// 2026-07-28 callers that set a logLevel on their request, per server called: they get its log messages at or
    /// above that level while the call runs (they have no session to be pushed to otherwise).
    pub(super) log_callers: Mutex<HashMap<String, Vec<LogCaller>>>,
    /// Ids of [`LogCaller`]s.
    pub(super) log_caller_ids: std::sync::atomic::AtomicU64,
    /// How many children's log messages are being forwarded now (`forward::flush_logs`).
    pub(super) logs_in_flight: watch::Sender<usize>,
    pub(super) metrics: Arc<CallMetrics>,
    pub(super) observer: Mutex<Option<CallObserver>>,
    /// The log level clients last set (`logging/setLevel`), applied to every child.
    #[allow(deprecated)]
    pub(super) log_level: Mutex<Option<rmcp::model::LoggingLevel>>,
    /// Clients' resource subscriptions, by exposed URI.
    pub(super) subscriptions: Mutex<Vec<Subscription>>,
    /// The `subscriptions/listen` streams that stand for `resources/subscribe` with 2026-07-28 children, by exposed URI
    /// and the user whose credentials opened it (`Subscription::user`; issue 30).
    pub(super) resource_listens: Mutex<HashMap<ListenKey, tokio::task::AbortHandle>>,
    /// Held while a user's `subscriptions/listen` is opened: the OAuth client learns whose it is by its filter
    /// (`ad_oauth::Session::listen_as`), one at a time.
    pub(super) listen_opening: tokio::sync::Mutex<()>,
    /// Clients of a per-server endpoint, by client id: the one server they see.
    pub(super) scopes: Mutex<HashMap<u64, String>>,
    /// Legacy children's requests held for 2026-07-28 clients as input-required results (`held.rs`).
    pub(super) held: Held,
    /// The sessions that created children's tasks, by (server, the child's task id): where `notifications/tasks` go.
    pub(super) task_owners: Mutex<Owners>,
    /// The skill files whose manifest entries agent-discover handed on, by (server, the child's URI): reads of them are
    /// verified against these before they are handed on (`skills.rs`).
    pub(super) skill_files: Mutex<crate::skills::manifests::Manifests>,
    /// Tool calls relayed by the fast lane (`relay.rs`), counted by each child's lane.
    pub(super) fast_calls: Arc<std::sync::atomic::AtomicU64>,
    /// The database file, whose other writers a call waiting for a person's approval watches (`approval.rs`).
    pub(super) db_path: PathBuf,
    /// Which servers and tools a caller's principal may see (`visibility.rs`, issue 30).
    pub(super) visibility: Mutex<Option<Visibility>>,
    /// Large results kept to be read in pages (`pages.rs`).
    pub(super) pages: Pages,
    /// The built-in server served by the application itself (saved scripts, `local.rs`).
    pub(super) local: Mutex<Option<Local>>,
    /// Rate limits, concurrency caps and circuit breakers, per server (`limits/`).
    pub(super) limits: Limits,
    /// The policies for calls (`policy.rs`), set once by the application.
    pub(super) policies: std::sync::OnceLock<ad_policy::Policies>,
    /// The children started with a user's own keys, one per (server, user), and their bounds (`personal.rs`).
    pub(super) personal: Personal,
}

/// How a restore ended: `None` while it runs, then `Ok` or the start's error.
pub(super) type Outcome = Option<std::result::Result<(), String>>;

/// A server flagged active whose restore has not finished in this process.
pub(super) struct Restoring {
    /// What it exposed last time, as stored (see `Inner::stored_tools`).
    pub(super) tools: Vec<Tool>,
    pub(super) done: watch::Receiver<Outcome>,
    /// Taken by the task that starts it (`Proxy::restore_in_background`).
    pub(super) start: Option<watch::Sender<Outcome>>,
}

/// A child's place in [`Inner::children`]: its one owner.
pub(super) enum Slot {
    Running(Arc<Child>),
    /// Crashed; restarted on next use once `retry_at` has passed.
    Crashed {
        server_id: i64,
        failures: u32,
        retry_at: Instant,
        error: String,
        tools: Vec<Tool>,
        stderr: Arc<StderrRing>,
        transport: Transport,
        started_at: String,
    },
}

/// A call of a child in flight, in [`Inner::callers`]: the progress route key of the call, the calling client, and
/// whether the call is one of a held exchange (`Caller::in_exchange`).
pub(super) type CallerEntry = (ProgressToken, Peer<RoleServer>, bool);

/// A connected child (`start.rs`): its rmcp connection, process group and what it declared.
pub(super) struct Child {
    pub(super) name: String,
    pub(super) server_id: i64,
    pub(super) transport: Transport,
    pub(super) peer: Peer<RoleClient>,
    pub(super) service: tokio::sync::Mutex<Option<RunningService<RoleClient, ChildClient>>>,
    pub(super) tools: Mutex<Vec<Tool>>,
    pub(super) capabilities: ServerCapabilities,
    pub(super) pid: Option<u32>,
    pub(super) pgid: i32,
    pub(super) lifeline: Mutex<Option<crate::spawn::Lifeline>>,
    pub(super) stderr: Arc<StderrRing>,
    /// Becomes `Some(cause)` when the child is gone.
    pub(super) exited: watch::Receiver<Option<String>>,
    pub(super) stopping: AtomicBool,
    pub(super) started_at: String,
    pub(super) failures: u32,
    pub(super) call_timeout: Duration,
    /// The protocol revision negotiated with the child (its era).
    pub(super) protocol: rmcp::model::ProtocolVersion,
    /// The server's OAuth session (Streamable HTTP servers without a configured Authorization header).
    pub(super) auth: Option<Arc<ad_oauth::Session>>,
    /// Progress notifications read from a stdio child (`typed.rs`) or a Streamable HTTP child (`counted.rs`), per
    /// token; empty for legacy SSE children.
    pub(super) progress_seen: ProgressSeen,
    /// The level agent-discover last set on a legacy child with `logging/setLevel` (the lowest any client wants;
    /// each client is then sent what it asked for, `forward.rs`); `None` until one is set.
    #[allow(deprecated)]
    pub(super) log_floor: Mutex<Option<rmcp::model::LoggingLevel>>,
    /// The fast lane to a stdio child (`relay.rs`); `None` for other transports.
    pub(super) lane: Option<Arc<ChildLane>>,
    /// Its tools whose approval policy is not `allow` (`approval.rs`), which the fast lane never relays.
    pub(super) gated: Gated,
    /// A Streamable HTTP child that negotiated 2026-07-28 and also accepts the legacy handshake: a second connection
    /// in the legacy era, which legacy clients' calls, subscriptions and log level go to (`era.rs`); connected on the
    /// first such request (by `legacy_connect`, made by `start.rs`), `None` inside when the child refused it. Empty
    /// while no attempt has settled: an attempt cut short (its request cancelled) or without an answer (a timeout, a
    /// transport failure, a server error) is made again by a later request, not before `legacy_retry`.
    pub(super) legacy: tokio::sync::OnceCell<Option<LegacySession>>,
    pub(super) legacy_connect: Option<LegacyConnector>,
    pub(super) legacy_retry: Mutex<Option<Instant>>,
    /// The runtime that runs a stdio Node child (`runtime.rs`); `None` for other children.
    pub(super) runtime: Option<crate::runtime::RuntimeInfo>,
    /// A launcher fetched for this start (`launcher.rs`), told to the user in the activation's answer.
    pub(super) fetched: Option<String>,
    /// The user whose own keys this child was started with (`personal.rs`); `None` for the server's shared child.
    pub(super) personal: Option<Arc<str>>,
}

/// A (server, user) pair: whose child.
pub(super) type Key = (String, String);

/// One (server, user)'s place: being started (it counts towards the bounds), or running.
pub(super) enum Place {
    Starting,
    Running {
        child: Arc<Child>,
        /// The user's values it was started with (`Secrets::personal_fingerprint`).
        fingerprint: u64,
        last_used: Instant,
    },
}

/// The children with users' own keys and their bounds (`personal.rs`), in [`Inner`].
pub(crate) struct Personal {
    pub(super) places: Mutex<HashMap<Key, Place>>,
    /// One start at a time per (server, user).
    pub(super) gates: Mutex<HashMap<Key, Arc<tokio::sync::Mutex<()>>>>,
    pub(super) bounds: Mutex<PersonalBounds>,
    pub(super) reaper: AtomicBool,
    /// Wakes the reaper when the bounds change.
    pub(super) wake: Arc<tokio::sync::Notify>,
}

impl Default for Personal {
    fn default() -> Personal {
        Personal {
            places: Mutex::default(),
            gates: Mutex::default(),
            bounds: Mutex::new(PersonalBounds::from_env()),
            reaper: AtomicBool::new(false),
            wake: Arc::default(),
        }
    }
}

/// Opens a child's legacy session (`start.rs`): each call is one attempt, with its own connection.
pub(super) type LegacyConnector =
    Arc<dyn Fn() -> std::pin::Pin<Box<dyn Future<Output = LegacyAttempt> + Send>> + Send + Sync>;

/// How an attempt to open a child's legacy session ended.
pub(super) enum LegacyAttempt {
    Connected(RunningService<RoleClient, ChildClient>),
    /// The child answered `initialize` with a refusal (a JSON-RPC error, an HTTP 4xx): it serves no legacy session.
    Refused(String),
    /// No answer the child meant: a timeout, a transport failure, a server error (5xx, 429), an authorization still
    /// to be given; worth another attempt later.
    Failed(String),
}

/// The legacy-era connection of a child that speaks both eras over Streamable HTTP: what a legacy client reaches
/// directly (the child's own sampling, elicitation and roots requests, `resources/subscribe`, `logging/setLevel`),
/// which its 2026-07-28 connection may not offer.
pub(super) struct LegacySession {
    pub(super) peer: Peer<RoleClient>,
    pub(super) service: tokio::sync::Mutex<Option<RunningService<RoleClient, ChildClient>>>,
    pub(super) capabilities: ServerCapabilities,
    pub(super) protocol: rmcp::model::ProtocolVersion,
}

/// A child's tools whose approval policy is `ask` or `deny`, computed when its tools are gated and when the rules
/// change (`approval.rs`); `any` keeps the fast lane's check to one atomic load while no rule applies.
#[derive(Default)]
pub(super) struct Gated {
    pub(super) any: AtomicBool,
    pub(super) tools: Mutex<HashSet<String>>,
    /// The store's fresh marker when `tools` was computed (`Registry::rules_marker`, read before the rules): the
    /// fast lane trusts `tools` only while the marker is the same, so a rule another process committed applies to
    /// the next call, before the change feed reports it.
    pub(super) marker: Mutex<Option<(i64, u64)>>,
}

impl Proxy {
    // One handle per service the proxy works with; a struct of them would only be taken apart here.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        registry: Registry,
        secrets: Secrets,
        oauth: ad_oauth::OAuth,
        events: EventBus,
        calllog: Arc<CallLog>,
        timeouts: Timeouts,
        guard_exe: PathBuf,
        sandbox: ad_registry::config::SandboxConfig,
        db_path: PathBuf,
    ) -> Proxy {
        let inner = Arc::new(Inner {
            registry: registry.clone(),
            secrets,
            oauth,
            events,
            calllog,
            timeouts,
            guard_exe,
            sandbox,
            guards: Default::default(),
            children: Mutex::default(),
            locks: Mutex::default(),
            follow_failures: Mutex::default(),
            restoring: Mutex::default(),
            progress: Mutex::default(),
            registering: tokio::sync::RwLock::default(),
            clients: Mutex::default(),
            callers: Mutex::default(),
            log_callers: Mutex::default(),
            log_caller_ids: std::sync::atomic::AtomicU64::new(1),
            logs_in_flight: watch::Sender::new(0),
            metrics: CallMetrics::start(registry.store().clone()),
            observer: Mutex::new(None),
            log_level: Mutex::new(None),
            subscriptions: Mutex::default(),
            resource_listens: Mutex::default(),
            listen_opening: tokio::sync::Mutex::default(),
            scopes: Mutex::default(),
            held: Held::new(),
            task_owners: Mutex::default(),
            skill_files: Mutex::default(),
            fast_calls: Arc::default(),
            db_path,
            visibility: Mutex::new(None),
            pages: Default::default(),
            local: Mutex::new(None),
            limits: Limits::new(registry.clone()),
            policies: std::sync::OnceLock::new(),
            personal: Default::default(),
        });
        Proxy { inner }
    }
}

/// Our rmcp client handler for one child (`client.rs`).
#[derive(Clone)]
pub struct ChildClient {
    pub(super) proxy: Weak<Inner>,
    pub(super) server: String,
    /// The handler of a child's [`LegacySession`]: its progress tokens are told apart with [`legacy_token`].
    pub(super) legacy_session: bool,
    /// Its transport counted each log message as it read it (`typed.rs`, before rmcp hands the message to a task of
    /// its own): forwarding one ends that count instead of starting one (`forward::flush_logs`).
    pub(super) logs_counted: bool,
    /// The user of a child started with their own keys (`personal.rs`): its progress, log messages and requests go
    /// to that user's calls only.
    pub(super) personal: Option<Arc<str>>,
}

/// The key of a progress route for a call made on a child's [`LegacySession`]: rmcp numbers progress tokens per
/// connection, so the two connections of one child may use the same token at once.
pub(super) fn legacy_token(token: &ProgressToken) -> ProgressToken {
    ProgressToken(rmcp::model::NumberOrString::String(
        format!("legacy-session:{}", token.0).into(),
    ))
}

/// Where a call's progress goes (`call.rs`), by the progress token rmcp gave the request to the child.
pub(super) struct ProgressRoute {
    pub(super) caller: Option<(Peer<RoleServer>, ProgressToken)>,
    /// When the child last reported progress on this call; the call's deadline is measured from it.
    pub(super) last_progress: Arc<Mutex<tokio::time::Instant>>,
    /// Held while a progress notification of this call is being forwarded, so the result waits for it.
    pub(super) forwarding: Arc<tokio::sync::Mutex<()>>,
    /// How many of this call's progress notifications have been forwarded (or dropped for want of a caller).
    pub(super) forwarded: Arc<tokio::sync::watch::Sender<u64>>,
    /// The child's progress as its transport read it (stdio children), which sets the forwarding order.
    pub(super) seen: ProgressSeen,
}

/// One client's subscription to one exposed resource URI.
pub(super) struct Subscription {
    pub(super) uri: String,
    pub(super) client: u64,
    pub(super) peer: Peer<RoleServer>,
    /// A per-server client: updates carry the child's own URI.
    pub(super) raw: bool,
    /// The user whose credentials subscribed the child (issue 30: a token-exchange or per-user server), named as
    /// `AuthedClient` knows it; `None` on a server with one set of credentials.
    pub(super) user: Option<String>,
}

/// A resource listen stream's key: the exposed URI and the user it is for.
pub(super) type ListenKey = (String, Option<String>);

/// The client session that created a child's task, and the id it knows the task by.
pub(super) struct Owner {
    pub(super) peer: Peer<RoleServer>,
    pub(super) exposed: String,
}

/// Who is told of which task's status.
#[derive(Default)]
pub(super) struct Owners {
    pub(super) by_task: HashMap<(String, String), Owner>,
    /// The last notification of each task no session owns yet, by (server, the child's id).
    pub(super) early: HashMap<(String, String), TaskStatusNotificationParams>,
    /// The user whose call made each task on a server that takes each user's own credentials (issue 30), by (server,
    /// the child's id), oldest first: only that user's tasks requests reach it (`tasks.rs`).
    pub(super) users: std::collections::VecDeque<((String, String), String)>,
}

/// Progress notifications read from a child, per progress token, counted in the order the child wrote them: when a
/// call's result has been read, every progress notification the child sent before it has been counted, so the call
/// can wait until as many have been forwarded (`call.rs`) and the caller gets them before the result.
pub type ProgressSeen = Arc<Mutex<HashMap<ProgressToken, SeenProgress>>>;

/// One call's progress as read from the child.
#[derive(Debug, Default)]
pub struct SeenProgress {
    /// How many progress notifications were read.
    pub count: u64,
    /// Their progress values not yet forwarded, in the order the child sent them: rmcp hands each notification to its
    /// own task, which may run out of order on a multi-threaded runtime, so forwarding follows this order.
    pub order: std::collections::VecDeque<f64>,
    /// Notifications whose turn has not come yet.
    pub held: Vec<rmcp::model::ProgressNotificationParam>,
}

/// How a front shapes a failed call for its client: the tool error result with `{error, code, kind, ...}`, or the
/// child's JSON-RPC error where the normal path passes it on.
pub type ShapeError = fn(&Proxy, &str, &str, Error) -> Result<CallToolResponse, ErrorData>;

/// One stdio client's end of the fast lane: where answers go, and what is not a proxied tool.
pub struct FrontLane {
    pub(super) proxy: Proxy,
    pub(super) sink: Arc<dyn Sink<ServerJsonRpcMessage>>,
    pub(super) shape: ShapeError,
    /// Names the front serves itself (the registry tool, agent tools), never relayed.
    pub(super) reserved: fn(&str) -> bool,
    /// The protocol revision of the client's session, for the spans (tracing on only).
    pub(super) protocol: std::sync::OnceLock<String>,
    /// The client (stdio front): a registry `proxy_call` on the lane asks it a child's mid-call question
    /// (`relay/handover.rs`). Without it, `proxy_call` is not taken (the HTTP lane).
    pub(super) peer: std::sync::OnceLock<rmcp::Peer<rmcp::RoleServer>>,
}

/// One fast-lane call in flight.
pub(super) struct FastCall {
    pub(super) number: i64,
    pub(super) front: Arc<FrontLane>,
    pub(super) front_id: RequestId,
    pub(super) client_token: Option<ProgressToken>,
    pub(super) tool: String,
    /// The arguments as the client wrote them (for the call log).
    pub(super) args: Option<Box<RawValue>>,
    pub(super) started: std::time::Instant,
    /// The call's start, or the child's last progress on it: the deadline is this plus the call timeout.
    pub(super) last_progress: tokio::time::Instant,
    /// The call's spans, while tracing is on (`spans.rs`).
    pub(super) spans: Option<Box<FastSpans>>,
    /// A 2026-07-28 client's call: the capabilities it declared (in its request's `_meta`).
    pub(super) modern: Option<Box<rmcp::model::ClientCapabilities>>,
    /// Handed to an exchange of `held.rs` once the child asked something mid-call (`relay/handover.rs`).
    pub(super) handed: Option<Box<Handed>>,
    /// A registry `proxy_call`: a child's question mid-call goes to this client alone, through an exchange of
    /// `held.rs` (`Caller::questions_to_caller`), as on the normal path.
    pub(super) asks_caller: bool,
    /// Its server's limits let it through (`limits/`): the concurrency slot it holds, the breaker told its outcome.
    pub(super) admitted: Option<Admission>,
}

/// A 2026-07-28 client's fast-lane call whose child asked the client something: its end is reported to the
/// exchange (`held.rs`) that now answers the client, instead of being answered by the lane.
pub(super) struct Handed {
    pub(super) steps: tokio::sync::mpsc::Sender<crate::held::store::Step>,
    pub(super) exchange: u64,
    /// The client's cancellation of its request, which the exchange watches.
    pub(super) cancel: tokio_util::sync::CancellationToken,
    /// Dropped with the call: ends the task that watches the exchange's own cancellation.
    pub(super) _watch: tokio::sync::oneshot::Sender<()>,
}

/// The two spans of a fast-lane call (tracing on only; made and ended by `spans.rs`): the served request's, as the
/// front makes it on the normal path, and the proxied call's under it.
pub(crate) struct FastSpans {
    pub(crate) served: ad_core::trace::Started,
    pub(crate) call: ad_core::trace::Started,
}

/// The calls in flight on one child's fast lane and its reaper's state.
#[derive(Default)]
pub(super) struct LaneState {
    pub(super) calls: Vec<FastCall>,
    /// When the reaper wakes next (`None`: it waits to be told of a call).
    pub(super) armed: Option<tokio::time::Instant>,
    pub(super) reaper: bool,
    /// The child is gone: no more calls, the reaper ends.
    pub(super) closed: bool,
}

/// One stdio child's end of the fast lane, shared by its transport (answers and progress) and the proxy (calls).
pub struct ChildLane {
    pub(super) server: String,
    pub(super) server_id: i64,
    pub(super) timeout: Duration,
    pub(super) writer: Arc<dyn Sink<ClientJsonRpcMessage>>,
    pub(super) stderr: Arc<StderrRing>,
    pub(super) exited: watch::Receiver<Option<String>>,
    pub(super) inner: Weak<Inner>,
    pub(super) state: Mutex<LaneState>,
    /// Calls answered with a plain result whose answer is framed but not yet recorded: recorded once the answers
    /// are written ([`ChildLane::record_answered`]), so that the call log and metrics do not delay them.
    pub(super) answered: Mutex<Vec<Finished>>,
    pub(super) wake: Notify,
    pub(super) next: AtomicI64,
    /// Calls relayed by any child's fast lane (`status`, tests).
    pub(super) relayed: Arc<AtomicU64>,
    /// A 2026-07-28 child's: the envelope rmcp puts on each request to it (its revision, our client info and
    /// capabilities), set when its first call is taken (`relay/crossing.rs`).
    pub(super) envelope: std::sync::OnceLock<rmcp::model::RequestMetaObject>,
    /// A 2026-07-28 child's: whether it declares the tasks extension (SEP-2663), so that it may answer a call of a
    /// caller that declares it too with a task, which only the normal path relays (`proxy/tasks.rs`).
    pub(super) tasks: std::sync::atomic::AtomicBool,
    /// A legacy client's calls handed to the normal path's cross-era rounds (`relay/crossing.rs`): the client's
    /// request and its cancellation.
    pub(super) crossing: Mutex<
        Vec<(
            Arc<FrontLane>,
            RequestId,
            tokio_util::sync::CancellationToken,
        )>,
    >,
}

/// A finished fast-lane call, to be recorded.
pub(super) struct Finished {
    pub(super) tool: String,
    pub(super) args: Option<Box<RawValue>>,
    pub(super) latency: Duration,
    pub(super) ok: bool,
    pub(super) text: String,
}
