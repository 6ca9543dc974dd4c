//! The result guards on what else a child hands the agent besides a tool's result: the text contents of a
//! `resources/read`, the messages of a `prompts/get` (their text and embedded resources), and a task's result when
//! `tasks/get` reports it completed (the tool result it carries). The same settings, counts, logs and origin memory
//! as a tool's result; the fronts (aggregated and per-server) call these once per answer.

use rmcp::model::{
    CallToolResult, GetPromptResponse, GetTaskResult, ReadResourceResult, ResourceContents,
    TaskPayload,
};

use super::texts_of;
use crate::state::Inner;

impl Inner {
    /// The result guards on a resource's contents (`uri` as the child names it).
    pub(crate) fn guard_resource(
        &self,
        server: &str,
        server_id: i64,
        uri: &str,
        res: &mut ReadResourceResult,
    ) {
        let mut texts: Vec<&mut String> = res
            .contents
            .iter_mut()
            .filter_map(|c| match c {
                ResourceContents::TextResourceContents { text, .. } => Some(text),
                _ => None,
            })
            .collect();
        if texts.is_empty() {
            return;
        }
        self.guard_texts(
            server,
            server_id,
            &format!("resource:{uri}"),
            &format!("the resource `{uri}`"),
            &mut texts,
            None,
            None,
        );
    }

    /// The result guards on a prompt's messages (a complete answer; an input-required one carries none).
    pub(crate) fn guard_prompt(
        &self,
        server: &str,
        server_id: i64,
        name: &str,
        res: &mut GetPromptResponse,
    ) {
        let GetPromptResponse::Complete(r) = res else {
            return;
        };
        let mut texts: Vec<&mut String> = r
            .messages
            .iter_mut()
            .flat_map(|m| texts_of(std::slice::from_mut(&mut m.content)))
            .collect();
        if texts.is_empty() {
            return;
        }
        self.guard_texts(
            server,
            server_id,
            &format!("prompt:{name}"),
            &format!("the prompt `{name}`"),
            &mut texts,
            None,
            None,
        );
    }

    /// The result guards on a completed task's result (a tool's result); a result that does not read as one is
    /// left as it is.
    pub(crate) fn guard_task(&self, server: &str, server_id: i64, res: &mut GetTaskResult) {
        let id = res.task.task.task_id.clone();
        let TaskPayload::Completed { result } = &mut res.task.payload else {
            return;
        };
        let Ok(mut call) =
            serde_json::from_value::<CallToolResult>(serde_json::Value::Object(result.clone()))
        else {
            return;
        };
        let CallToolResult {
            content,
            structured_content,
            ..
        } = &mut call;
        let mut texts = texts_of(content);
        let decisions = self.guard_texts(
            server,
            server_id,
            &format!("task:{id}"),
            &format!("the task `{id}`"),
            &mut texts,
            structured_content.as_mut(),
            None,
        );
        if decisions.is_empty() {
            return;
        }
        if let Ok(serde_json::Value::Object(guarded)) = serde_json::to_value(&call) {
            // Only what the guards change: the content and the structured content, the rest as the child wrote it.
            for key in ["content", "structuredContent"] {
                if let Some(v) = guarded.get(key) {
                    result.insert(key.to_owned(), v.clone());
                }
            }
        }
    }
}
