//! `/mcp/servers/{name}` and `/mcp/profiles/{name}`: one registered server as itself, or one profile, over
//! Streamable HTTP (one MCP service, with its own sessions, per server or profile name, made on first request). Host,
//! Origin and token rules are the router's, as for `/mcp`. Both are the one MCP handler over another view.

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
use crate::mcp::{McpServer, ToolsMode, Traced, View};

type Service = Arc<StreamableHttpService<Traced<McpServer>, LocalSessionManager>>;

/// What a family of endpoints serves each name as.
#[derive(Clone, Copy)]
enum Kind {
    Server,
    Profile(ToolsMode),
}

#[derive(Clone)]
pub struct PerServer {
    app: Arc<App>,
    config: StreamableHttpServerConfig,
    kind: Kind,
    services: Arc<Mutex<HashMap<String, Service>>>,
}

impl PerServer {
    /// `/mcp/servers/{name}`.
    pub fn new(app: Arc<App>, config: StreamableHttpServerConfig) -> PerServer {
        PerServer {
            app,
            config,
            kind: Kind::Server,
            services: Arc::default(),
        }
    }

    /// `/mcp/profiles/{name}`, its tools listed as `mode` says.
    pub fn profiles(
        app: Arc<App>,
        config: StreamableHttpServerConfig,
        mode: ToolsMode,
    ) -> PerServer {
        PerServer {
            kind: Kind::Profile(mode),
            ..PerServer::new(app, config)
        }
    }

    /// The MCP service of `name`; None when no such server or profile exists.
    fn service(&self, name: &str) -> Option<Service> {
        let view = match self.kind {
            Kind::Server => {
                self.app.registry.get(name).ok()?;
                View::Server(name.to_owned())
            }
            Kind::Profile(mode) => {
                self.app.profile(name).ok()?;
                View::Profile {
                    name: name.to_owned(),
                    mode,
                }
            }
        };
        let mut services = self.services.lock().unwrap_or_else(|p| p.into_inner());
        let service = services.entry(name.to_owned()).or_insert_with(|| {
            let app = self.app.clone();
            Arc::new(StreamableHttpService::new(
                move || Ok(Traced(McpServer::for_http(app.clone(), view.clone()))),
                Arc::new(LocalSessionManager::default()),
                self.config.clone(),
            ))
        });
        Some(service.clone())
    }
}

impl PerServer {
    /// Answers one request to `/mcp/servers/{name}` or `/mcp/profiles/{name}`: 404 for an unknown name, else its MCP
    /// service.
    pub async fn handle(self, name: String, request: Request<Body>) -> Response {
        // A server the caller may not see is as unknown as one that is not registered (issue 30); within a profile
        // the caller's groups still decide per server and tool.
        let principal = super::protect::principal_of(request.extensions());
        let visible = match self.kind {
            Kind::Server => self.app.proxy.visible_to(principal.as_deref(), &name, None),
            Kind::Profile(_) => true,
        };
        let Some(service) = self.service(&name).filter(|_| visible) else {
            let what = match self.kind {
                Kind::Server => "registered server",
                Kind::Profile(_) => "profile",
            };
            return ApiError::new(
                StatusCode::NOT_FOUND,
                ErrorCode::NotFound.as_str(),
                format!("no {what} `{}`", crate::model::truncate_for_message(&name)),
            )
            .into_response();
        };
        service.handle(request).await.map(Body::new)
    }
}
