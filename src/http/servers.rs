//! `/mcp/servers/{name}`: one registered server as itself over Streamable HTTP (one MCP service, with its own
//! sessions, per server name, made on first request). Host, Origin and token rules are the router's, as for `/mcp`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::http::{Request, StatusCode};
use axum::response::{IntoResponse, Response};
use rmcp::transport::StreamableHttpService;
use rmcp::transport::streamable_http_server::StreamableHttpServerConfig;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;

use super::error::ApiError;
use crate::app::App;
use crate::error::ErrorCode;
use crate::mcp::{ServerView, Traced};

type Service = Arc<StreamableHttpService<Traced<ServerView>, LocalSessionManager>>;

#[derive(Clone)]
pub struct PerServer {
    app: Arc<App>,
    config: StreamableHttpServerConfig,
    services: Arc<Mutex<HashMap<String, Service>>>,
}

impl PerServer {
    pub fn new(app: Arc<App>, config: StreamableHttpServerConfig) -> PerServer {
        PerServer {
            app,
            config,
            services: Arc::default(),
        }
    }

    /// The MCP service of registered server `name`; None when no such server is registered.
    fn service(&self, name: &str) -> Option<Service> {
        self.app.registry.get(name).ok()?;
        let mut services = self.services.lock().unwrap_or_else(|p| p.into_inner());
        let service = services.entry(name.to_owned()).or_insert_with(|| {
            let (app, server) = (self.app.clone(), name.to_owned());
            Arc::new(StreamableHttpService::new(
                move || Ok(Traced(ServerView::new(app.clone(), server.clone()))),
                Arc::new(LocalSessionManager::default()),
                self.config.clone(),
            ))
        });
        Some(service.clone())
    }
}

impl PerServer {
    /// Answers one request to `/mcp/servers/{name}`: 404 for an unknown server, else that server's MCP service.
    pub async fn handle(self, name: String, request: Request<Body>) -> Response {
        // A server the caller may not see is as unknown as one that is not registered (issue 30).
        let principal = super::protect::principal_of(request.extensions());
        let visible = self.app.proxy.visible_to(principal.as_deref(), &name, None);
        let Some(service) = self.service(&name).filter(|_| visible) else {
            return ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::NotFound.as_str(),
                format!(
                    "no registered server `{}`",
                    crate::model::truncate_for_message(&name)
                ),
            )
            .into_response();
        };
        service.handle(request).await.map(Body::new)
    }
}
