//! The host object the prelude keeps in its closure, and the run's state behind it. Each asynchronous host function
//! (`call`, `find_tool`, `find_tools`) counts against the call limit, hands its request to the [`Dispatch`] (which
//! does the work on the application's runtime, never on the engine thread) and returns a promise that the driver
//! settles when the answer comes back (`settle`). `log` keeps what `console` writes, within the log limit; `tools`
//! lists the tools callable now (after `find_tool` activated a server).
//!
//! The functions are plain JavaScript functions over Rust closures: they hold no engine internals a script could
//! reach, and they offer nothing the public API does not.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Instant;

use rquickjs::function::Rest;
use rquickjs::{Array, Ctx, Exception, Function, Object, Value};
use serde_json::{Map, Value as Json};

use crate::answer::{CallRecord, Thrown};
use crate::limits::{Limit, Limits};
use crate::meter::{Meter, Stop};

/// What a script asks of the host.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Request {
    /// A tool by its exposed name (`server__tool`), with its arguments.
    Call {
        name: String,
        args: Option<Map<String, Json>>,
    },
    FindTool {
        query: String,
    },
    FindTools {
        intents: Vec<String>,
    },
}

impl Request {
    fn label(&self) -> String {
        match self {
            Request::Call { name, .. } => name.clone(),
            Request::FindTool { .. } => "find_tool".into(),
            Request::FindTools { .. } => "find_tools".into(),
        }
    }
}

/// A tool the script can call as `tools.<server>.<tool>`: the two identifiers and the exposed name.
pub(crate) type ToolName = (String, String, String);

/// Wakes the engine thread.
#[derive(Debug)]
pub(crate) enum Wake {
    /// A request's answer: the value as JSON text, or what the script's promise is rejected with.
    Done {
        id: u32,
        outcome: Result<String, Thrown>,
    },
    /// Stop the run (its reason is on the meter).
    Stop,
}

/// Where a request's answer goes: to the engine thread, under the request's id.
pub(crate) struct Reply {
    id: u32,
    to: Sender<Wake>,
}

impl Reply {
    /// The request's number in this run.
    pub(crate) fn id(&self) -> u32 {
        self.id
    }

    pub(crate) fn send(self, outcome: Result<String, Thrown>) {
        // The run may have ended meanwhile; then nobody waits for the answer.
        let _ = self.to.send(Wake::Done {
            id: self.id,
            outcome,
        });
    }
}

/// The host side of a run: does each request off the engine thread and answers through its [`Reply`].
pub(crate) trait Dispatch: Send + Sync {
    fn start(&self, request: Request, reply: Reply);
    /// The tools callable now.
    fn tools(&self) -> Vec<ToolName>;
}

/// A request in flight: its promise's settle functions and its entry in `calls`.
struct Pending<'js> {
    resolve: Function<'js>,
    reject: Function<'js>,
    record: usize,
    started: Instant,
}

/// The run's state, shared by the host functions and the driver (one thread).
pub(crate) struct State<'js> {
    pending: RefCell<HashMap<u32, Pending<'js>>>,
    next: Cell<u32>,
    made: Cell<u32>,
    pub(crate) calls: RefCell<Vec<CallRecord>>,
    pub(crate) logs: RefCell<Vec<String>>,
    log_bytes: Cell<usize>,
    pub(crate) logs_dropped: Cell<usize>,
    pub(crate) limits: Limits,
    meter: Arc<Meter>,
    dispatch: Arc<dyn Dispatch>,
    wakes: Sender<Wake>,
}

impl<'js> State<'js> {
    pub(crate) fn new(
        limits: Limits,
        meter: Arc<Meter>,
        dispatch: Arc<dyn Dispatch>,
        wakes: Sender<Wake>,
    ) -> State<'js> {
        State {
            pending: RefCell::default(),
            next: Cell::new(1),
            made: Cell::new(0),
            calls: RefCell::default(),
            logs: RefCell::default(),
            log_bytes: Cell::new(0),
            logs_dropped: Cell::new(0),
            limits,
            meter,
            dispatch,
            wakes,
        }
    }

    /// How many requests wait for their answer.
    pub(crate) fn in_flight(&self) -> usize {
        self.pending.borrow().len()
    }

    /// Forgets every request in flight (their answers are ignored): done before the engine is torn down, so no
    /// JavaScript value outlives it.
    pub(crate) fn clear(&self) {
        self.pending.borrow_mut().clear();
    }

    /// Starts a request: a promise the driver settles with its answer. Over the call limit the run is stopped.
    fn request(&self, ctx: &Ctx<'js>, request: Request) -> rquickjs::Result<Value<'js>> {
        let made = self.made.get() + 1;
        self.made.set(made);
        if made > self.limits.calls {
            self.meter.stop(Stop::Limit(Limit::InnerCalls));
            return Err(Exception::throw_range(
                ctx,
                &Limit::InnerCalls.message(&self.limits),
            ));
        }
        let (promise, resolve, reject) = ctx.promise()?;
        let id = self.next.get();
        self.next.set(id.wrapping_add(1));
        let record = {
            let mut calls = self.calls.borrow_mut();
            calls.push(CallRecord {
                tool: request.label(),
                ms: 0,
                ok: false,
            });
            calls.len() - 1
        };
        self.pending.borrow_mut().insert(
            id,
            Pending {
                resolve,
                reject,
                record,
                started: Instant::now(),
            },
        );
        self.dispatch.start(
            request,
            Reply {
                id,
                to: self.wakes.clone(),
            },
        );
        Ok(promise.into_value())
    }

    /// Settles the promise of request `id` with its answer. An error here is the engine's (out of memory, stopped).
    pub(crate) fn settle(
        &self,
        ctx: &Ctx<'js>,
        id: u32,
        outcome: Result<String, Thrown>,
    ) -> rquickjs::Result<()> {
        let Some(p) = self.pending.borrow_mut().remove(&id) else {
            return Ok(());
        };
        if let Some(r) = self.calls.borrow_mut().get_mut(p.record) {
            r.ms = p.started.elapsed().as_millis() as u64;
            r.ok = outcome.is_ok();
        }
        match outcome {
            Ok(json) => {
                let value = ctx.json_parse(json)?;
                p.resolve.call::<_, ()>((value,))
            }
            Err(t) => {
                let error = thrown(ctx, &t)?;
                p.reject.call::<_, ()>((error,))
            }
        }
    }

    /// Keeps one `console` line within the log limit.
    fn log(&self, ctx: &Ctx<'js>, level: &str, args: &[Value<'js>]) -> rquickjs::Result<()> {
        if self.log_bytes.get() >= self.limits.log_bytes {
            self.logs_dropped.set(self.logs_dropped.get() + 1);
            return Ok(());
        }
        let mut line = match level {
            "log" | "info" => String::new(),
            other => format!("[{other}] "),
        };
        for (i, a) in args.iter().enumerate() {
            if i > 0 {
                line.push(' ');
            }
            line.push_str(&show(ctx, a)?);
            if line.len() > self.limits.log_bytes {
                break;
            }
        }
        let room = self.limits.log_bytes - self.log_bytes.get();
        if line.len() > room {
            let mut end = room;
            while !line.is_char_boundary(end) {
                end -= 1;
            }
            line.truncate(end);
            line.push('…');
            self.logs_dropped.set(self.logs_dropped.get() + 1);
        }
        self.log_bytes.set(self.log_bytes.get() + line.len());
        self.logs.borrow_mut().push(line);
        Ok(())
    }
}

/// A console argument as text: strings as they are, anything else as JSON when it can be, else as `String(x)`.
fn show<'js>(ctx: &Ctx<'js>, v: &Value<'js>) -> rquickjs::Result<String> {
    if let Some(s) = v.as_string() {
        return s.to_string();
    }
    if v.is_undefined() {
        return Ok("undefined".into());
    }
    if v.is_error() {
        let o = v.as_object().expect("an error is an object");
        let name: Option<String> = o.get("name").ok();
        let message: Option<String> = o.get("message").ok();
        return Ok(format!(
            "{}: {}",
            name.unwrap_or_else(|| "Error".into()),
            message.unwrap_or_default()
        ));
    }
    if !v.is_function() && !v.is_symbol() {
        match ctx.json_stringify(v.clone()) {
            Ok(Some(s)) => return s.to_string(),
            Ok(None) => {}
            Err(rquickjs::Error::Exception) => {
                // A cycle or a BigInt: shown with String() below. An uncatchable stop stays pending on the context.
                let e = ctx.catch();
                if e.is_uncatchable_error() {
                    return Err(ctx.throw(e));
                }
            }
            Err(e) => return Err(e),
        }
    }
    let string: Function = ctx.globals().get("String")?;
    string.call((v.clone(),))
}

/// A failed call as the script sees it: an `Error` with `kind` and `details`.
fn thrown<'js>(ctx: &Ctx<'js>, t: &Thrown) -> rquickjs::Result<Value<'js>> {
    let e = Exception::from_message(ctx.clone(), &t.message)?;
    e.set("kind", t.kind.as_str())?;
    e.set("details", ctx.json_parse(t.details.to_string())?)?;
    Ok(e.into_value())
}

/// The host object handed to the prelude.
pub(crate) fn host<'js>(ctx: &Ctx<'js>, state: &Rc<State<'js>>) -> rquickjs::Result<Object<'js>> {
    let host = Object::new(ctx.clone())?;
    let s = state.clone();
    host.set(
        "call",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, name: String, args: Value<'js>| {
                let args = arguments(&ctx, args)?;
                s.request(&ctx, Request::Call { name, args })
            },
        )?,
    )?;
    let s = state.clone();
    host.set(
        "find_tool",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, query: String| {
            s.request(&ctx, Request::FindTool { query })
        })?,
    )?;
    let s = state.clone();
    host.set(
        "find_tools",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>, intents: Vec<String>| {
            s.request(&ctx, Request::FindTools { intents })
        })?,
    )?;
    let s = state.clone();
    host.set(
        "log",
        Function::new(
            ctx.clone(),
            move |ctx: Ctx<'js>, level: String, args: Array<'js>| {
                let args: Vec<Value<'js>> = args.iter().collect::<rquickjs::Result<_>>()?;
                s.log(&ctx, &level, &Rest(args).0)
            },
        )?,
    )?;
    let s = state.clone();
    host.set(
        "tools",
        Function::new(ctx.clone(), move |ctx: Ctx<'js>| {
            tool_list(&ctx, &s.dispatch.tools())
        })?,
    )?;
    Ok(host)
}

/// The tools as the prelude takes them: `[[server_ident, tool_ident, exposed], ...]`.
pub(crate) fn tool_list<'js>(ctx: &Ctx<'js>, tools: &[ToolName]) -> rquickjs::Result<Array<'js>> {
    let list = Array::new(ctx.clone())?;
    for (i, (s, t, exposed)) in tools.iter().enumerate() {
        let entry = Array::new(ctx.clone())?;
        entry.set(0, s.as_str())?;
        entry.set(1, t.as_str())?;
        entry.set(2, exposed.as_str())?;
        list.set(i, entry)?;
    }
    Ok(list)
}

/// A call's arguments: an object (as JSON), or none.
fn arguments<'js>(ctx: &Ctx<'js>, v: Value<'js>) -> rquickjs::Result<Option<Map<String, Json>>> {
    if v.is_undefined() || v.is_null() {
        return Ok(None);
    }
    if !v.is_object() || v.is_array() || v.is_function() {
        return Err(Exception::throw_type(
            ctx,
            "a tool's arguments must be an object",
        ));
    }
    let Some(text) = ctx.json_stringify(v)? else {
        return Ok(None);
    };
    match serde_json::from_str(&text.to_string()?) {
        Ok(Json::Object(m)) => Ok(Some(m)),
        _ => Err(Exception::throw_type(
            ctx,
            "a tool's arguments must be a JSON object",
        )),
    }
}
