//! Every answer and streamed event of either A2A version (task, message, status update, artifact update) normalised
//! into one [`Update`] with one [`TaskState`].

use serde_json::Value;

use super::{Result, err};

/// A task's state, whatever the version spelled it as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum TaskState {
    Submitted,
    Working,
    InputRequired,
    AuthRequired,
    Completed,
    Canceled,
    Failed,
    Rejected,
    Unknown,
}

impl TaskState {
    pub fn parse(s: &str) -> TaskState {
        let s = s
            .trim_start_matches("TASK_STATE_")
            .to_ascii_lowercase()
            .replace('_', "-");
        match s.as_str() {
            "submitted" => TaskState::Submitted,
            "working" => TaskState::Working,
            "input-required" => TaskState::InputRequired,
            "auth-required" => TaskState::AuthRequired,
            "completed" => TaskState::Completed,
            "canceled" | "cancelled" => TaskState::Canceled,
            "failed" | "error" => TaskState::Failed,
            "rejected" => TaskState::Rejected,
            _ => TaskState::Unknown,
        }
    }

    /// The task will not change again.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Canceled | TaskState::Failed | TaskState::Rejected
        )
    }

    /// The agent stopped and waits for the caller.
    pub fn is_interrupted(self) -> bool {
        matches!(self, TaskState::InputRequired | TaskState::AuthRequired)
    }
}

/// One thing an agent said, normalised from any response or stream event.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Update {
    pub task_id: Option<String>,
    pub context_id: Option<String>,
    pub state: Option<TaskState>,
    /// Text of a status message or a direct message (shown as progress).
    pub status_text: Option<String>,
    /// Text of artifacts (the answer).
    pub artifact_text: Vec<String>,
    /// A direct `Message` answer (no task).
    pub is_message: bool,
}

fn parts_text(parts: Option<&Value>) -> Option<String> {
    let text: Vec<&str> = parts?
        .as_array()?
        .iter()
        .filter_map(|p| p.get("text").and_then(Value::as_str))
        .collect();
    (!text.is_empty()).then(|| text.join("\n"))
}

/// A string field of `v`, owned.
fn string(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_owned)
}

/// The state and the status message's text of a `TaskStatus`.
fn status_of(status: Option<&Value>) -> (Option<TaskState>, Option<String>) {
    let state = status
        .and_then(|s| s.get("state"))
        .and_then(Value::as_str)
        .map(TaskState::parse);
    let text = status
        .and_then(|s| s.get("message"))
        .and_then(|m| parts_text(m.get("parts")));
    (state, text)
}

fn task_update(task: &Value) -> Update {
    let (state, status_text) = status_of(task.get("status"));
    Update {
        task_id: string(task, "id"),
        context_id: string(task, "contextId"),
        state,
        status_text,
        artifact_text: task
            .get("artifacts")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|x| parts_text(x.get("parts")))
                    .collect()
            })
            .unwrap_or_default(),
        is_message: false,
    }
}

fn message_update(m: &Value) -> Update {
    Update {
        task_id: string(m, "taskId"),
        context_id: string(m, "contextId"),
        state: None,
        status_text: None,
        artifact_text: parts_text(m.get("parts")).into_iter().collect(),
        is_message: true,
    }
}

fn status_update(e: &Value) -> Update {
    let (state, status_text) = status_of(e.get("status"));
    Update {
        task_id: string(e, "taskId"),
        context_id: string(e, "contextId"),
        state,
        status_text,
        ..Update::default()
    }
}

fn artifact_update(e: &Value) -> Update {
    Update {
        task_id: string(e, "taskId"),
        context_id: string(e, "contextId"),
        artifact_text: parts_text(e.get("artifact").and_then(|a| a.get("parts")))
            .into_iter()
            .collect(),
        ..Update::default()
    }
}

/// Normalises a `result`: v1.0 wraps it (`{task}`, `{message}`, `{statusUpdate}`, `{artifactUpdate}`), v0.3 tags it
/// with `kind` (`task`, `message`, `status-update`, `artifact-update`); a bare v1.0 `Task` (GetTask, CancelTask)
/// has `id` and `status`.
pub fn parse_result(r: &Value) -> Result<Update> {
    if let Some(t) = r.get("task") {
        return Ok(task_update(t));
    }
    if let Some(m) = r.get("message") {
        return Ok(message_update(m));
    }
    if let Some(e) = r.get("statusUpdate") {
        return Ok(status_update(e));
    }
    if let Some(e) = r.get("artifactUpdate") {
        return Ok(artifact_update(e));
    }
    match r.get("kind").and_then(Value::as_str) {
        Some("task") => Ok(task_update(r)),
        Some("message") => Ok(message_update(r)),
        Some("status-update") => Ok(status_update(r)),
        Some("artifact-update") => Ok(artifact_update(r)),
        _ if r.get("id").is_some() && r.get("status").is_some() => Ok(task_update(r)),
        _ => Err(err(format!(
            "unexpected A2A result: {}",
            ad_core::model::truncate_for_message(&r.to_string())
        ))),
    }
}
