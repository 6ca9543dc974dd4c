//! Real launch shapes, set up in a fresh HOME the way each one's own README says, started through agent-discover with
//! the defaults (the sandbox on): a Node project's built script (the official TypeScript quickstart), the same with ES
//! module imports that name no extension, and a package's script run by `node`; a venv whose base interpreter lives in
//! HOME outside every toolchain folder, `python -m`, a script run by a venv's python, `uv --directory DIR run
//! server.py` (the official Python quickstart); `npx -y`; pipx (its default places and its own) and `npm -g` installs
//! (user and system-like prefixes); binaries
//! in `~/.cargo/bin` and `~/go/bin`; `java -jar`; a path written with `..`; all of them from a Claude Desktop config
//! imported and activated. Then the git server committing with the user's identity, and a server that needs a
//! credential, refused with the command that grants it (`sandbox check` too).

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

use crate::harness::{self, Agent, cache_path as cache};

/// Runs a set-up command with `home` as HOME; panics with its output when it fails.
fn sh(home: &Path, program: &str, args: &[&str], cwd: &Path) {
    sh_env(home, program, args, cwd, &[]);
}

/// [`sh`] with more variables.
fn sh_env(home: &Path, program: &str, args: &[&str], cwd: &Path, env: &[(&str, &Path)]) {
    let out = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (*k, *v)))
        .current_dir(cwd)
        .env("HOME", home)
        .env("npm_config_cache", cache("npm"))
        .env("PIP_NO_INDEX", "1")
        .env("PIP_FIND_LINKS", cache("wheels"))
        .env("PIP_DISABLE_PIP_VERSION_CHECK", "1")
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn write(p: &Path, text: &str) {
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// agent-discover with HOME at `home`, the sandbox at its default (on), uv offline from the test's wheels.
async fn agent(dir: &Path, home: &Path) -> Agent {
    harness::spawn_env(
        dir,
        &[],
        None,
        &[
            ("HOME", s(home)),
            ("UV_OFFLINE", "1".into()),
            ("UV_NO_INDEX", "1".into()),
            ("UV_FIND_LINKS", s(&cache("wheels"))),
            ("UV_PYTHON", s(&cache("venv/bin/python"))),
            // `npx -y` installs from the test's npm cache, offline (npm's settings reach the child).
            ("npm_config_cache", s(&cache("npm"))),
            ("npm_config_offline", "true".into()),
        ],
    )
    .await
}

/// The version of a package in the test's node cache (pinned by tests/interop/package.json).
fn node_version(package: &str) -> String {
    let manifest = cache(&format!("node/node_modules/{package}/package.json"));
    let v: Value = serde_json::from_str(&std::fs::read_to_string(manifest).unwrap()).unwrap();
    v["version"].as_str().unwrap().to_owned()
}

/// The official TypeScript quickstart's layout: `weather/package.json` with the lockfile the project ships,
/// `weather/build/index.js`, dependencies in `weather/node_modules` (installed with npm, offline from the test cache;
/// scripts/test.sh resolved the lockfile).
fn node_project(home: &Path) -> PathBuf {
    let proj = home.join("src/weather");
    std::fs::create_dir_all(&proj).unwrap();
    for file in ["package.json", "package-lock.json"] {
        let from = cache(&format!("launch/quickstart/{file}"));
        std::fs::copy(&from, proj.join(file))
            .unwrap_or_else(|e| panic!("{}: {e} (scripts/test.sh writes it)", from.display()));
    }
    write(
        &proj.join("build/index.js"),
        r#"import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { StdioServerTransport } from "@modelcontextprotocol/sdk/server/stdio.js";
import { z } from "zod";
const server = new McpServer({ name: "weather", version: "1.0.0" });
server.tool("get-alerts", "Get weather alerts for a state", { state: z.string() },
  async ({ state }) => ({ content: [{ type: "text", text: `No active alerts for ${state}` }] }));
await server.connect(new StdioServerTransport());
console.error("Weather MCP Server running on stdio");
"#,
    );
    sh(
        home,
        "npm",
        &[
            "install",
            "--offline",
            "--no-audit",
            "--no-fund",
            "--loglevel=error",
        ],
        &proj,
    );
    proj
}

/// A Python install in HOME outside every folder granted by name (as `~/miniconda3` or a pyenv shared from another
/// user): the test's interpreter linked (or copied) into `HOME/tools/py/bin`, its library beside it; then a venv made
/// from it with mcp-server-time installed from the test's wheels.
fn python_base_and_venv(home: &Path) -> (PathBuf, PathBuf) {
    let python = cache("venv/bin/python");
    let out = Command::new(&python)
        .args([
            "-c",
            "import sys, sysconfig; print(sys.base_prefix); print(sysconfig.get_config_var('LDVERSION') or ''); print(f'{sys.version_info[0]}.{sys.version_info[1]}')",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = text.lines();
    let (base_prefix, version) = (
        PathBuf::from(lines.next().unwrap()),
        lines.nth(1).unwrap().to_owned(),
    );
    let base = home.join("tools/py");
    let exe = base.join(format!("bin/python{version}"));
    std::fs::create_dir_all(base.join("bin")).unwrap();
    let real = base_prefix
        .join(format!("bin/python{version}"))
        .canonicalize()
        .unwrap();
    if std::fs::hard_link(&real, &exe).is_err() {
        std::fs::copy(&real, &exe).unwrap();
    }
    std::os::unix::fs::symlink(base_prefix.join("lib"), base.join("lib")).unwrap();
    std::os::unix::fs::symlink(&exe, base.join("bin/python3")).unwrap();
    let venv = home.join(".venvs/time");
    sh(home, &s(&exe), &["-m", "venv", &s(&venv)], home);
    sh(
        home,
        &s(&venv.join("bin/pip")),
        &["install", "--quiet", "mcp-server-time"],
        home,
    );
    (base, venv)
}

fn grant<'a>(view: &'a Value, path: &Path) -> Option<&'a Value> {
    view["grants"]
        .as_array()
        .and_then(|g| g.iter().find(|g| g["path"] == s(path)))
}

async fn activate_and_call(a: &Agent, name: &str, tool: &str, args: Value) -> String {
    let (is_error, v) = a
        .try_registry(json!({"action": "activate", "name": name}))
        .await
        .unwrap();
    assert!(!is_error, "activating {name} confined: {v}");
    let r = a.call(&format!("{name}__{tool}"), args).await;
    let text = harness::text(&r);
    assert_ne!(r.is_error, Some(true), "{name}__{tool}: {text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claude_desktop_config_of_real_launch_shapes_starts_confined_with_defaults() {
    let dir = tempfile::tempdir().unwrap();
    let home_dir = tempfile::tempdir().unwrap();
    let home = home_dir.path().canonicalize().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let outside = outside.path().canonicalize().unwrap();

    let weather = node_project(&home);
    let everything =
        cache("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    // The same server written with imports that name no extension (as many published servers do): Node's ESM resolver
    // refuses them; the start is made again with a resolver that adds `.js`.
    let index = std::fs::read_to_string(weather.join("build/index.js")).unwrap();
    write(
        &weather.join("build/noext.js"),
        &index
            .replace("server/mcp.js", "server/mcp")
            .replace("server/stdio.js", "server/stdio"),
    );
    let (base, venv) = python_base_and_venv(&home);
    let script = home.join("src/clock/server.py");
    write(
        &script,
        "from mcp.server.mcpserver import MCPServer\nmcp = MCPServer('clock')\n\n@mcp.tool()\ndef now() -> str:\n    \"\"\"The time.\"\"\"\n    return 'twelve'\n\nif __name__ == '__main__':\n    mcp.run()\n",
    );
    // The official Python quickstart: a uv project run with `uv --directory DIR run server.py`.
    let uv_proj = home.join("src/weather-py");
    write(
        &uv_proj.join("pyproject.toml"),
        "[project]\nname = \"weather-py\"\nversion = \"0.1.0\"\nrequires-python = \"==3.11.*\"\ndependencies = [\"mcp\"]\n\n[tool.uv]\n# Resolved for this machine only: the test's wheels are this platform's.\nenvironments = [\"sys_platform == 'linux' and platform_machine == 'x86_64'\"]\n",
    );
    std::fs::copy(&script, uv_proj.join("server.py")).unwrap();
    let uv = cache("uv/bin/uv");
    let mut sync = Command::new(&uv);
    sync.args(["sync", "--offline", "--no-index", "--find-links"])
        .arg(cache("wheels"))
        .arg("--python")
        .arg(cache("venv/bin/python"))
        .current_dir(&uv_proj)
        .env("HOME", &home);
    let out = sync.output().unwrap();
    assert!(
        out.status.success(),
        "uv sync: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // pipx (its default places under HOME) and npm -g (a user prefix in HOME, and a prefix outside it as /usr/local
    // would be).
    let pipx = cache("venv/bin/pipx");
    sh(&home, &s(&pipx), &["install", "mcp-server-time"], &home);
    let (pipx_home, pipx_bin) = (home.join("apps/pipx"), home.join("apps/bin"));
    sh_env(
        &home,
        &s(&pipx),
        &["install", "mcp-server-time"],
        &home,
        &[("PIPX_HOME", &pipx_home), ("PIPX_BIN_DIR", &pipx_bin)],
    );
    let pkg = format!(
        "@modelcontextprotocol/server-everything@{}",
        node_version("@modelcontextprotocol/server-everything")
    );
    for prefix in [home.join(".npm-global"), outside.join("usr-local")] {
        sh(
            &home,
            "npm",
            &[
                "install",
                "-g",
                "--offline",
                "--no-audit",
                "--no-fund",
                "--loglevel=error",
                "--prefix",
                &s(&prefix),
                &pkg,
            ],
            &home,
        );
    }
    // `java -jar`: a jar built from tests/data/launch/Server.java in a Maven-shaped project.
    let java = home.join("src/javasrv");
    std::fs::create_dir_all(java.join("build/classes")).unwrap();
    write(&java.join("pom.xml"), "<project/>");
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/launch/Server.java");
    sh(
        &home,
        "javac",
        &["-d", &s(&java.join("build/classes")), &s(&source)],
        &java,
    );
    write(&java.join("build/manifest.txt"), "Main-Class: Server\n");
    sh(
        &home,
        "jar",
        &[
            "cfm",
            "build/server.jar",
            "build/manifest.txt",
            "-C",
            "build/classes",
            ".",
        ],
        &java,
    );
    // Binaries in ~/.cargo/bin and ~/go/bin.
    for d in [".cargo/bin", "go/bin"] {
        std::fs::create_dir_all(home.join(d)).unwrap();
        std::fs::copy(harness::fixture(), home.join(d).join("ad-fixture")).unwrap();
    }
    let time_args = json!([]);
    let servers = json!({
        "weather": {"command": "node", "args": [weather.join("build/index.js")]},
        "everything": {"command": "node", "args": [everything]},
        "noext": {"command": "node", "args": [weather.join("build/noext.js")]},
        "venvtime": {"command": venv.join("bin/mcp-server-time"), "args": time_args},
        "modtime": {"command": venv.join("bin/python"), "args": ["-m", "mcp_server_time"]},
        "clock": {"command": venv.join("bin/python"), "args": [script]},
        "uvweather": {"command": uv, "args": ["--directory", uv_proj, "run", "server.py"]},
        "pipxtime": {"command": home.join(".local/bin/mcp-server-time"), "args": []},
        "pipxown": {"command": pipx_bin.join("mcp-server-time"), "args": []},
        "npxever": {"command": "npx", "args": ["-y", pkg]},
        "npmuser": {"command": home.join(".npm-global/bin/mcp-server-everything"), "args": []},
        "npmsys": {"command": outside.join("usr-local/bin/mcp-server-everything"), "args": []},
        "cargobin": {"command": home.join(".cargo/bin/ad-fixture"), "args": ["--name", "cargobin"]},
        "gobin": {"command": home.join("go/bin/ad-fixture"), "args": ["--name", "gobin"]},
        "javahello": {"command": "java", "args": ["-jar", java.join("build/server.jar")]},
        "dotdot": {"command": s(&venv.join("bin/../bin/python")), "args": [s(&home.join("src/clock/../clock/server.py"))]},
    });
    let config = home.join(".config/Claude/claude_desktop_config.json");
    write(&config, &json!({"mcpServers": servers}).to_string());
    let mut import = harness::command(dir.path(), &["import", &s(&config), "--json"]);
    import.env("HOME", &home);
    let out = import.output().await.unwrap();
    assert!(
        out.status.success(),
        "import: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let a = agent(dir.path(), &home).await;
    let time = json!({"timezone": "UTC"});
    for (name, tool, args, expect) in [
        (
            "weather",
            "get-alerts",
            json!({"state": "CA"}),
            "No active alerts for CA",
        ),
        ("everything", "echo", json!({"message": "hi"}), "hi"),
        (
            "noext",
            "get-alerts",
            json!({"state": "OR"}),
            "No active alerts for OR",
        ),
        ("venvtime", "get_current_time", time.clone(), "UTC"),
        ("modtime", "get_current_time", time.clone(), "UTC"),
        ("clock", "now", json!({}), "twelve"),
        ("uvweather", "now", json!({}), "twelve"),
        ("pipxtime", "get_current_time", time.clone(), "UTC"),
        ("pipxown", "get_current_time", time.clone(), "UTC"),
        ("npxever", "echo", json!({"message": "npx"}), "npx"),
        (
            "npmuser",
            "echo",
            json!({"message": "user prefix"}),
            "user prefix",
        ),
        (
            "npmsys",
            "echo",
            json!({"message": "system prefix"}),
            "system prefix",
        ),
        ("cargobin", "echo", json!({"text": "cargo"}), "cargo"),
        ("gobin", "echo", json!({"text": "go"}), "go"),
        ("javahello", "hello", json!({}), "hello from java"),
        ("dotdot", "now", json!({}), "twelve"),
    ] {
        let text = activate_and_call(&a, name, tool, args).await;
        assert!(text.contains(expect), "{name}: {text}");
        let view = a.registry(json!({"action": "sandbox", "name": name})).await;
        assert_eq!(view["effective"], true, "{name} ran confined: {view}");
        for g in view["grants"].as_array().unwrap() {
            let p = g["path"].as_str().unwrap();
            assert!(
                p != s(&home) && !s(&home).starts_with(&format!("{p}/")),
                "{name}: HOME or above granted: {g}"
            );
            // Nothing in HOME is written but the server's state and the environment `uv run` keeps in step.
            let uv_state = p.ends_with("/.venv") || p.ends_with("/uv.lock");
            if g["access"] == "write" && g["source"] != "state" && !uv_state {
                assert!(!p.starts_with(&s(&home)), "{name}: {p} is writable: {view}");
            }
        }
    }
    // What each one needed, read-only: the project, the base interpreter outside the toolchain folders, the venv.
    let view = a
        .registry(json!({"action": "sandbox", "name": "weather"}))
        .await;
    let g = grant(&view, &weather).unwrap_or_else(|| panic!("the project: {view}"));
    assert_eq!(g["access"], "read", "{view}");
    let view = a
        .registry(json!({"action": "sandbox", "name": "venvtime"}))
        .await;
    assert_eq!(
        grant(&view, &base).unwrap_or_else(|| panic!("the base interpreter: {view}"))["access"],
        "read"
    );
    assert_eq!(
        grant(&view, &venv).unwrap_or_else(|| panic!("the venv: {view}"))["access"],
        "read"
    );
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_git_server_commits_with_the_users_identity_and_the_filesystem_server_stays_in_its_root()
 {
    let dir = tempfile::tempdir().unwrap();
    let home_dir = tempfile::tempdir().unwrap();
    let home = home_dir.path().canonicalize().unwrap();
    write(
        &home.join(".gitconfig"),
        "[user]\n\tname = Ada Lovelace\n\temail = ada@example.org\n[credential]\n\thelper = store\n",
    );
    let repo = home.join("src/repo");
    std::fs::create_dir_all(&repo).unwrap();
    sh(&home, "git", &["init", "-q", "."], &repo);
    write(&repo.join("notes.md"), "first\n");
    let root = home.join("notes");
    write(&root.join("a.md"), "inside");
    write(&home.join("private.md"), "outside");
    let a = agent(dir.path(), &home).await;
    // As its README says: `uvx mcp-server-git --repository path/to/git/repo`.
    a.registry(
        json!({"action": "install", "name": "git", "command": cache("uv/bin/uvx"),
        "args": ["mcp-server-git", "--repository", "~/src/repo"]}),
    )
    .await;
    activate_and_call(
        &a,
        "git",
        "git_add",
        json!({"repo_path": repo, "files": ["notes.md"]}),
    )
    .await;
    let text = activate_and_call(
        &a,
        "git",
        "git_commit",
        json!({"repo_path": repo, "message": "first"}),
    )
    .await;
    assert!(text.contains("committed"), "{text}");
    let out = Command::new("git")
        .args(["log", "--format=%an <%ae> / %cn <%ce>"])
        .current_dir(&repo)
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "Ada Lovelace <ada@example.org> / Ada Lovelace <ada@example.org>",
        "the user's identity, not the sandbox's"
    );
    // The filesystem server with a root: written inside, nothing outside.
    a.registry(json!({"action": "install", "name": "fs", "command": "node",
        "args": [cache("node/node_modules/@modelcontextprotocol/server-filesystem/dist/index.js"), root]}))
        .await;
    let wrote = activate_and_call(
        &a,
        "fs",
        "write_file",
        json!({"path": root.join("b.md"), "content": "new"}),
    )
    .await;
    assert!(!wrote.is_empty());
    assert_eq!(std::fs::read_to_string(root.join("b.md")).unwrap(), "new");
    let r = a
        .call(
            "fs__write_file",
            json!({"path": home.join("evil.md"), "content": "x"}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", harness::text(&r));
    assert!(!home.join("evil.md").exists());
    let r = a
        .call(
            "fs__read_text_file",
            json!({"path": home.join("private.md")}),
        )
        .await;
    assert_eq!(r.is_error, Some(true), "{}", harness::text(&r));
    a.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_refused_a_credential_says_which_file_and_the_grant_and_check_reports_it() {
    let dir = tempfile::tempdir().unwrap();
    let home_dir = tempfile::tempdir().unwrap();
    let home = home_dir.path().canonicalize().unwrap();
    write(
        &home.join(".aws/credentials"),
        "[default]\naws_access_key_id = canary\n",
    );
    let weather = node_project(&home);
    // A server that reads its credentials from `$HOME/.aws/credentials` at start, as the AWS SDKs do.
    write(
        &weather.join("build/aws.js"),
        "import { readFileSync } from 'node:fs';\nimport { homedir } from 'node:os';\nconst creds = readFileSync(`${homedir()}/.aws/credentials`, 'utf8');\nconsole.error(`credentials: ${creds.length} bytes`);\nawait import('./index.js');\n",
    );
    let a = agent(dir.path(), &home).await;
    a.registry(json!({"action": "install", "name": "aws", "command": "node", "args": [weather.join("build/aws.js")]}))
        .await;
    let (is_error, v) = a
        .try_registry(json!({"action": "activate", "name": "aws"}))
        .await
        .unwrap();
    assert!(is_error, "{v}");
    assert_eq!(v["error"]["kind"], "sandbox_denied", "{v}");
    let text = v.to_string();
    let creds = home.join(".aws/credentials");
    let fix = format!("agent-discover sandbox set aws --read {}", s(&creds));
    assert!(
        text.contains(&fix) && text.contains("a credential"),
        "{text}"
    );
    // The same from `sandbox check`, and in `status`.
    let mut check = harness::command(dir.path(), &["sandbox", "check", "aws", "--json"]);
    check.env("HOME", &home);
    let out = check.output().await.unwrap();
    assert!(!out.status.success(), "a server that did not start exits 1");
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["ok"], false, "{report}");
    assert_eq!(report["refused"][0]["path"], s(&creds), "{report}");
    assert_eq!(
        report["refused"][0]["credential"], ".aws/credentials",
        "{report}"
    );
    assert!(
        report["advice"].as_str().unwrap().contains(&fix),
        "{report}"
    );
    let mut status = harness::command(dir.path(), &["status", "--json"]);
    status.env("HOME", &home);
    let status = String::from_utf8_lossy(&status.output().await.unwrap().stdout).into_owned();
    assert!(
        status.contains(&fix),
        "the server's error in `status`: {status}"
    );
    // The grant it names works: the file appears in the server's own HOME.
    let mut set = harness::command(dir.path(), &["sandbox", "set", "aws", "--read", &s(&creds)]);
    set.env("HOME", &home);
    assert!(set.output().await.unwrap().status.success());
    let text = activate_and_call(&a, "aws", "get-alerts", json!({"state": "WA"})).await;
    assert!(text.contains("WA"), "{text}");
    let mut check = harness::command(dir.path(), &["sandbox", "check", "aws", "--json"]);
    check.env("HOME", &home);
    let out = check.output().await.unwrap();
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(out.status.success(), "{report}");
    assert_eq!(report["ok"], true, "{report}");
    assert_eq!(report["refused"], json!([]), "{report}");
    a.stop().await;
}
