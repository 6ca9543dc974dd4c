//! HTTP errors: every failure is `{error, code}` JSON with the status its [`ErrorCode`] maps to, mapped once here.
//!
//! Also the JSON and query extractors the handlers use, so malformed bodies and parameters answer in the same shape
//! (axum's own rejections are plain text).

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::error::{Error, ErrorCode};

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    /// A failed proxied call's kind, where a caller acts on it (`tool_changed`, `tool_flagged`, `approval_denied`,
    /// `approval_timeout`; `Error::call_kind`), with the scanner's reasons or the approval's id when there are.
    pub kind: Option<&'static str>,
    pub reasons: Option<Vec<String>>,
    /// (Boxed strings keep the error small: every `Result` of a handler carries it.)
    pub approval: Option<Box<str>>,
    /// A refusal by a limit (`rate_limited`, `server_busy`, `server_unavailable`): when to try again (also the
    /// `Retry-After` header, in whole seconds).
    /// (A `u32` keeps the error small: every `Result` of a handler carries it.)
    pub retry_after_ms: Option<std::num::NonZeroU32>,
    /// The policy that refused a call (`policy_denied`).
    pub policy: Option<Box<str>>,
}

/// The status each domain error code answers with. Exhaustive: a new code must choose one.
pub fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::InvalidInput => StatusCode::BAD_REQUEST,
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::Conflict => StatusCode::CONFLICT,
        ErrorCode::Upstream => StatusCode::BAD_GATEWAY,
        ErrorCode::Timeout => StatusCode::GATEWAY_TIMEOUT,
        ErrorCode::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        ErrorCode::Denied => StatusCode::FORBIDDEN,
        ErrorCode::RateLimited => StatusCode::TOO_MANY_REQUESTS,
    }
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            kind: None,
            reasons: None,
            approval: None,
            retry_after_ms: None,
            policy: None,
        }
    }
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        let code = e.code();
        let message = if code == ErrorCode::Internal {
            // Logged once here, where it becomes a response; the client gets no internals.
            tracing::error!(error = %e, "request failed");
            "internal error; the agent-discover log (stderr) has the details".to_owned()
        } else {
            e.to_string()
        };
        let mut err = ApiError::new(status_of(code), code.as_str(), message);
        match &e {
            Error::ToolChanged { .. } | Error::SecretInArguments { .. } => {
                err.kind = Some(e.call_kind())
            }
            Error::ToolFlagged { reasons, .. } => {
                err.kind = Some(e.call_kind());
                err.reasons = Some(reasons.clone());
            }
            Error::ApprovalDenied { approval, .. } | Error::ApprovalTimeout { approval, .. } => {
                err.kind = Some(e.call_kind());
                err.approval = approval.as_deref().map(Box::from);
            }
            Error::RateLimited { .. }
            | Error::ServerBusy { .. }
            | Error::ServerUnavailable { .. } => {
                err.kind = Some(e.call_kind());
                err.retry_after_ms = e
                    .retry_after_ms()
                    .and_then(|ms| std::num::NonZeroU32::new(ms.min(u64::from(u32::MAX)) as u32));
            }
            Error::PolicyDenied { policy, .. } => {
                err.kind = Some(e.call_kind());
                err.policy = Some(policy.as_str().into());
            }
            _ => {}
        }
        err
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = serde_json::json!({"error": self.message, "code": self.code});
        if let Some(kind) = self.kind {
            body["kind"] = kind.into();
        }
        if let Some(reasons) = self.reasons {
            body["reasons"] = reasons.into();
        }
        if let Some(id) = self.approval {
            body["approval"] = id.as_ref().into();
        }
        if let Some(ms) = self.retry_after_ms {
            body["retry_after_ms"] = ms.get().into();
            let secs = ms.get().div_ceil(1000).max(1).to_string();
            return (
                self.status,
                [(axum::http::header::RETRY_AFTER, secs)],
                Json(body),
            )
                .into_response();
        }
        if let Some(id) = self.policy {
            body["policy"] = id.as_ref().into();
        }
        (self.status, Json(body)).into_response()
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

/// `axum::Json` whose rejections are [`ApiError`]s (400 bad JSON, 413 too large, 415 wrong content type).
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        match Json::<T>::from_request(req, state).await {
            Ok(Json(v)) => Ok(Body(v)),
            Err(rejection) => Err(json_rejection(rejection)),
        }
    }
}

fn json_rejection(r: JsonRejection) -> ApiError {
    let status = r.status();
    let code = match status {
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        _ => ErrorCode::InvalidInput.as_str(),
    };
    // Unprocessable (well-formed JSON of the wrong shape) is still the caller's bad input: 400 like every other.
    let status = if status == StatusCode::UNPROCESSABLE_ENTITY {
        StatusCode::BAD_REQUEST
    } else {
        status
    };
    ApiError::new(status, code, r.body_text())
}

/// `axum::extract::Query` whose rejections are [`ApiError`]s.
pub struct Params<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Params<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(v)) => Ok(Params(v)),
            Err(r) => Err(query_rejection(r)),
        }
    }
}

fn query_rejection(r: QueryRejection) -> ApiError {
    ApiError::new(
        StatusCode::BAD_REQUEST,
        ErrorCode::InvalidInput.as_str(),
        r.body_text(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_distinct_status() {
        let codes = [
            ErrorCode::InvalidInput,
            ErrorCode::NotFound,
            ErrorCode::Conflict,
            ErrorCode::Upstream,
            ErrorCode::Timeout,
            ErrorCode::Unavailable,
            ErrorCode::Internal,
            ErrorCode::Denied,
            ErrorCode::RateLimited,
        ];
        let statuses: std::collections::HashSet<u16> =
            codes.iter().map(|c| status_of(*c).as_u16()).collect();
        assert_eq!(statuses.len(), codes.len());
        let e: ApiError = Error::not_found("server", "x").into();
        assert_eq!((e.status, e.code), (StatusCode::NOT_FOUND, "not_found"));
        let e: ApiError = Error::Internal("secret detail".into()).into();
        assert!(!e.message.contains("secret detail"));
    }
}
