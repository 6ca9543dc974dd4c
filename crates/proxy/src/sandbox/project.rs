//! The code an interpreter runs and what its runtime resolves at run time: the script or module an argument names
//! (`node`, `bun`, `deno run`, `tsx`, `ts-node`, `python`, `python -m`, `uv run`, `uv --directory DIR run`,
//! `java -jar`, `ruby`, `php`, `dotnet x.dll`, `go run`), its project root (the nearest ancestor holding a
//! project's marker, never HOME or above), Node's `node_modules` walk and `NODE_PATH`, a Python install's `.pth`
//! paths and `PYTHONPATH`. All of it is code: read-only.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::places;

/// Files or folders that mark a project's root.
const MARKERS: &[&str] = &[
    "package.json",
    "node_modules",
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    ".venv",
    "uv.lock",
    "go.mod",
    "Cargo.toml",
    "Gemfile",
    "composer.json",
    "pom.xml",
    "build.gradle",
    "build.gradle.kts",
    "deno.json",
    "deno.jsonc",
];

/// Extensions of files that are code (a script an interpreter runs, a library it loads).
const CODE_EXTENSIONS: &[&str] = &[
    "js", "mjs", "cjs", "ts", "mts", "cts", "jsx", "tsx", "py", "pyc", "pyz", "pyw", "rb", "php",
    "jar", "dll", "wasm", "sh", "bash", "pl", "lua", "exe",
];

/// Which runtime a program is, by its name (`python3.12` is `python`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Runtime {
    Node,
    Deno,
    Python,
    Uv,
    Java,
    Ruby,
    Php,
    Dotnet,
    Go,
    Other,
}

impl Runtime {
    pub(super) fn of(program: &Path) -> Runtime {
        let name = program
            .file_name()
            .map(|n| n.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        match stem {
            "node" | "nodejs" | "bun" | "tsx" | "ts-node" | "ts-node-esm" => Runtime::Node,
            "deno" => Runtime::Deno,
            "python" | "pypy" => Runtime::Python,
            "uv" | "uvx" => Runtime::Uv,
            "java" => Runtime::Java,
            "ruby" => Runtime::Ruby,
            "php" => Runtime::Php,
            "dotnet" => Runtime::Dotnet,
            "go" => Runtime::Go,
            _ => Runtime::Other,
        }
    }
}

/// What the arguments name as code: where to read, and which arguments were taken as code (they are not data).
#[derive(Debug, Default)]
pub(super) struct Code {
    pub read: Vec<PathBuf>,
    /// Indexes into the arguments of those named as code.
    pub consumed: Vec<usize>,
    /// Project roots found (for `uv run`: its `.venv` and lock are written).
    pub projects: Vec<PathBuf>,
}

/// Options of each runtime that take the next argument as their value (so it is not the script).
fn takes_value(runtime: Runtime, opt: &str) -> bool {
    match runtime {
        Runtime::Node => matches!(
            opt,
            "-r" | "--require"
                | "--import"
                | "--loader"
                | "--experimental-loader"
                | "-C"
                | "--conditions"
                | "--env-file"
                | "--title"
                | "--input-type"
                | "--inspect-port"
                | "--tsconfig"
                | "--project"
        ),
        Runtime::Python => matches!(opt, "-X" | "-W" | "--check-hash-based-pycs"),
        Runtime::Uv => matches!(
            opt,
            "--directory"
                | "--project"
                | "--with"
                | "--with-requirements"
                | "--python"
                | "-p"
                | "--index"
                | "--index-url"
                | "--extra-index-url"
                | "--find-links"
                | "-f"
                | "--env-file"
                | "--package"
                | "--extra"
                | "--group"
                | "--cache-dir"
                | "--config-file"
                | "--from"
        ),
        Runtime::Java => matches!(
            opt,
            "-cp" | "-classpath" | "--class-path" | "-p" | "--module-path"
        ),
        Runtime::Deno => matches!(opt, "--config" | "-c" | "--import-map" | "--lock"),
        Runtime::Dotnet => matches!(opt, "--project" | "-p" | "--runtimeconfig" | "--depsfile"),
        _ => false,
    }
}

/// The code `args` make `runtime` run, with its project and what the runtime resolves from there.
pub(super) fn code(
    runtime: Runtime,
    args: &[String],
    env: &BTreeMap<String, String>,
    config: &ad_registry::config::SandboxConfig,
) -> Code {
    let mut code = Code::default();
    let home = places::home(config);
    let add_code = |code: &mut Code, i: usize, value: &str| {
        let Some(p) = places::absolute(value, config).map(|p| places::resolved(&p)) else {
            return;
        };
        if !p.exists() {
            return;
        }
        code.consumed.push(i);
        let root = project_root(&p, home.as_deref());
        code.read.push(root.clone());
        code.projects.push(root);
        code.read.push(p);
    };
    let mut i = 0;
    let mut subcommand_seen = false;
    while i < args.len() {
        let a = args[i].as_str();
        let (opt, inline) = a.split_once('=').map_or((a, None), |(o, v)| (o, Some(v)));
        if a.starts_with('-') && a.len() > 1 {
            // Options whose value is code or a project.
            let value_index = if inline.is_some() { i } else { i + 1 };
            let value = inline.or_else(|| args.get(i + 1).map(String::as_str));
            let is_code_opt = match runtime {
                Runtime::Node => matches!(
                    opt,
                    "-r" | "--require" | "--import" | "--loader" | "--experimental-loader"
                ),
                Runtime::Uv => matches!(opt, "--directory" | "--project"),
                Runtime::Java => matches!(opt, "-jar"),
                Runtime::Dotnet => matches!(opt, "--project" | "-p"),
                _ => false,
            };
            if runtime == Runtime::Java && opt == "-jar" {
                if let Some(v) = args.get(i + 1) {
                    add_code(&mut code, i + 1, v);
                }
                break;
            }
            if runtime == Runtime::Java
                && matches!(opt, "-cp" | "-classpath" | "--class-path")
                && let Some(v) = value
            {
                for entry in v.split(':') {
                    add_code(&mut code, value_index, entry.trim_end_matches("/*"));
                }
            }
            if runtime == Runtime::Python && opt == "-m" {
                break;
            }
            if runtime == Runtime::Python && opt == "-c" {
                break;
            }
            if is_code_opt && let Some(v) = value {
                add_code(&mut code, value_index, v);
            }
            // Where packages come from (`uv --find-links DIR`): read as it is, not a project.
            let is_source_opt = runtime == Runtime::Uv
                && matches!(
                    opt,
                    "--find-links" | "-f" | "--with-requirements" | "--python" | "-p"
                );
            if is_source_opt
                && let Some(v) = value
                && let Some(p) = places::absolute(v, config).map(|p| places::resolved(&p))
                && p.is_dir()
            {
                code.consumed.push(value_index);
                code.read.push(p);
            }
            i += if inline.is_none() && takes_value(runtime, opt) {
                2
            } else {
                1
            };
            continue;
        }
        // The first plain argument: a subcommand (`deno run`, `uv run`, `bun run`, `go run`, `dotnet exec`) or
        // the script itself.
        let is_subcommand = !subcommand_seen
            && match runtime {
                Runtime::Deno => matches!(a, "run" | "serve" | "task"),
                Runtime::Uv => matches!(a, "run" | "tool"),
                Runtime::Node => matches!(a, "run" | "x"),
                Runtime::Go => matches!(a, "run"),
                Runtime::Dotnet => matches!(a, "exec" | "run"),
                _ => false,
            };
        if is_subcommand {
            subcommand_seen = true;
            i += 1;
            continue;
        }
        if runtime == Runtime::Uv && subcommand_seen && !a.ends_with(".py") {
            // `uv run some-command ...`: the command runs from the project's venv; what it names is data.
            break;
        }
        if runtime != Runtime::Other || looks_like_code(a, config) {
            add_code(&mut code, i, a);
        }
        break;
    }
    // The runtime's own search paths.
    match runtime {
        Runtime::Node => {
            let starts: Vec<PathBuf> = code.read.clone();
            for start in &starts {
                code.read.extend(node_modules_walk(start));
            }
            for entry in env.get("NODE_PATH").into_iter().flat_map(|v| v.split(':')) {
                if let Some(p) = places::absolute(entry, config) {
                    code.read.push(places::resolved(&p));
                }
            }
        }
        Runtime::Python | Runtime::Uv => {
            for entry in env.get("PYTHONPATH").into_iter().flat_map(|v| v.split(':')) {
                if let Some(p) = places::absolute(entry, config) {
                    code.read.push(places::resolved(&p));
                }
            }
        }
        Runtime::Go => {
            if let Some(h) = &home {
                code.read.push(h.join("go/pkg/mod"));
            }
        }
        _ => {}
    }
    code.read.sort();
    code.read.dedup();
    code
}

/// Whether an argument of an unknown program names a code file (a script by its extension or `#!`).
fn looks_like_code(value: &str, config: &ad_registry::config::SandboxConfig) -> bool {
    places::absolute(value, config)
        .map(|p| places::resolved(&p))
        .is_some_and(|p| p.is_file() && is_code_file(&p))
}

/// Whether a file is code: its extension, or a `#!` line.
pub(super) fn is_code_file(p: &Path) -> bool {
    p.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| CODE_EXTENSIONS.contains(&e.to_ascii_lowercase().as_str()))
        || super::chain::shebang(p).is_some()
}

/// The project holding `path`: the nearest ancestor (or `path` itself, for a directory) with a project marker, never
/// HOME or above; without one, the directory of the file (or the directory itself).
pub(super) fn project_root(path: &Path, home: Option<&Path>) -> PathBuf {
    let start = if path.is_dir() {
        path
    } else {
        path.parent().unwrap_or(path)
    };
    // Inside `node_modules`: the package that holds the file (Node's walk adds the outer `node_modules`).
    for dir in start.ancestors() {
        if home.is_some_and(|h| h.starts_with(dir)) || dir == Path::new("/") {
            break;
        }
        if MARKERS.iter().any(|m| dir.join(m).exists()) {
            return dir.to_path_buf();
        }
    }
    start.to_path_buf()
}

/// Every `node_modules` Node looks in for code under `start` (each ancestor's, HOME's own too, never HOME), and where the
/// packages linked into them point (workspaces, `npm link`, pnpm), bounded.
fn node_modules_walk(start: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in start.ancestors() {
        if dir.file_name().is_some_and(|n| n == "node_modules") {
            continue;
        }
        let nm = dir.join("node_modules");
        if nm.is_dir() {
            out.extend(linked_packages(&nm));
            out.push(nm);
        }
    }
    out
}

/// Where symlinked packages of a `node_modules` point, outside it (at most 2,000 entries looked at).
fn linked_packages(nm: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut seen = 0;
    let visit = |dir: &Path, out: &mut Vec<PathBuf>, seen: &mut usize| {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Vec::new();
        };
        let mut scopes = Vec::new();
        for e in entries.flatten() {
            *seen += 1;
            if *seen > 2000 {
                break;
            }
            let Ok(ft) = e.file_type() else { continue };
            let name = e.file_name();
            if ft.is_symlink() {
                if let Ok(real) = e.path().canonicalize()
                    && !real.starts_with(nm)
                {
                    out.push(real);
                }
            } else if ft.is_dir() && name.to_string_lossy().starts_with('@') {
                scopes.push(e.path());
            }
        }
        scopes
    };
    for scope in visit(nm, &mut out, &mut seen) {
        visit(&scope, &mut out, &mut seen);
    }
    out
}

/// The folders a Python install's `.pth` files add to `sys.path` (an editable install's source), for each
/// `site-packages` under `prefix`.
pub(super) fn python_paths(prefix: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for lib in ["lib", "lib64"] {
        let Ok(versions) = std::fs::read_dir(prefix.join(lib)) else {
            continue;
        };
        for v in versions.flatten() {
            if !v.file_name().to_string_lossy().starts_with("python") {
                continue;
            }
            let site = v.path().join("site-packages");
            let Ok(entries) = std::fs::read_dir(&site) else {
                continue;
            };
            for e in entries.flatten().take(2000) {
                let name = e.file_name().to_string_lossy().into_owned();
                let text = if name.ends_with(".pth")
                    || (name.starts_with("__editable__") && name.ends_with("_finder.py"))
                {
                    std::fs::read_to_string(e.path()).unwrap_or_default()
                } else {
                    continue;
                };
                if name.ends_with(".pth") {
                    for line in text.lines() {
                        let line = line.trim();
                        if line.is_empty() || line.starts_with('#') || line.starts_with("import") {
                            continue;
                        }
                        let p = if line.starts_with('/') {
                            PathBuf::from(line)
                        } else {
                            site.join(line)
                        };
                        if p.is_dir() && !p.starts_with(prefix) {
                            out.push(places::resolved(&p));
                        }
                    }
                } else {
                    // `MAPPING = {'pkg': '/src/pkg'}`: the quoted absolute paths.
                    for quoted in text.split(['\'', '"']).skip(1).step_by(2) {
                        let p = Path::new(quoted);
                        if quoted.starts_with('/') && p.exists() && !p.starts_with(prefix) {
                            out.push(places::resolved(p));
                        }
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::sandbox::tests::config;

    fn touch(p: &Path) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, "").unwrap();
    }

    #[test]
    fn a_built_node_script_reads_its_project_and_every_node_modules_above() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let cfg = config(&root);
        let proj = root.join("home/src/weather");
        touch(&proj.join("package.json"));
        touch(&proj.join("build/index.js"));
        touch(&proj.join("node_modules/@modelcontextprotocol/sdk/package.json"));
        touch(&root.join("home/node_modules/x/package.json"));
        let args = vec![
            "--enable-source-maps".to_string(),
            proj.join("build/index.js").display().to_string(),
            "--flag".into(),
        ];
        let c = code(Runtime::Node, &args, &BTreeMap::new(), &cfg);
        assert_eq!(c.consumed, vec![1]);
        assert!(c.read.contains(&proj), "{c:?}");
        assert!(c.read.contains(&proj.join("node_modules")), "{c:?}");
        assert!(
            c.read.contains(&root.join("home/node_modules")),
            "HOME's own node_modules (not HOME): {c:?}"
        );
        assert!(!c.read.contains(&root.join("home")));
    }

    #[test]
    fn python_uv_java_and_project_roots_stop_below_home() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let cfg = config(&root);
        let proj = root.join("home/weather");
        touch(&proj.join("pyproject.toml"));
        touch(&proj.join("weather.py"));
        let args: Vec<String> = [
            "--directory",
            &proj.display().to_string(),
            "run",
            "weather.py",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let c = code(Runtime::Uv, &args, &BTreeMap::new(), &cfg);
        assert_eq!(c.projects, vec![proj.clone()]);
        assert_eq!(c.consumed, vec![1]);
        touch(&root.join("home/loose/server.py"));
        let args = vec![
            "-u".to_string(),
            root.join("home/loose/server.py").display().to_string(),
        ];
        let c = code(Runtime::Python, &args, &BTreeMap::new(), &cfg);
        assert_eq!(
            c.projects,
            vec![root.join("home/loose")],
            "no marker: its folder, never HOME"
        );
        touch(&root.join("opt/app/server.jar"));
        touch(&root.join("opt/app/pom.xml"));
        let args = vec![
            "-Xmx1g".into(),
            "-jar".into(),
            root.join("opt/app/server.jar").display().to_string(),
        ];
        let c = code(Runtime::Java, &args, &BTreeMap::new(), &cfg);
        assert_eq!(c.projects, vec![root.join("opt/app")]);
        assert_eq!(
            Runtime::of(Path::new("/usr/bin/python3.12")),
            Runtime::Python
        );
        assert_eq!(Runtime::of(Path::new("/x/node22")), Runtime::Node);
    }

    #[test]
    fn pth_files_and_editable_finders_name_source_folders() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let site = root.join("venv/lib/python3.11/site-packages");
        std::fs::create_dir_all(root.join("src/a")).unwrap();
        std::fs::create_dir_all(root.join("src/b/pkg")).unwrap();
        std::fs::create_dir_all(&site).unwrap();
        std::fs::write(
            site.join("a.pth"),
            format!("# c\nimport x\n{}\n", root.join("src/a").display()),
        )
        .unwrap();
        std::fs::write(
            site.join("__editable___b_finder.py"),
            format!(
                "MAPPING = {{'pkg': '{}'}}\n",
                root.join("src/b/pkg").display()
            ),
        )
        .unwrap();
        let got = python_paths(&root.join("venv"));
        assert!(got.contains(&root.join("src/a")), "{got:?}");
        assert!(got.contains(&root.join("src/b/pkg")), "{got:?}");
    }
}
