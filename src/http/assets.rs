//! The dashboard's static files, compiled into the binary with `include_str!` (vanilla HTML, CSS and JS in `web/`;
//! no build step, so `cargo install` gives a working dashboard).

use axum::extract::Path;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use super::error::ApiError;

/// (file name, content type, contents)
const FILES: &[(&str, &str, &str)] = &[
    (
        "index.html",
        "text/html; charset=utf-8",
        include_str!("../../web/index.html"),
    ),
    (
        "app.js",
        "text/javascript; charset=utf-8",
        include_str!("../../web/app.js"),
    ),
    (
        "profiles.js",
        "text/javascript; charset=utf-8",
        include_str!("../../web/profiles.js"),
    ),
    (
        "personal.js",
        "text/javascript; charset=utf-8",
        include_str!("../../web/personal.js"),
    ),
    (
        "policies.js",
        "text/javascript; charset=utf-8",
        include_str!("../../web/policies.js"),
    ),
    (
        "saved.js",
        "text/javascript; charset=utf-8",
        include_str!("../../web/saved.js"),
    ),
    (
        "schema-form.js",
        "text/javascript; charset=utf-8",
        include_str!("../../web/schema-form.js"),
    ),
    (
        "style.css",
        "text/css; charset=utf-8",
        include_str!("../../web/style.css"),
    ),
    (
        "favicon.svg",
        "image/svg+xml",
        include_str!("../../web/favicon.svg"),
    ),
];

/// Scripts, styles and connections only from this server; no frames, no inline script.
const CSP: &str = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; \
                   base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

pub async fn index() -> Response {
    serve("index.html")
}

pub async fn file(Path(name): Path<String>) -> Response {
    serve(&name)
}

fn serve(name: &str) -> Response {
    let Some((_, content_type, body)) = FILES.iter().find(|(n, _, _)| *n == name) else {
        return ApiError::new(
            StatusCode::NOT_FOUND,
            "not_found",
            format!("no file {}", crate::model::truncate_for_message(name)),
        )
        .into_response();
    };
    let mut resp = (
        [
            (header::CONTENT_TYPE, *content_type),
            // The files change with the binary; revalidation is cheap on loopback.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        *body,
    )
        .into_response();
    resp.headers_mut().insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    resp
}
