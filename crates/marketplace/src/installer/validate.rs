//! Validation before anything is planned: package identifiers and versions (never an option, never a path trick),
//! environment and header names, values (no NUL or line break), choices, and secret-store keys for header names.

use crate::entry::Input;
use crate::error::InstallError;

pub(super) fn validate_identifier(registry_type: &str, id: &str) -> Result<(), InstallError> {
    let bad = |reason: &str| InstallError::InvalidIdentifier {
        registry_type: registry_type.to_owned(),
        identifier: id.to_owned(),
        reason: reason.to_owned(),
    };
    if id.is_empty() || id.len() > 255 {
        return Err(bad("must be 1-255 characters"));
    }
    let oci = registry_type == "oci";
    let allowed = |c: char| {
        c.is_ascii_alphanumeric() || matches!(c, '@' | '.' | '_' | '/' | '-') || (oci && c == ':')
    };
    if let Some(c) = id.chars().find(|c| !allowed(*c)) {
        return Err(bad(&format!(
            "character {c:?} is not allowed (only letters, digits and @ . _ / -{})",
            if oci { " :" } else { "" }
        )));
    }
    if id.starts_with('-') {
        return Err(bad(
            "must not start with '-' (it would be read as an option)",
        ));
    }
    if id.contains("..") {
        return Err(bad("must not contain '..'"));
    }
    if id.starts_with('/') || id.ends_with('/') || id.contains("//") {
        return Err(bad("has an empty path segment"));
    }
    match registry_type {
        "npm" => {
            let body = id.strip_prefix('@').unwrap_or(id);
            let slashes = body.matches('/').count();
            let scoped = id.starts_with('@');
            if body.contains('@') || (scoped && slashes != 1) || (!scoped && slashes != 0) {
                return Err(bad("is not an npm package name (`name` or `@scope/name`)"));
            }
            if body
                .split('/')
                .any(|seg| seg.starts_with('.') || seg.starts_with('_'))
            {
                return Err(bad("npm names do not start with '.' or '_'"));
            }
        }
        "pypi"
            if id.contains(['@', '/'])
                || !id.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()) =>
        {
            return Err(bad("is not a PyPI project name"));
        }
        "oci" if id.starts_with(['@', ':']) => {
            return Err(bad("is not an image reference"));
        }
        _ => {}
    }
    Ok(())
}

pub(super) fn validate_version(id: &str, v: &str) -> Result<(), InstallError> {
    let bad = |reason: &str| InstallError::InvalidVersion {
        identifier: id.to_owned(),
        version: v.to_owned(),
        reason: reason.to_owned(),
    };
    if v.is_empty() || v.len() > 128 {
        return Err(bad("must be 1-128 characters"));
    }
    if !v.chars().next().is_some_and(|c| c.is_ascii_alphanumeric()) {
        return Err(bad("must start with a letter or digit"));
    }
    if let Some(c) = v
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '+' | '-')))
    {
        return Err(bad(&format!("character {c:?} is not allowed")));
    }
    Ok(())
}

pub(super) fn check_env_name(name: &str) -> Result<(), InstallError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !ok {
        return Err(InstallError::InvalidValue {
            what: "environment variable name",
            name: name.to_owned(),
            reason: "must be letters, digits and '_', not starting with a digit".into(),
        });
    }
    if name.starts_with("LD_") || name.starts_with("DYLD_") {
        return Err(InstallError::InvalidValue {
            what: "environment variable name",
            name: name.to_owned(),
            reason: "dynamic-loader variables are never set from a marketplace entry".into(),
        });
    }
    Ok(())
}

pub(super) fn check_header_name(name: &str) -> Result<(), InstallError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "!#$%&'*+.^_`|~-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(InstallError::InvalidValue {
            what: "header name",
            name: name.to_owned(),
            reason: "must be an HTTP token (letters, digits, - and a few symbols)".into(),
        })
    }
}

pub(super) fn check_value(
    what: &'static str,
    name: &str,
    v: &str,
    header: bool,
) -> Result<(), InstallError> {
    if v.contains('\0') || (header && v.contains(['\r', '\n'])) {
        return Err(InstallError::InvalidValue {
            what,
            name: name.to_owned(),
            reason: if header {
                "contains a NUL or line break".into()
            } else {
                "contains a NUL byte".into()
            },
        });
    }
    Ok(())
}

pub(super) fn check_choice(name: &str, input: &Input, v: &str) -> Result<(), InstallError> {
    if !input.choices.is_empty() && !input.choices.iter().any(|c| c == v) {
        return Err(InstallError::InvalidValue {
            what: "input",
            name: name.to_owned(),
            reason: format!("must be one of {}", input.choices.join(", ")),
        });
    }
    Ok(())
}

/// A header name as a secret-store key (letters, digits, `_ . -`, starting with a letter or `_`).
pub(super) fn secret_key_for(name: &str) -> String {
    let mut k: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if !k
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
    {
        k.insert(0, '_');
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers() {
        for ok in ["@scope/pkg", "pkg", "a.b-c_d"] {
            assert!(validate_identifier("npm", ok).is_ok(), "{ok}");
        }
        for bad in [
            "x; rm -rf /",
            "../../etc",
            "-rf",
            "a b",
            "a\nb",
            "@a/b/c",
            "a/b",
            "@a",
            ".hidden",
            "x@1",
        ] {
            assert!(validate_identifier("npm", bad).is_err(), "{bad}");
        }
        assert!(validate_identifier("pypi", "mcp-server-time").is_ok());
        assert!(validate_identifier("pypi", "a/b").is_err());
        assert!(validate_identifier("oci", "ghcr.io/o/i:1@sha256:ab").is_ok());
        assert!(validate_version("x", "1.0.0-rc.1+b").is_ok());
        assert!(validate_version("x", "1.0; rm").is_err());
        assert!(validate_version("x", "-1").is_err());
    }
}
