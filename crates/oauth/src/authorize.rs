//! A person's authorization of a server: starting it after the server's challenge (discovery, client identity,
//! PKCE, scope step-ups) and finishing it with the callback (state and issuer checks, code exchange).

use crate::discovery::{self, Challenge};
use crate::error::OAuthError;
use crate::flow;
use crate::model::{ClientIdentity, TokenAuth};
use crate::service::{OAuth, server_url};
use ad_core::error::{Error, Result};
use ad_core::model::Server;

/// Authorizations in one chain of scope step-ups (the first one included) before agent-discover gives up.
pub const MAX_AUTHORIZATIONS: u32 = 3;

impl OAuth {
    /// Starts an authorization for `server` after its challenge (401, or 403 `insufficient_scope` when `step_up`):
    /// discovery, client identity, PKCE; stores it pending and returns the authorize URL. A step-up asks for the
    /// union of the scopes held and the scopes the challenge names; after [`MAX_AUTHORIZATIONS`] in one chain it
    /// gives up with an error instead of another URL.
    pub async fn begin(
        &self,
        server: &Server,
        challenge: Option<&Challenge>,
        step_up: bool,
    ) -> Result<String> {
        self.begin_as(server, "", challenge, step_up).await
    }

    /// [`OAuth::begin`] for the records of `suffix`: the server's own (`""`) or one user's (`@<hash>`, `peruser.rs`,
    /// whose `state` ends with `.<hash>` so the callback finds them).
    pub(crate) async fn begin_as(
        &self,
        server: &Server,
        suffix: &str,
        challenge: Option<&Challenge>,
        step_up: bool,
    ) -> Result<String> {
        let err = |e: OAuthError| e.into_error(&server.name);
        if let Some(grant) = self.machine_grant(server).filter(|g| g != "token_exchange") {
            // No person is involved: a refused or failed grant is reported, never turned into a browser flow.
            return Err(Error::Upstream {
                server: server.name.clone(),
                message: format!(
                    "OAuth: the server refused the token of the {grant} grant (OAUTH_GRANT={grant}); no browser authorization is attempted"
                ),
            });
        }
        let url = server_url(server)?;
        let held: Option<crate::model::Tokens> =
            self.load(server.id, &format!("tokens{suffix}"))?;
        let previous: Option<crate::model::Pending> =
            self.load(server.id, &format!("pending{suffix}"))?;
        let authorizations = if step_up {
            held.as_ref()
                .map(|t| t.authorizations)
                .or(previous.as_ref().map(|p| p.authorizations))
                .unwrap_or(1)
                + 1
        } else {
            1
        };
        if authorizations > MAX_AUTHORIZATIONS {
            return Err(Error::Upstream {
                server: server.name.clone(),
                message: format!(
                    "OAuth: the server still answers insufficient_scope after {MAX_AUTHORIZATIONS} authorizations; not asking again"
                ),
            });
        }
        let discovered = discovery::discover(self.http(), &url, challenge)
            .await
            .map_err(err)?;
        let methods = discovered
            .server
            .code_challenge_methods_supported
            .clone()
            .unwrap_or_default();
        if !discovered.server.assumed && !methods.iter().any(|m| m == "S256") {
            return Err(err(OAuthError::Metadata(format!(
                "authorization server {} does not advertise PKCE S256 (code_challenge_methods_supported); refused",
                discovered.server.issuer
            ))));
        }
        let resource = discovered
            .resource
            .as_ref()
            .map(|r| r.resource.clone())
            .unwrap_or_else(|| url.to_string());
        // Scopes: configured, else the challenge's, else the resource's scopes_supported, else none; a step-up adds
        // what is held.
        let mut scope: Option<String> = self
            .setting(server, "OAUTH_SCOPES")
            .or_else(|| challenge.and_then(|c| c.scope.clone()))
            .or_else(|| {
                discovered
                    .resource
                    .as_ref()
                    .and_then(|r| r.scopes_supported.as_ref())
                    .filter(|s| !s.is_empty())
                    .map(|s| s.join(" "))
            });
        if step_up {
            let before = held
                .as_ref()
                .and_then(|t| t.scope.clone())
                .or(previous.as_ref().and_then(|p| p.scope.clone()));
            scope = union_scopes(before.as_deref(), scope.as_deref());
        }
        let offline = discovered
            .server
            .scopes_supported
            .as_ref()
            .is_some_and(|s| s.iter().any(|x| x == "offline_access"));
        if offline {
            scope = union_scopes(scope.as_deref(), Some("offline_access"));
        }
        let redirect_uri = self.redirect_uri(&server.name);
        let client = self
            .client_identity(server, &discovered.server, &redirect_uri)
            .await?;
        let pending = flow::authorization(
            &discovered.server,
            client,
            &redirect_uri,
            &resource,
            scope,
            authorizations,
        )
        .map_err(err)?;
        let mut pending = pending;
        if let Some(h) = suffix.strip_prefix('@') {
            pending = flow::with_state_suffix(pending, h);
        }
        self.save(
            server.id,
            &format!("pending{suffix}"),
            &pending,
            Some(&pending.auth_url),
        )?;
        self.changed(&server.name);
        Ok(pending.auth_url)
    }

    /// The client identity for this authorization server, in the specification's order: pre-registered, a Client ID
    /// Metadata Document URL (when supported), a stored registration with this issuer, dynamic registration.
    async fn client_identity(
        &self,
        server: &Server,
        meta: &discovery::AuthServer,
        redirect_uri: &str,
    ) -> Result<ClientIdentity> {
        if let Some(id) = self.setting(server, "OAUTH_CLIENT_ID") {
            let secret = self.setting(server, "OAUTH_CLIENT_SECRET");
            return Ok(flow::preregistered(meta, id, secret));
        }
        if meta.client_id_metadata_document_supported
            && let Some(url) = self.setting(server, "OAUTH_CLIENT_METADATA_URL")
        {
            return Ok(ClientIdentity {
                issuer: meta.issuer.clone(),
                client_id: url,
                client_secret: None,
                auth: TokenAuth::None,
                redirect_uri: None,
                source: "metadata_document".into(),
            });
        }
        if let Some(stored) = self.load::<ClientIdentity>(server.id, "client")?
            && stored.issuer == meta.issuer
            && stored.redirect_uri.as_deref() == Some(redirect_uri)
        {
            return Ok(stored);
        }
        let Some(endpoint) = meta.registration_endpoint.as_deref() else {
            return Err(Error::invalid(
                "OAUTH_CLIENT_ID",
                format!(
                    "authorization server {} offers no dynamic client registration; register a client there and set OAUTH_CLIENT_ID (and OAUTH_CLIENT_SECRET) as secrets of `{}`",
                    meta.issuer, server.name
                ),
            ));
        };
        let client = flow::register(self.http(), meta, endpoint, redirect_uri)
            .await
            .map_err(|e| e.into_error(&server.name))?;
        self.save(server.id, "client", &client, None)?;
        Ok(client)
    }

    /// Completes the pending authorization of `server` with the callback URL (or its query, or the bare code when
    /// the authorization server shows it): checks `state` and `iss`, exchanges the code, stores the tokens.
    pub async fn finish(&self, server: &Server, callback: &str) -> Result<()> {
        let params = flow::callback_params(callback);
        // A user's authorization (`peruser.rs`) says whose in its state: `<random>.<hash>`.
        let suffix = params
            .get("state")
            .and_then(|s| s.rsplit_once('.'))
            .map(|(_, h)| h)
            .filter(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
            .map(|h| format!("@{h}"))
            .unwrap_or_default();
        let pending: crate::model::Pending = self
            .load(server.id, &format!("pending{suffix}"))?
            .ok_or_else(|| {
                Error::invalid(
                    "authorization",
                    format!("no authorization of `{}` is waiting", server.name),
                )
            })?;
        if let Some(error) = params.get("error") {
            let description = params
                .get("error_description")
                .map(|d| format!(": {d}"))
                .unwrap_or_default();
            return Err(Error::Upstream {
                server: server.name.clone(),
                message: format!("OAuth: the authorization server answered {error}{description}"),
            });
        }
        let code = params
            .get("code")
            .cloned()
            .or_else(|| (!callback.contains(['=', '?', '/'])).then(|| callback.trim().to_owned()))
            .filter(|c| !c.is_empty())
            .ok_or_else(|| Error::invalid("authorization", "the callback carries no code"))?;
        // A bare code (typed by hand) has no state to compare; a URL or query must carry the right one.
        if params.contains_key("code") && params.get("state") != Some(&pending.state) {
            return Err(Error::invalid(
                "state",
                "the callback's state does not match the authorization in progress; refused",
            ));
        }
        match params.get("iss") {
            Some(iss) if iss != &pending.server.issuer => {
                return Err(Error::invalid(
                    "iss",
                    format!(
                        "the callback names the issuer {iss:?}, not {:?}; refused (RFC 9207)",
                        pending.server.issuer
                    ),
                ));
            }
            None if params.contains_key("code")
                && pending
                    .server
                    .authorization_response_iss_parameter_supported =>
            {
                return Err(Error::invalid(
                    "iss",
                    "the authorization server advertises the iss parameter but the callback lacks it; refused (RFC 9207)",
                ));
            }
            _ => {}
        }
        let dpop = self.dpop_for(server, &pending.server)?;
        let tokens = flow::exchange(self.http(), &pending, &code, dpop.as_ref())
            .await
            .map_err(|e| e.into_error(&server.name))?;
        self.save(server.id, &format!("tokens{suffix}"), &tokens, None)?;
        self.inner
            .registry
            .store()
            .delete_oauth(server.id, &format!("pending{suffix}"))?;
        self.changed(&server.name);
        Ok(())
    }
}

fn union_scopes(a: Option<&str>, b: Option<&str>) -> Option<String> {
    let mut out: Vec<&str> = Vec::new();
    for s in a.into_iter().chain(b).flat_map(str::split_whitespace) {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    (!out.is_empty()).then(|| out.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_union_keeps_order_and_drops_repeats() {
        assert_eq!(
            union_scopes(Some("a b"), Some("b c")).as_deref(),
            Some("a b c")
        );
        assert_eq!(union_scopes(None, None), None);
        assert_eq!(union_scopes(None, Some("x")).as_deref(), Some("x"));
    }
}
