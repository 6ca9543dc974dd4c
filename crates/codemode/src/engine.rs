//! The engine: one QuickJS runtime on a thread of its own per run, so a script that computes never holds up the
//! application's runtime (the stdio front is single-threaded), and its busy time is its CPU time (`meter.rs`).
//!
//! This file is the driver, rquickjs's synchronous API only: it runs the prelude and the script, then loops: run the
//! promise jobs, look at the script's promise, and wait for the next answer to settle a call's promise. Every job is
//! run here and every failure is looked at here, so nothing the engine does is left unobserved (rquickjs's own async
//! job loop prints failed jobs to stdout, which carries MCP in stdio mode: it is not compiled in).

use std::rc::Rc;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};

use rquickjs::context::EvalOptions;
use rquickjs::promise::PromiseState;
use rquickjs::{CatchResultExt, CaughtError, Context, Ctx, Function, Promise, Runtime, Value};

use crate::alloc::Counted;
use crate::answer::{Failure, Outcome, Uncaught, bounded_result};
use crate::bridge::{Dispatch, State, ToolName, Wake, host, tool_list};
use crate::limits::{Limit, Limits, STACK_LIMIT, THREAD_STACK};
use crate::meter::{Meter, Stop};
use crate::prelude::{PRELUDE, wrap};

/// One run's inputs.
pub(crate) struct Job {
    pub code: String,
    pub limits: Limits,
    pub tools: Vec<ToolName>,
    pub dispatch: Arc<dyn Dispatch>,
    /// While the engine waits for answers: how many requests are in flight (`None` while it runs). The run's
    /// controller pauses the run for the caller's answers only when every request in flight is a question.
    pub idle: tokio::sync::watch::Sender<Option<usize>>,
}

/// A started run: its meter and the way to wake its engine (to stop it).
pub(crate) struct Running {
    pub meter: Arc<Meter>,
    pub wakes: Sender<Wake>,
}

impl Running {
    /// Stops the run (the first reason given wins).
    pub(crate) fn stop(&self, why: Stop) {
        self.meter.stop(why);
        let _ = self.wakes.send(Wake::Stop);
    }
}

/// Starts `job` on a new engine thread; `done` gets its outcome there.
pub(crate) fn start(
    job: Job,
    done: impl FnOnce(Outcome) + Send + 'static,
) -> std::io::Result<Running> {
    let meter = Arc::new(Meter::new(job.limits.cpu, job.limits.wall));
    let (wakes, inbox) = channel();
    let running = Running {
        meter: meter.clone(),
        wakes: wakes.clone(),
    };
    std::thread::Builder::new()
        .name("script".into())
        .stack_size(THREAD_STACK)
        .spawn(move || done(run(job, meter, wakes, inbox)))?;
    Ok(running)
}

/// Runs a job to its outcome on this thread.
pub(crate) fn run(
    job: Job,
    meter: Arc<Meter>,
    wakes: Sender<Wake>,
    inbox: Receiver<Wake>,
) -> Outcome {
    let limits = job.limits;
    let internal = |message: String| Outcome {
        result: Err(Failure::Internal { message }),
        logs: vec![],
        calls: vec![],
        result_cut: None,
        logs_dropped: 0,
        limits,
    };
    // The heap is limited by the counting allocator (`alloc.rs`), not by QuickJS's own limit.
    let rt = match Runtime::new_with_alloc(Counted::new(limits.memory, meter.clone())) {
        Ok(rt) => rt,
        Err(e) => return internal(e.to_string()),
    };
    rt.set_max_stack_size(STACK_LIMIT);
    let m = meter.clone();
    rt.set_interrupt_handler(Some(Box::new(move || m.must_stop())));
    // No loader is set: `import()` and `import` fail ("could not load module").
    let context = match Context::full(&rt) {
        Ok(c) => c,
        Err(e) => return internal(e.to_string()),
    };
    meter.wake();
    let (result, logs, calls, logs_dropped) = context.with(|ctx| {
        let state = Rc::new(State::new(
            limits,
            meter.clone(),
            job.dispatch.clone(),
            wakes,
        ));
        let result = drive(&ctx, &state, &job, &meter, &inbox);
        // No JavaScript value may outlive the context: the promises still in flight are forgotten.
        state.clear();
        let logs = std::mem::take(&mut *state.logs.borrow_mut());
        let calls = std::mem::take(&mut *state.calls.borrow_mut());
        (result, logs, calls, state.logs_dropped.get())
    });
    meter.sleep();
    let (result, result_cut) = match result {
        Ok(json) => {
            let (value, cut) = bounded_result(&json, limits.result_bytes);
            (Ok(value), cut)
        }
        Err(f) => (Err(f), None),
    };
    Outcome {
        result,
        logs,
        calls,
        result_cut,
        logs_dropped,
        limits,
    }
}

/// Runs the prelude and the script, then the job loop until the script's promise settles or the run is stopped. The
/// result is JSON text (`null` for `undefined`).
fn drive<'js>(
    ctx: &Ctx<'js>,
    state: &Rc<State<'js>>,
    job: &Job,
    meter: &Meter,
    inbox: &Receiver<Wake>,
) -> Result<String, Failure> {
    let stopped = |meter: &Meter| meter.stopped().map(failure_of);
    // The prelude: host functions in, code generation and the stack hooks out.
    let setup = (|| -> rquickjs::Result<()> {
        let prelude: Function = ctx.eval(PRELUDE)?;
        let host = host(ctx, state)?;
        let tools = tool_list(ctx, &job.tools)?;
        prelude.call::<_, ()>((host, tools))
    })();
    if let Err(e) = setup.catch(ctx) {
        return Err(stopped(meter).unwrap_or_else(|| Failure::Internal {
            message: format!("the prelude failed: {e}"),
        }));
    }
    let mut options = EvalOptions::default();
    options.global = true;
    options.strict = false;
    options.backtrace_barrier = true;
    options.filename = Some("script.js".into());
    let main: Promise<'js> = match ctx
        .eval_with_options::<Value, _>(wrap(&job.code), options)
        .catch(ctx)
    {
        Ok(v) => match v.clone().into_promise() {
            Some(p) => p,
            // The body stepped out of its wrapper (`})(); ...`): its last value is the result.
            None => return json_of(ctx, v, meter),
        },
        Err(e) => {
            if let Some(f) = stopped(meter) {
                return Err(f);
            }
            return Err(match e {
                CaughtError::Exception(ex)
                    if ex.get::<_, String>("name").ok().as_deref() == Some("SyntaxError") =>
                {
                    Failure::Syntax {
                        message: ex.message().unwrap_or_default(),
                    }
                }
                e => caught(e),
            });
        }
    };
    loop {
        // Every job that is ready, each looked at: a job fails only when the run is stopped.
        while ctx.execute_pending_job() {
            if let Some(f) = stopped(meter) {
                return Err(f);
            }
        }
        if let Some(f) = stopped(meter) {
            return Err(f);
        }
        match main.state() {
            PromiseState::Resolved => return result(ctx, &main, meter),
            PromiseState::Rejected => {
                let e = main.result::<Value>().map(|r| r.catch(ctx));
                return Err(match e {
                    Some(Err(e)) => stopped(meter).unwrap_or_else(|| caught(e)),
                    _ => Failure::Internal {
                        message: "a rejected promise without a reason".into(),
                    },
                });
            }
            PromiseState::Pending => {}
        }
        if state.in_flight() == 0 {
            return Err(Failure::Unsettled);
        }
        // Wait for an answer: this time is not the script's.
        meter.sleep();
        job.idle.send_replace(Some(state.in_flight()));
        let wake = inbox.recv_timeout(meter.wall_left());
        job.idle.send_replace(None);
        meter.wake();
        let mut next = match wake {
            Ok(w) => Some(w),
            Err(RecvTimeoutError::Timeout) => {
                meter.stop(Stop::Limit(Limit::WallTime));
                None
            }
            Err(RecvTimeoutError::Disconnected) => {
                return Err(Failure::Internal {
                    message: "the host went away".into(),
                });
            }
        };
        // Settle every answer that is in, then run the jobs they made ready.
        while let Some(w) = next.take() {
            match w {
                Wake::Stop => {}
                Wake::Done { id, outcome } => {
                    if let Err(e) = state.settle(ctx, id, outcome).catch(ctx) {
                        return Err(stopped(meter).unwrap_or_else(|| engine_failure(e)));
                    }
                }
            }
            if let Some(f) = stopped(meter) {
                return Err(f);
            }
            next = inbox.try_recv().ok();
        }
    }
}

/// The script's result as JSON text.
fn result<'js>(ctx: &Ctx<'js>, main: &Promise<'js>, meter: &Meter) -> Result<String, Failure> {
    match main.result::<Value>() {
        Some(Ok(v)) => json_of(ctx, v, meter),
        _ => Ok("null".into()),
    }
}

/// A value as JSON text (`null` for `undefined`).
fn json_of<'js>(ctx: &Ctx<'js>, value: Value<'js>, meter: &Meter) -> Result<String, Failure> {
    match ctx.json_stringify(value).catch(ctx) {
        Ok(Some(s)) => s.to_string().map_err(|e| Failure::Internal {
            message: e.to_string(),
        }),
        Ok(None) => Ok("null".into()),
        Err(e) => Err(meter
            .stopped()
            .map(failure_of)
            .unwrap_or_else(|| match caught(e) {
                Failure::Thrown(u) => Failure::Unserializable { message: u.message },
                other => other,
            })),
    }
}

fn failure_of(stop: Stop) -> Failure {
    match stop {
        Stop::Limit(l) => Failure::Limit(l),
        Stop::Cancelled => Failure::Cancelled,
    }
}

/// An uncaught exception or rejection. Out of memory is a (catchable) `InternalError` in QuickJS: uncaught, it is
/// the memory limit's typed error.
fn caught(e: CaughtError<'_>) -> Failure {
    match e {
        CaughtError::Exception(ex) => {
            let message = ex.message().unwrap_or_default();
            let name: String = ex.get("name").unwrap_or_default();
            if name == "InternalError" && message == "out of memory" {
                return Failure::Limit(Limit::Memory);
            }
            let kind: Option<String> = ex.get::<_, Option<String>>("kind").ok().flatten();
            let details = kind.as_ref().and_then(|_| {
                let d: Value = ex.get("details").ok()?;
                let text = ex.ctx().json_stringify(d).ok()??.to_string().ok()?;
                serde_json::from_str(&text).ok()
            });
            Failure::Thrown(Box::new(Uncaught {
                name,
                message,
                stack: ex.stack(),
                kind,
                details,
            }))
        }
        CaughtError::Value(v) => {
            let message = v
                .ctx()
                .json_stringify(v.clone())
                .ok()
                .flatten()
                .and_then(|s| s.to_string().ok())
                .unwrap_or_else(|| format!("a {}", v.type_name()));
            Failure::Thrown(Box::new(Uncaught {
                message,
                ..Uncaught::default()
            }))
        }
        CaughtError::Error(e) => Failure::Internal {
            message: e.to_string(),
        },
    }
}

/// A failure of the engine itself while settling a call (the run was not stopped).
fn engine_failure(e: CaughtError<'_>) -> Failure {
    match caught(e) {
        f @ Failure::Limit(_) => f,
        Failure::Thrown(u) => Failure::Internal { message: u.message },
        other => other,
    }
}
