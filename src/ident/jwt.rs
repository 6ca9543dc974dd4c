//! JWT access tokens (RFC 9068) checked locally: the compact form split and decoded, the signature verified with a
//! key of the issuer's JWKS (RS256, PS256, ES256, ES384 through aws-lc-rs), and the claims a resource server must
//! check (`iss`, `aud`, `exp`, `nbf`) with a small leeway for clock skew.

use aws_lc_rs::signature::{self, UnparsedPublicKey};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Map, Value};

/// Clock skew tolerated on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECS: u64 = 60;

/// Why a token was refused; the text goes into the 401's `error_description`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not a JWT (three base64url parts with a JSON header and claims): try introspection.
    NotJwt,
    /// The header names no key the issuer publishes, even after fetching its JWKS again.
    UnknownKey(String),
    Invalid(String),
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::NotJwt => f.write_str("the token is not a JWT"),
            Refusal::UnknownKey(kid) => write!(f, "no key `{kid}` in the issuer's JWKS"),
            Refusal::Invalid(why) => f.write_str(why),
        }
    }
}

fn invalid(why: impl Into<String>) -> Refusal {
    Refusal::Invalid(why.into())
}

/// A compact JWS split and decoded, not yet verified.
#[derive(Debug)]
pub struct Jws<'a> {
    pub alg: String,
    pub kid: Option<String>,
    pub claims: Map<String, Value>,
    signed: &'a str,
    signature: Vec<u8>,
}

impl<'a> Jws<'a> {
    pub fn parse(token: &'a str) -> Result<Jws<'a>, Refusal> {
        let mut parts = token.split('.');
        let (Some(h), Some(c), Some(s), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(Refusal::NotJwt);
        };
        let json = |part: &str| -> Option<Map<String, Value>> {
            let bytes = URL_SAFE_NO_PAD.decode(part).ok()?;
            match serde_json::from_slice(&bytes).ok()? {
                Value::Object(m) => Some(m),
                _ => None,
            }
        };
        let (Some(header), Some(claims)) = (json(h), json(c)) else {
            return Err(Refusal::NotJwt);
        };
        let signature = URL_SAFE_NO_PAD
            .decode(s)
            .map_err(|_| invalid("the token's signature is not base64url"))?;
        // RFC 9068 section 4: `typ` is `at+jwt` (or `application/at+jwt`) when present; an ID token is refused.
        if let Some(typ) = header.get("typ").and_then(Value::as_str) {
            let t = typ.to_ascii_lowercase();
            if !matches!(
                t.as_str(),
                "at+jwt" | "application/at+jwt" | "jwt" | "application/jwt"
            ) {
                return Err(invalid(format!(
                    "a token of type `{typ}` is not an access token"
                )));
            }
        }
        Ok(Jws {
            alg: header
                .get("alg")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            kid: header.get("kid").and_then(Value::as_str).map(str::to_owned),
            claims,
            signed: &token[..h.len() + 1 + c.len()],
            signature,
        })
    }

    /// Verifies the signature with `key` (the JWK the header's `kid` names).
    pub fn verify(&self, key: &Jwk) -> Result<(), Refusal> {
        if let Some(want) = &key.alg
            && want != &self.alg
        {
            return Err(invalid(format!(
                "the token is signed with {} but its key is for {want}",
                self.alg
            )));
        }
        let msg = self.signed.as_bytes();
        let ok = match (&key.material, self.alg.as_str()) {
            (Material::Rsa { n, e }, "RS256") => signature::RsaPublicKeyComponents { n, e }
                .verify(&signature::RSA_PKCS1_2048_8192_SHA256, msg, &self.signature)
                .is_ok(),
            (Material::Rsa { n, e }, "PS256") => signature::RsaPublicKeyComponents { n, e }
                .verify(&signature::RSA_PSS_2048_8192_SHA256, msg, &self.signature)
                .is_ok(),
            (
                Material::Ec {
                    curve: Curve::P256,
                    point,
                },
                "ES256",
            ) => UnparsedPublicKey::new(&signature::ECDSA_P256_SHA256_FIXED, point)
                .verify(msg, &self.signature)
                .is_ok(),
            (
                Material::Ec {
                    curve: Curve::P384,
                    point,
                },
                "ES384",
            ) => UnparsedPublicKey::new(&signature::ECDSA_P384_SHA384_FIXED, point)
                .verify(msg, &self.signature)
                .is_ok(),
            (_, "none") | (_, "") => return Err(invalid("unsigned tokens are refused")),
            (_, alg) if !SUPPORTED.contains(&alg) => {
                return Err(invalid(format!(
                    "signing algorithm {alg} is not supported ({})",
                    SUPPORTED.join(", ")
                )));
            }
            _ => return Err(invalid("the token's algorithm does not fit its key")),
        };
        if ok {
            Ok(())
        } else {
            Err(invalid("the token's signature does not verify"))
        }
    }
}

/// The algorithms verified.
pub const SUPPORTED: [&str; 4] = ["RS256", "PS256", "ES256", "ES384"];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Curve {
    P256,
    P384,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Material {
    Rsa {
        n: Vec<u8>,
        e: Vec<u8>,
    },
    /// The uncompressed point (0x04, x, y).
    Ec {
        curve: Curve,
        point: Vec<u8>,
    },
}

/// One public key of a JWKS.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Jwk {
    pub kid: Option<String>,
    pub alg: Option<String>,
    pub material: Material,
}

/// The signing keys of a JWKS document (`{"keys": [...]}`); keys of other types or uses are skipped.
pub fn parse_jwks(doc: &Value) -> Vec<Jwk> {
    let b64 = |k: &Map<String, Value>, name: &str| {
        k.get(name)
            .and_then(Value::as_str)
            .and_then(|s| URL_SAFE_NO_PAD.decode(s.trim_end_matches('=')).ok())
    };
    let Some(keys) = doc.get("keys").and_then(Value::as_array) else {
        return Vec::new();
    };
    keys.iter()
        .filter_map(Value::as_object)
        .filter(|k| {
            k.get("use")
                .and_then(Value::as_str)
                .is_none_or(|u| u == "sig")
        })
        .filter_map(|k| {
            let material = match k.get("kty").and_then(Value::as_str)? {
                "RSA" => Material::Rsa {
                    n: b64(k, "n")?,
                    e: b64(k, "e")?,
                },
                "EC" => {
                    let (curve, len) = match k.get("crv").and_then(Value::as_str)? {
                        "P-256" => (Curve::P256, 32),
                        "P-384" => (Curve::P384, 48),
                        _ => return None,
                    };
                    let (x, y) = (b64(k, "x")?, b64(k, "y")?);
                    if x.len() != len || y.len() != len {
                        return None;
                    }
                    let mut point = Vec::with_capacity(1 + 2 * len);
                    point.push(4);
                    point.extend(x);
                    point.extend(y);
                    Material::Ec { curve, point }
                }
                _ => return None,
            };
            Some(Jwk {
                kid: k.get("kid").and_then(Value::as_str).map(str::to_owned),
                alg: k.get("alg").and_then(Value::as_str).map(str::to_owned),
                material,
            })
        })
        .collect()
}

/// What the claims must say: the issuer, one of the audiences, and a current validity window.
pub struct Expect<'a> {
    pub issuer: &'a str,
    pub audiences: &'a [String],
    pub now: u64,
}

/// Checks `iss`, `aud` (a string or an array), `exp` (required) and `nbf` against `want`.
pub fn check_claims(claims: &Map<String, Value>, want: &Expect<'_>) -> Result<(), Refusal> {
    match claims.get("iss").and_then(Value::as_str) {
        Some(iss) if same_issuer(iss, want.issuer) => {}
        Some(iss) => {
            return Err(invalid(format!(
                "the token's issuer `{iss}` is not trusted here"
            )));
        }
        None => return Err(invalid("the token names no issuer")),
    }
    check_audience(claims.get("aud"), want.audiences)?;
    match claims.get("exp").and_then(Value::as_u64) {
        Some(exp) if exp + LEEWAY_SECS > want.now => {}
        Some(_) => return Err(invalid("the token has expired")),
        None => return Err(invalid("the token has no expiry")),
    }
    if let Some(nbf) = claims.get("nbf").and_then(Value::as_u64)
        && nbf > want.now + LEEWAY_SECS
    {
        return Err(invalid("the token is not valid yet"));
    }
    Ok(())
}

/// `aud` as a string or an array must name one of `accepted` (compared without a trailing slash).
pub fn check_audience(aud: Option<&Value>, accepted: &[String]) -> Result<(), Refusal> {
    let names: Vec<&str> = match aud {
        Some(Value::String(s)) => vec![s.as_str()],
        Some(Value::Array(a)) => a.iter().filter_map(Value::as_str).collect(),
        _ => return Err(invalid("the token names no audience")),
    };
    let norm = |s: &str| s.trim_end_matches('/').to_owned();
    if names
        .iter()
        .any(|n| accepted.iter().any(|a| norm(a) == norm(n)))
    {
        Ok(())
    } else {
        Err(invalid(format!(
            "the token's audience ({}) is not this resource",
            names.join(", ")
        )))
    }
}

/// Issuers compare exactly, but for a trailing slash.
pub fn same_issuer(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

/// The granted scopes: `scope` (space-separated, RFC 9068) or `scp` (a string or an array, Entra and Okta).
pub fn scopes(claims: &Map<String, Value>) -> Vec<String> {
    let from = |v: &Value| -> Vec<String> {
        match v {
            Value::String(s) => s.split_whitespace().map(str::to_owned).collect(),
            Value::Array(a) => a
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect(),
            _ => Vec::new(),
        }
    };
    claims
        .get("scope")
        .or_else(|| claims.get("scp"))
        .map(from)
        .unwrap_or_default()
}

/// The groups in `claim` (a dotted path into nested objects, e.g. `realm_access.roles`): an array of strings, or
/// one string of space- or comma-separated names.
pub fn groups(claims: &Map<String, Value>, claim: &str) -> Vec<String> {
    let mut at: Option<&Value> = None;
    for (i, part) in claim.split('.').enumerate() {
        at = if i == 0 {
            claims.get(part)
        } else {
            at.and_then(|v| v.get(part))
        };
    }
    match at {
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        Some(Value::String(s)) => s
            .split([' ', ','])
            .filter(|g| !g.is_empty())
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sign_es256(claims: &Value, kid: &str) -> (String, Value) {
        use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let key =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref()).unwrap();
        let point = key.public_key().as_ref();
        let jwk = json!({"kty": "EC", "crv": "P-256", "kid": kid, "use": "sig",
            "x": URL_SAFE_NO_PAD.encode(&point[1..33]), "y": URL_SAFE_NO_PAD.encode(&point[33..])});
        let h = URL_SAFE_NO_PAD
            .encode(json!({"alg": "ES256", "kid": kid, "typ": "at+jwt"}).to_string());
        let c = URL_SAFE_NO_PAD.encode(claims.to_string());
        let input = format!("{h}.{c}");
        let sig = key.sign(&rng, input.as_bytes()).unwrap();
        (
            format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig.as_ref())),
            jwk,
        )
    }

    fn sign_rs256(claims: &Value) -> (String, Value) {
        use aws_lc_rs::rsa::KeySize;
        use aws_lc_rs::signature::{KeyPair, RSA_PKCS1_SHA256, RsaKeyPair};
        let key = RsaKeyPair::generate(KeySize::Rsa2048).unwrap();
        let (n, e) = rsa_public_parts(key.public_key().as_ref());
        let jwk = json!({"kty": "RSA", "kid": "r1", "n": URL_SAFE_NO_PAD.encode(n),
            "e": URL_SAFE_NO_PAD.encode(e)});
        let h = URL_SAFE_NO_PAD.encode(json!({"alg": "RS256", "kid": "r1"}).to_string());
        let c = URL_SAFE_NO_PAD.encode(claims.to_string());
        let input = format!("{h}.{c}");
        let rng = aws_lc_rs::rand::SystemRandom::new();
        let mut sig = vec![0; key.public_modulus_len()];
        key.sign(&RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut sig)
            .unwrap();
        (format!("{input}.{}", URL_SAFE_NO_PAD.encode(sig)), jwk)
    }

    /// `n` and `e` of a DER RSAPublicKey (SEQUENCE of two INTEGERs), leading zero bytes dropped.
    fn rsa_public_parts(der: &[u8]) -> (Vec<u8>, Vec<u8>) {
        fn tlv(b: &[u8]) -> (&[u8], &[u8]) {
            let (len, at) = match b[1] {
                l if l < 0x80 => (l as usize, 2),
                l => {
                    let k = (l & 0x7f) as usize;
                    (
                        b[2..2 + k].iter().fold(0, |a, x| a * 256 + *x as usize),
                        2 + k,
                    )
                }
            };
            (&b[at..at + len], &b[at + len..])
        }
        let (seq, _) = tlv(der);
        let (n, rest) = tlv(seq);
        let (e, _) = tlv(rest);
        let strip = |v: &[u8]| v.iter().skip_while(|b| **b == 0).copied().collect();
        (strip(n), strip(e))
    }

    #[test]
    fn es256_and_rs256_signatures_verify_and_tampering_does_not() {
        let claims = json!({"iss": "https://as", "sub": "u", "aud": "https://rs/mcp", "exp": 2_000_000_000u64});
        for (token, jwk) in [sign_es256(&claims, "e1"), sign_rs256(&claims)] {
            let keys = parse_jwks(&json!({"keys": [jwk]}));
            assert_eq!(keys.len(), 1);
            let jws = Jws::parse(&token).unwrap();
            jws.verify(&keys[0]).expect("verifies");
            // Another key of the same type does not verify it.
            // One character inside the signature changed (the last one may carry padding bits).
            let mut tampered = token.clone().into_bytes();
            let at = tampered.len() - 10;
            tampered[at] = if tampered[at] == b'A' { b'B' } else { b'A' };
            let tampered = String::from_utf8(tampered).unwrap();
            let bad = Jws::parse(&tampered).unwrap();
            assert!(matches!(bad.verify(&keys[0]), Err(Refusal::Invalid(_))));
        }
        assert_eq!(Jws::parse("opaque-token").unwrap_err(), Refusal::NotJwt);
    }

    #[test]
    fn claims_are_checked_with_leeway() {
        let aud = vec!["https://rs/mcp".to_owned()];
        let want = Expect {
            issuer: "https://as",
            audiences: &aud,
            now: 1000,
        };
        let ok = |c: Value| check_claims(c.as_object().unwrap(), &want);
        assert!(
            ok(json!({"iss": "https://as/", "aud": ["x", "https://rs/mcp/"], "exp": 1001})).is_ok()
        );
        assert!(
            ok(json!({"iss": "https://as", "aud": "https://rs/mcp", "exp": 990})).is_ok(),
            "leeway"
        );
        assert!(ok(json!({"iss": "https://as", "aud": "https://rs/mcp", "exp": 900})).is_err());
        assert!(ok(json!({"iss": "https://other", "aud": "https://rs/mcp", "exp": 2000})).is_err());
        assert!(ok(json!({"iss": "https://as", "aud": "https://rs/other", "exp": 2000})).is_err());
        assert!(
            ok(json!({"iss": "https://as", "aud": "https://rs/mcp", "exp": 2000, "nbf": 1200}))
                .is_err()
        );
        assert!(ok(json!({"iss": "https://as", "aud": "https://rs/mcp"})).is_err());
    }

    #[test]
    fn scopes_and_groups_from_their_claims() {
        let c = json!({"scope": "mcp read", "groups": ["a", "b"], "realm": {"roles": "x,y"}, "scp": ["z"]});
        let c = c.as_object().unwrap();
        assert_eq!(scopes(c), ["mcp", "read"]);
        assert_eq!(groups(c, "groups"), ["a", "b"]);
        assert_eq!(groups(c, "realm.roles"), ["x", "y"]);
        assert!(groups(c, "missing").is_empty());
        let s = json!({"scp": ["z"]});
        assert_eq!(scopes(s.as_object().unwrap()), ["z"]);
    }
}
