//! ES module imports named without their file extension (`import ... from '@modelcontextprotocol/sdk/server/mcp'`):
//! Node's ESM resolver wants the `.js`, so such a package fails to start with `Cannot find module '…/server/mcp'
//! imported from …` although `…/server/mcp.js` is there. Node dropped `--experimental-specifier-resolution=node`,
//! which resolved them; the same is done by a resolve hook registered through `NODE_OPTIONS=--import=data:…` (no file
//! to write or to grant in the sandbox; Node 20.6 or later). Activation (`start.rs`) and introspection both start such a
//! server once more with it.

use std::path::Path;

/// The resolve hook: a specifier Node could not find is tried again with `.js`, then `/index.js`.
const HOOK: &str = r#"export async function resolve(s, c, next) { try { return await next(s, c); } catch (e) { if (e && e.code === "ERR_MODULE_NOT_FOUND" && !/\.[cm]?js$/.test(s)) { for (const x of [".js", "/index.js"]) { try { return await next(s + x, c); } catch {} } } throw e; } }"#;

/// The module an output line says Node could not find although the same path with `.js` (or `/index.js`) exists:
/// `Cannot find module '/…/dist/esm/server/mcp' imported from /…/dist/index.js`.
pub fn extensionless_import<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<String> {
    lines.into_iter().find_map(|l| {
        // `Cannot find module '/x/mcp' imported from ...`, or the error's own `url: 'file:///x/mcp'` field (the
        // last lines of its output, where only a tail of it was kept).
        let module = if let Some(at) = l.find("Cannot find module '") {
            let rest = &l[at + "Cannot find module '".len()..];
            let (module, after) = rest.split_once('\'')?;
            if !after.trim_start().starts_with("imported from") {
                return None;
            }
            module
        } else {
            let rest = l.trim_start().strip_prefix("url: 'file://")?;
            rest.split_once('\'')?.0
        };
        if !module.starts_with('/') {
            return None;
        }
        let p = Path::new(module);
        let with_js = format!("{module}.js");
        (!p.is_file() && (Path::new(&with_js).is_file() || p.join("index.js").is_file()))
            .then(|| module.to_owned())
    })
}

/// `NODE_OPTIONS` with the resolve hook imported first (`existing` kept after it).
pub fn node_options(existing: Option<&str>) -> String {
    let register = format!(
        "import {{ register }} from \"node:module\"; register(\"data:text/javascript,{}\");",
        percent(HOOK)
    );
    let import = format!("--import=data:text/javascript,{}", percent(&register));
    match existing.map(str::trim).filter(|e| !e.is_empty()) {
        Some(e) => format!("{import} {e}"),
        None => import,
    }
}

/// Percent-encoding of everything but letters, digits and `-_.~` (a data URL's body, decoded by Node; no spaces,
/// so `NODE_OPTIONS` keeps it one word).
fn percent(s: &str) -> String {
    let mut out = String::with_capacity(s.len() * 2);
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_import_without_its_extension() {
        let dir = tempfile::tempdir().unwrap();
        let esm = dir.path().join("sdk/dist/esm/server");
        std::fs::create_dir_all(esm.join("folder")).unwrap();
        std::fs::write(esm.join("mcp.js"), "").unwrap();
        std::fs::write(esm.join("folder/index.js"), "").unwrap();
        let base = esm.display().to_string();
        let line = |m: &str| {
            format!(
                "Fatal error in main(): Cannot find module '{base}/{m}' imported from /x/dist/index.js"
            )
        };
        let found = extensionless_import([line("mcp").as_str()]);
        assert_eq!(found, Some(format!("{base}/mcp")));
        assert_eq!(
            extensionless_import(["other", line("folder").as_str()]),
            Some(format!("{base}/folder"))
        );
        assert_eq!(
            extensionless_import([format!("  url: 'file://{base}/mcp'").as_str()]),
            Some(format!("{base}/mcp")),
            "the error's url field"
        );
        // Nothing with that name at all: a missing dependency, not a missing extension.
        assert_eq!(extensionless_import([line("gone").as_str()]), None);
        // CommonJS's message (`Require stack:`) is another failure.
        let cjs = format!("Error: Cannot find module '{base}/mcp'");
        assert_eq!(extensionless_import([cjs.as_str()]), None);
    }

    #[test]
    fn the_hook_rides_in_node_options_as_one_word() {
        let o = node_options(None);
        assert!(o.starts_with("--import=data:text/javascript,"));
        assert!(!o.contains(' ') && !o.contains('"'), "{o}");
        assert!(o.contains("register"));
        assert!(
            node_options(Some("--max-old-space-size=512")).ends_with(" --max-old-space-size=512")
        );
        assert_eq!(percent("a b\"%"), "a%20b%22%25");
    }
}
