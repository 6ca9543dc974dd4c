//! REST route for batch introspection: the stored records (headlines) and the count per category. A thin handler over
//! [`crate::catalog::overview`] (the dashboard's section reads it too).

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use super::AppState;
use super::error::{ApiResult, Params};
use crate::catalog;
use crate::error::Error;
use crate::introspect::Category;

#[derive(Deserialize)]
pub struct IntrospectionQuery {
    category: Option<String>,
}

/// `GET /api/introspections`: the latest record per package, optionally of one category.
pub async fn list(
    State(s): State<AppState>,
    Params(q): Params<IntrospectionQuery>,
) -> ApiResult<Json<Value>> {
    let category = match q.category.as_deref().filter(|c| !c.is_empty()) {
        Some(c) => Some(Category::parse(c).ok_or_else(|| {
            Error::invalid(
                "category",
                format!(
                    "unknown category {c:?}; one of: {}",
                    Category::ALL.map(Category::as_str).join(", ")
                ),
            )
        })?),
        None => None,
    };
    Ok(Json(catalog::overview(&s.app, category)?))
}

pub fn schemas() -> Value {
    let categories: Vec<&str> = Category::ALL.iter().map(|c| c.as_str()).collect();
    json!({
        "Introspections": {"type": "object", "properties": {
            "total": {"type": "integer"},
            "categories": {"type": "object", "additionalProperties": {"type": "integer"}, "description": "records per category"},
            "records": {"type": "array", "items": {"type": "object", "properties": {
                "key": {"type": "string"}, "ecosystem": {"type": "string", "enum": ["npm", "pypi", "command"]},
                "package": {"type": "string"}, "version": {"type": ["string", "null"]},
                "category": {"type": "string", "enum": categories},
                "evidence": {"type": "string"}, "hint": {"type": "string"},
                "pass": {"type": "integer", "description": "2 when the second pass (placeholders) ran"},
                "tool_count": {"type": "integer"}, "duration_ms": {"type": "integer"}, "introspected_at": {"type": "string"},
                "catalog_entry": {"type": ["string", "null"], "description": "the server name its tools are searchable under (not installed)"}}}}}},
    })
}
