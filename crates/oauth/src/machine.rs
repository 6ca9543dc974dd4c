//! Tokens obtained without a person, by the grant a server is set up for (`OAUTH_GRANT`): `client_credentials`
//! (a secret or a private-key JWT), `jwt_bearer` (workload identity federation, SEP-1933: the workload's JWT, read
//! from `OAUTH_ASSERTION_FILE` at every token request since it rotates, or the secret `OAUTH_ASSERTION`) and
//! `id_jag` (enterprise-managed authorization: the identity assertion, an ID token, exchanged at the enterprise
//! identity provider for an ID-JAG, which is then presented with the JWT-bearer grant). Each uses DPoP when the
//! authorization server supports it (or `OAUTH_DPOP=on`). A refused grant is an error, never retried with another
//! grant and never followed by a browser authorization.

use crate::discovery::{self, Discovered};
use crate::error::OAuthError;
use crate::flow;
use crate::grants::{self, Exchange};
use crate::service::{OAuth, server_url};
use ad_core::error::{Error, Result};
use ad_core::model::Server;

impl OAuth {
    /// Obtains and stores new tokens for `server` with its machine grant; returns the access token.
    pub(crate) async fn machine_tokens(
        &self,
        server: &Server,
        grant: &str,
        scope: Option<String>,
    ) -> Result<String> {
        let err = |e: OAuthError| e.into_error(&server.name);
        let url = server_url(server)?;
        let discovered = discovery::discover(self.http(), &url, None)
            .await
            .map_err(err)?;
        let scope = scope
            .or_else(|| self.setting(server, "OAUTH_SCOPES"))
            .or_else(|| {
                discovered
                    .resource
                    .as_ref()
                    .and_then(|r| r.scopes_supported.as_ref())
                    .filter(|s| !s.is_empty())
                    .map(|s| s.join(" "))
            });
        let resource = discovered
            .resource
            .as_ref()
            .map(|r| r.resource.clone())
            .unwrap_or_else(|| url.to_string());
        let dpop = self.dpop_for(server, &discovered.server)?;
        let meta = &discovered.server;
        let tokens = match grant {
            "client_credentials" => {
                let (client, assertion) = self.credentials_client(server, &discovered)?;
                flow::client_credentials(
                    self.http(),
                    meta,
                    client,
                    &resource,
                    scope.as_deref(),
                    assertion,
                    dpop.as_ref(),
                )
                .await
            }
            "jwt_bearer" => {
                let assertion = self.token_setting(server, "OAUTH_ASSERTION")?;
                let client = grants::client(
                    &meta.issuer,
                    self.setting(server, "OAUTH_CLIENT_ID"),
                    self.setting(server, "OAUTH_CLIENT_SECRET"),
                    flow::auth_method(meta, true),
                );
                grants::jwt_bearer(
                    self.http(),
                    &meta.token_endpoint,
                    client,
                    &assertion,
                    &resource,
                    scope.as_deref(),
                    "jwt_bearer",
                    dpop.as_ref(),
                )
                .await
            }
            "id_jag" => {
                let jag = self.id_jag(server, &meta.issuer, &resource, scope.as_deref()).await?;
                let client_id = self.setting(server, "OAUTH_CLIENT_ID").ok_or_else(|| {
                    Error::invalid(
                        "OAUTH_CLIENT_ID",
                        "the id_jag grant presents the ID-JAG as a client of the resource's authorization server: set OAUTH_CLIENT_ID (and OAUTH_CLIENT_SECRET)",
                    )
                })?;
                let secret = self.setting(server, "OAUTH_CLIENT_SECRET");
                let client = flow::preregistered(meta, client_id, secret);
                grants::jwt_bearer(
                    self.http(),
                    &meta.token_endpoint,
                    client,
                    &jag,
                    &resource,
                    scope.as_deref(),
                    "id_jag",
                    dpop.as_ref(),
                )
                .await
            }
            other => {
                return Err(Error::invalid(
                    "OAUTH_GRANT",
                    format!("{other:?} is not a grant agent-discover obtains tokens with by itself"),
                ));
            }
        }
        .map_err(err)?;
        self.save(server.id, "tokens", &tokens, None)?;
        self.changed(&server.name);
        Ok(tokens.access_token)
    }

    /// The client of the client credentials grant: its id and secret, or its id and a private-key JWT assertion.
    fn credentials_client(
        &self,
        server: &Server,
        discovered: &Discovered,
    ) -> Result<(crate::model::ClientIdentity, Option<String>)> {
        let client_id = self.setting(server, "OAUTH_CLIENT_ID").ok_or_else(|| {
            Error::invalid(
                "OAUTH_CLIENT_ID",
                "the client credentials grant needs a client id (and OAUTH_CLIENT_SECRET) as secrets of the server",
            )
        })?;
        // A private key (private_key_jwt) takes the place of the secret at the token endpoint.
        let key = self.setting(server, "OAUTH_PRIVATE_KEY");
        let secret = match key {
            Some(_) => None,
            None => self.setting(server, "OAUTH_CLIENT_SECRET"),
        };
        let assertion = match &key {
            Some(pem) => Some(
                flow::client_assertion(
                    pem,
                    self.setting(server, "OAUTH_SIGNING_ALG").as_deref(),
                    &client_id,
                    &discovered.server.issuer,
                )
                .map_err(|e| e.into_error(&server.name))?,
            ),
            None => None,
        };
        Ok((
            flow::preregistered(&discovered.server, client_id, secret),
            assertion,
        ))
    }

    /// Enterprise-managed authorization, first step: the identity assertion (`OAUTH_ID_TOKEN_FILE` or
    /// `OAUTH_ID_TOKEN`, of type `OAUTH_SUBJECT_TOKEN_TYPE`, an ID token by default) exchanged at the enterprise
    /// identity provider's token endpoint (`OAUTH_IDP_TOKEN_ENDPOINT`, or found from `OAUTH_IDP_ISSUER`) as the
    /// client `OAUTH_IDP_CLIENT_ID` (`OAUTH_IDP_CLIENT_SECRET`) for an ID-JAG whose audience is the resource's
    /// authorization server `issuer`.
    async fn id_jag(
        &self,
        server: &Server,
        issuer: &str,
        resource: &str,
        scope: Option<&str>,
    ) -> Result<String> {
        let err = |e: OAuthError| e.into_error(&server.name);
        let subject = self.token_setting(server, "OAUTH_ID_TOKEN")?;
        let (endpoint, idp) = match self.setting(server, "OAUTH_IDP_TOKEN_ENDPOINT") {
            Some(e) => (e, None),
            None => {
                let iss = self.setting(server, "OAUTH_IDP_ISSUER").ok_or_else(|| {
                    Error::invalid(
                        "OAUTH_IDP_TOKEN_ENDPOINT",
                        "the id_jag grant needs the identity provider's token endpoint (OAUTH_IDP_TOKEN_ENDPOINT) or issuer (OAUTH_IDP_ISSUER)",
                    )
                })?;
                let meta = discovery::auth_server_metadata(self.http(), &iss)
                    .await
                    .map_err(err)?
                    .ok_or_else(|| {
                        Error::invalid(
                            "OAUTH_IDP_ISSUER",
                            format!("the identity provider {iss} publishes no metadata"),
                        )
                    })?;
                (meta.token_endpoint.clone(), Some(meta))
            }
        };
        let idp_meta = idp.unwrap_or_else(|| discovery::AuthServer {
            issuer: self.setting(server, "OAUTH_IDP_ISSUER").unwrap_or_default(),
            token_endpoint: endpoint.clone(),
            ..Default::default()
        });
        let client = grants::client(
            &idp_meta.issuer,
            self.setting(server, "OAUTH_IDP_CLIENT_ID"),
            self.setting(server, "OAUTH_IDP_CLIENT_SECRET"),
            flow::auth_method(&idp_meta, true),
        );
        let exchange = Exchange {
            subject_token: subject,
            subject_token_type: self
                .setting(server, "OAUTH_SUBJECT_TOKEN_TYPE")
                .unwrap_or_else(|| grants::ID_TOKEN.to_owned()),
            requested_token_type: Some(grants::ID_JAG.to_owned()),
            audience: Some(issuer.to_owned()),
            resource: Some(resource.to_owned()),
            scope: scope.map(str::to_owned),
            ..Default::default()
        };
        let issued = grants::token_exchange(self.http(), &endpoint, &client, &exchange)
            .await
            .map_err(err)?;
        if let Some(t) = &issued.issued_token_type
            && t != grants::ID_JAG
        {
            return Err(err(OAuthError::Refused(format!(
                "the identity provider issued a {t}, not an ID-JAG"
            ))));
        }
        Ok(issued.token)
    }

    /// A token-valued setting: read from the file `<KEY>_FILE` at every use (a workload's token rotates), else the
    /// secret or environment value `<KEY>`.
    pub(crate) fn token_setting(&self, server: &Server, key: &str) -> Result<String> {
        let file_key = format!("{key}_FILE");
        if let Some(path) = self.setting(server, &file_key) {
            let v = std::fs::read_to_string(path.trim()).map_err(|e| {
                Error::invalid(
                    "authorization",
                    format!("{file_key}: cannot read {}: {e}", path.trim()),
                )
            })?;
            let v = v.trim();
            if v.is_empty() {
                return Err(Error::invalid(
                    "authorization",
                    format!("{file_key}: {} is empty", path.trim()),
                ));
            }
            return Ok(v.to_owned());
        }
        self.setting(server, key)
            .map(|v| v.trim().to_owned())
            .ok_or_else(|| {
                Error::invalid(
                    "authorization",
                    format!("set {file_key} (a file holding the token) or the secret {key}"),
                )
            })
    }
}
