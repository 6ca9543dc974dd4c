//! DPoP (RFC 9449; MCP SEP-1932): a per-server ES256 key pair, kept sealed with the server's other OAuth records
//! (kind `dpop_key`), and the proof JWT sent in the `DPoP` header of every token request and every request to the
//! resource (`htm`, `htu`, `iat`, `jti`; `ath` with an access token; `nonce` once a server asked for one).
//!
//! Nonces (RFC 9449 sections 8 and 9) are remembered per origin (the authorization server and the resource server
//! each keep their own) in the process, and replaced whenever a server sends a new `DPoP-Nonce`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use url::Url;

use crate::error::OAuthError;
use crate::model::now_secs;

/// The header carrying a proof, and the one servers send a nonce in.
pub const HEADER: &str = "DPoP";
pub const NONCE_HEADER: &str = "DPoP-Nonce";

/// A DPoP key as stored (sealed) per server.
#[derive(Serialize, Deserialize)]
pub(crate) struct StoredKey {
    /// PKCS#8 (DER), Base64.
    pub pkcs8: String,
}

/// An ES256 key pair that signs DPoP proofs.
pub struct DpopKey {
    pair: EcdsaKeyPair,
    jwk: Value,
    thumbprint: String,
}

impl std::fmt::Debug for DpopKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DpopKey {{ jkt: {} }}", self.thumbprint)
    }
}

impl DpopKey {
    /// A new key pair, with its PKCS#8 form to store.
    pub(crate) fn generate() -> Result<(DpopKey, StoredKey), OAuthError> {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .map_err(|_| OAuthError::Invalid("cannot generate a DPoP key".into()))?;
        let key = DpopKey::from_pkcs8(pkcs8.as_ref())?;
        Ok((
            key,
            StoredKey {
                pkcs8: STANDARD.encode(pkcs8.as_ref()),
            },
        ))
    }

    pub(crate) fn from_stored(stored: &StoredKey) -> Result<DpopKey, OAuthError> {
        let der = STANDARD
            .decode(stored.pkcs8.as_bytes())
            .map_err(|_| OAuthError::Invalid("the stored DPoP key is not Base64".into()))?;
        DpopKey::from_pkcs8(&der)
    }

    pub fn from_pkcs8(der: &[u8]) -> Result<DpopKey, OAuthError> {
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, der)
            .map_err(|_| OAuthError::Invalid("the DPoP key is not a P-256 PKCS#8 key".into()))?;
        // The uncompressed point: 0x04, X (32 bytes), Y (32 bytes).
        let point = pair.public_key().as_ref();
        if point.len() != 65 || point[0] != 4 {
            return Err(OAuthError::Invalid(
                "unexpected P-256 public key encoding".into(),
            ));
        }
        let x = URL_SAFE_NO_PAD.encode(&point[1..33]);
        let y = URL_SAFE_NO_PAD.encode(&point[33..65]);
        // RFC 7638: the required members in lexicographic order, no whitespace.
        let canonical = format!(r#"{{"crv":"P-256","kty":"EC","x":"{x}","y":"{y}"}}"#);
        let thumbprint = URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()));
        Ok(DpopKey {
            pair,
            jwk: json!({"kty": "EC", "crv": "P-256", "x": x, "y": y}),
            thumbprint,
        })
    }

    /// The JWK thumbprint (RFC 7638, SHA-256): what a DPoP-bound token's `cnf.jkt` names.
    pub fn thumbprint(&self) -> &str {
        &self.thumbprint
    }

    /// The public key as a JWK (no private part).
    pub fn jwk(&self) -> &Value {
        &self.jwk
    }

    /// A proof for one request: `htm` the method, `htu` the URL without query and fragment, a fresh `jti`, `iat`
    /// now, `ath` the hash of `access_token` when one is presented, and `nonce` when the server gave one.
    pub fn proof(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
        nonce: Option<&str>,
    ) -> Result<String, OAuthError> {
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": self.jwk});
        let mut claims = json!({
            "jti": URL_SAFE_NO_PAD.encode(ad_registry::secrets::random_bytes()),
            "htm": method,
            "htu": htu(url),
            "iat": now_secs(),
        });
        if let Some(token) = access_token {
            claims["ath"] = URL_SAFE_NO_PAD
                .encode(Sha256::digest(token.as_bytes()))
                .into();
        }
        if let Some(n) = nonce {
            claims["nonce"] = n.into();
        }
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(claims.to_string())
        );
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let sig = self
            .pair
            .sign(&rng, input.as_bytes())
            .map_err(|_| OAuthError::Invalid("DPoP proof signing failed".into()))?;
        Ok(format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())))
    }
}

/// The `htu` of a URL: without its query and fragment (RFC 9449 section 4.2).
pub fn htu(url: &str) -> String {
    match Url::parse(url) {
        Ok(mut u) => {
            u.set_query(None);
            u.set_fragment(None);
            u.into()
        }
        Err(_) => url.split(['?', '#']).next().unwrap_or_default().to_owned(),
    }
}

fn origin(url: &str) -> String {
    Url::parse(url)
        .map(|u| u.origin().ascii_serialization())
        .unwrap_or_else(|_| url.to_owned())
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The nonces servers gave, by origin (shared by every connection of a process).
pub type Nonces = Arc<Mutex<HashMap<String, String>>>;

/// A key and the process's nonces: what signs the proofs of one server's requests.
#[derive(Clone, Debug)]
pub struct Dpop {
    pub key: Arc<DpopKey>,
    pub(crate) nonces: Nonces,
}

impl Dpop {
    pub fn new(key: Arc<DpopKey>, nonces: Nonces) -> Dpop {
        Dpop { key, nonces }
    }

    /// A proof for `method` on `url`, with the nonce last given by that origin.
    pub fn proof(
        &self,
        method: &str,
        url: &str,
        access_token: Option<&str>,
    ) -> Result<String, OAuthError> {
        let nonce = self.nonce(url);
        self.key.proof(method, url, access_token, nonce.as_deref())
    }

    pub fn nonce(&self, url: &str) -> Option<String> {
        lock(&self.nonces).get(&origin(url)).cloned()
    }

    /// Remembers the nonce `url`'s origin sent; true when it is a new one (a retry can use it).
    pub fn remember(&self, url: &str, nonce: Option<&str>) -> bool {
        let Some(n) = nonce.map(str::trim).filter(|n| !n.is_empty()) else {
            return false;
        };
        let mut nonces = lock(&self.nonces);
        let old = nonces.insert(origin(url), n.to_owned());
        old.as_deref() != Some(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED, UnparsedPublicKey};

    fn part(jwt: &str, i: usize) -> Value {
        let p = jwt.split('.').nth(i).unwrap();
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(p).unwrap()).unwrap()
    }

    #[test]
    fn a_proof_is_a_signed_dpop_jwt_with_the_request_and_token_hash() {
        let (key, stored) = DpopKey::generate().unwrap();
        let again = DpopKey::from_stored(&stored).unwrap();
        assert_eq!(
            key.thumbprint(),
            again.thumbprint(),
            "the stored key is the same key"
        );
        let proof = key
            .proof(
                "POST",
                "https://rs.example/mcp?x=1#f",
                Some("tok"),
                Some("n1"),
            )
            .unwrap();
        let header = part(&proof, 0);
        assert_eq!(header["typ"], "dpop+jwt");
        assert_eq!(header["alg"], "ES256");
        assert!(header["jwk"].get("d").is_none(), "no private part");
        let claims = part(&proof, 1);
        assert_eq!(claims["htm"], "POST");
        assert_eq!(claims["htu"], "https://rs.example/mcp");
        assert_eq!(claims["nonce"], "n1");
        assert_eq!(
            claims["ath"],
            URL_SAFE_NO_PAD.encode(Sha256::digest(b"tok")).as_str()
        );
        assert!(claims["iat"].as_u64().unwrap() + 5 >= now_secs());
        // The signature verifies with the key in the header.
        let x = URL_SAFE_NO_PAD
            .decode(header["jwk"]["x"].as_str().unwrap())
            .unwrap();
        let y = URL_SAFE_NO_PAD
            .decode(header["jwk"]["y"].as_str().unwrap())
            .unwrap();
        let point = [&[4u8][..], &x, &y].concat();
        let (input, sig) = proof.rsplit_once('.').unwrap();
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &point)
            .verify(input.as_bytes(), &URL_SAFE_NO_PAD.decode(sig).unwrap())
            .expect("the proof verifies");
        // Each proof has its own jti; no token, no ath.
        let other = key
            .proof("GET", "https://rs.example/mcp", None, None)
            .unwrap();
        assert_ne!(part(&other, 1)["jti"], claims["jti"]);
        assert!(part(&other, 1).get("ath").is_none());
        assert!(part(&other, 1).get("nonce").is_none());
    }

    #[test]
    fn the_thumbprint_follows_rfc_7638() {
        // RFC 7638 section 3.1 is an RSA example; check the EC form by recomputing it from the JWK.
        let (key, _) = DpopKey::generate().unwrap();
        let j = key.jwk();
        let canonical = format!(
            r#"{{"crv":"P-256","kty":"EC","x":"{}","y":"{}"}}"#,
            j["x"].as_str().unwrap(),
            j["y"].as_str().unwrap()
        );
        assert_eq!(
            key.thumbprint(),
            URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
        );
        assert_eq!(key.thumbprint().len(), 43);
    }

    #[test]
    fn nonces_are_kept_per_origin() {
        let (key, _) = DpopKey::generate().unwrap();
        let d = Dpop::new(Arc::new(key), Nonces::default());
        assert!(d.remember("http://as.example:1/token", Some("a")));
        assert!(
            !d.remember("http://as.example:1/other", Some("a")),
            "the same nonce"
        );
        assert!(d.remember("http://rs.example:2/mcp", Some("r")));
        assert_eq!(d.nonce("http://as.example:1/token").as_deref(), Some("a"));
        assert_eq!(d.nonce("http://rs.example:2/mcp").as_deref(), Some("r"));
        assert_eq!(d.nonce("http://as.example:3/token"), None);
        let p = d.proof("POST", "http://rs.example:2/mcp", None).unwrap();
        assert_eq!(part(&p, 1)["nonce"], "r");
    }
}
