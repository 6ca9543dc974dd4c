//! The chain of programs a start runs through: the program as the child's `PATH` finds it, every symlink on the way,
//! a script's `#!` interpreter (through `env`), a venv's base interpreter (`pyvenv.cfg`), and the version managers
//! whose shims and installs they live in (pyenv, nvm, fnm, volta, asdf, mise, conda, rbenv, sdkman, Homebrew, nix),
//! wherever those are installed. Each link grants its install, read-only.

use std::collections::BTreeMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::places;

/// Directories under HOME holding interpreters and tools that version managers and installers keep (read only, each
/// where it exists). Credentials never live in these (`~/.cargo` is not here whole: it keeps a registry token).
pub(super) const TOOLCHAINS_IN_HOME: &[&str] = &[
    ".pyenv",
    ".nvm",
    ".volta",
    ".bun",
    ".deno",
    ".fnm",
    ".asdf",
    ".rbenv",
    ".sdkman",
    ".linuxbrew",
    ".nix-profile",
    ".local/share/uv",
    ".local/share/pipx",
    ".local/pipx",
    ".local/share/fnm",
    ".local/share/mise",
    ".local/share/rtx",
    ".local/share/pnpm",
    ".local/bin",
    ".cargo/bin",
    "go/bin",
    "miniconda3",
    "anaconda3",
    "miniforge3",
    "mambaforge",
    "micromamba",
];

/// Variables naming where a version manager keeps its installs; set in our environment, the place is granted
/// read-only wherever it is, and the variable is passed on (with HOME moved, the manager would not find it).
pub(super) const MANAGER_ROOTS: &[&str] = &[
    "PYENV_ROOT",
    "NVM_DIR",
    "FNM_DIR",
    "VOLTA_HOME",
    "ASDF_DIR",
    "ASDF_DATA_DIR",
    "MISE_DATA_DIR",
    "RBENV_ROOT",
    "SDKMAN_DIR",
    "BUN_INSTALL",
    "PNPM_HOME",
    "MAMBA_ROOT_PREFIX",
    "CONDA_PREFIX",
    "PIPX_HOME",
    "HOMEBREW_PREFIX",
];

/// The default place of each manager under HOME, for the variable the manager reads (set for the child when the
/// chain goes through it and our environment does not name it).
const MANAGER_DEFAULTS: &[(&str, &str)] = &[
    (".pyenv", "PYENV_ROOT"),
    (".asdf", "ASDF_DATA_DIR"),
    (".local/share/mise", "MISE_DATA_DIR"),
    (".rbenv", "RBENV_ROOT"),
    (".volta", "VOLTA_HOME"),
    (".sdkman", "SDKMAN_DIR"),
    (".nvm", "NVM_DIR"),
];

/// What the chain found: the programs it runs through (each as named and as resolved), the places to read, and
/// variables the child needs to find its manager.
#[derive(Debug, Default)]
pub(super) struct Chain {
    /// Every program of the chain, resolved (the last is the one that runs the server's code).
    pub programs: Vec<PathBuf>,
    /// Every program of the chain as named (symlinks not resolved): a venv's `bin/python`.
    pub named: Vec<PathBuf>,
    pub read: Vec<PathBuf>,
    pub env: BTreeMap<String, String>,
}

/// `program` found as the child's `PATH` finds it.
pub(super) fn resolve(program: &str, env: &BTreeMap<String, String>) -> Option<PathBuf> {
    if program.contains('/') {
        let p = PathBuf::from(program);
        let p = if p.is_relative() {
            std::env::current_dir().ok()?.join(p)
        } else {
            p
        };
        return p.is_file().then_some(p);
    }
    std::env::split_paths(env.get("PATH")?)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Follows `program` through symlinks, `#!` lines and venvs (at most 8 links).
pub(super) fn follow(program: &str, env: &BTreeMap<String, String>, home: Option<&Path>) -> Chain {
    let mut chain = Chain::default();
    let mut next = resolve(program, env);
    let mut steps = 0;
    while let Some(named) = next.take() {
        steps += 1;
        if steps > 8 || chain.named.contains(&named) {
            break;
        }
        let real = places::resolved(&named);
        for hop in symlink_hops(&named) {
            chain.read.extend(install_of(&hop, home));
            venv(&hop, &mut chain.read);
            manager(&hop, home, &mut chain);
        }
        chain.read.extend(install_of(&real, home));
        venv(&named, &mut chain.read);
        manager(&real, home, &mut chain);
        chain.named.push(named);
        chain.programs.push(real.clone());
        if let Some((interpreter, _)) = shebang(&real) {
            next = if interpreter.ends_with("/env") || interpreter == "env" {
                shebang(&real)
                    .and_then(|(_, arg)| env_target(&arg))
                    .and_then(|p| resolve(&p, env))
            } else {
                Some(PathBuf::from(interpreter))
            };
        }
    }
    chain.read.sort();
    chain.read.dedup();
    chain
}

/// The program `#!/usr/bin/env [-S] NAME ARGS` runs.
fn env_target(arg: &str) -> Option<String> {
    arg.split_whitespace()
        .find(|w| !w.starts_with('-') && !w.contains('='))
        .map(str::to_owned)
}

/// A script's `#!` line: the interpreter and the rest of the line.
pub(super) fn shebang(path: &Path) -> Option<(String, String)> {
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path).ok()?.read(&mut head).ok()?;
    let head = head.get(..n)?.strip_prefix(b"#!")?;
    let line = head.split(|b| *b == b'\n').next()?;
    let line = std::str::from_utf8(line).ok()?.trim();
    let (interpreter, rest) = line.split_once([' ', '\t']).unwrap_or((line, ""));
    (!interpreter.is_empty()).then(|| (interpreter.to_owned(), rest.trim().to_owned()))
}

/// Every path a symlink chain from `p` passes through, `p` included (at most 40 hops), each made absolute.
fn symlink_hops(p: &Path) -> Vec<PathBuf> {
    let mut out = vec![p.to_path_buf()];
    let mut cur = p.to_path_buf();
    for _ in 0..40 {
        let Ok(target) = std::fs::read_link(&cur) else {
            break;
        };
        let dir = cur.parent().map(places::resolved).unwrap_or_default();
        cur = dir.join(target);
        out.push(cur.clone());
    }
    out
}

/// What a program's install is: the prefix of a `PREFIX/bin/program` (a venv, `/usr/local`, a conda env, a pyenv
/// version), the project of a program inside `node_modules`, else its own directory. Never HOME or a folder of it
/// holding more than tools: `~/.local/bin/x` grants `~/.local/bin` and `~/.local/lib` (a `pip --user` install), and a
/// `bin` directly in a dot-folder of HOME that is no known toolchain (`~/.cargo/bin`) grants that `bin` alone.
pub(super) fn install_of(program: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let program = places::resolved(program);
    if let Some(root) = program
        .ancestors()
        .filter(|a| a.file_name().is_some_and(|n| n == "node_modules"))
        .last()
        .and_then(Path::parent)
    {
        return vec![root.to_path_buf()];
    }
    let Some(dir) = program.parent() else {
        return vec![];
    };
    if dir.file_name().is_none_or(|n| n != "bin") {
        return vec![dir.to_path_buf()];
    }
    let Some(prefix) = dir.parent() else {
        return vec![dir.to_path_buf()];
    };
    let Some(home) = home else {
        return vec![prefix.to_path_buf()];
    };
    if prefix == home.join(".local") {
        return vec![dir.to_path_buf(), prefix.join("lib")];
    }
    if prefix.parent() == Some(home) && !is_known_toolchain(prefix, home) && !is_prefix(prefix) {
        return vec![dir.to_path_buf()];
    }
    if home.starts_with(prefix) {
        return vec![dir.to_path_buf()];
    }
    vec![prefix.to_path_buf()]
}

fn is_known_toolchain(p: &Path, home: &Path) -> bool {
    TOOLCHAINS_IN_HOME
        .iter()
        .any(|t| !t.contains('/') && home.join(t) == p)
}

/// Whether `p` is an installation prefix rather than a folder that merely has a `bin` (a conda install, a venv, a
/// Python or Node build): it has `conda-meta`, `pyvenv.cfg`, or a `lib` with a Python or `node_modules` in it.
fn is_prefix(p: &Path) -> bool {
    if p.join("conda-meta").is_dir() || p.join("pyvenv.cfg").is_file() {
        return true;
    }
    std::fs::read_dir(p.join("lib")).is_ok_and(|entries| {
        entries.flatten().any(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("python") || n == "node_modules"
        })
    })
}

/// A venv's prefix and its base interpreter's install, when `program` is `VENV/bin/...` (`pyvenv.cfg` beside `bin`):
/// `home = /base/bin` names where the base interpreter is.
fn venv(program: &Path, read: &mut Vec<PathBuf>) {
    let Some(prefix) = program
        .parent()
        .filter(|d| d.file_name().is_some_and(|n| n == "bin"))
        .and_then(Path::parent)
    else {
        return;
    };
    let Ok(cfg) = std::fs::read_to_string(prefix.join("pyvenv.cfg")) else {
        return;
    };
    read.push(places::resolved(prefix));
    for line in cfg.lines() {
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        let value = value.trim();
        if matches!(
            key,
            "home" | "base-prefix" | "base-exec-prefix" | "base-executable"
        ) && value.starts_with('/')
        {
            let p = places::resolved(Path::new(value));
            let base = if key == "base-executable" {
                p.parent().map(Path::to_path_buf).unwrap_or(p)
            } else {
                p
            };
            let base = if base.file_name().is_some_and(|n| n == "bin") {
                base.parent().map(Path::to_path_buf).unwrap_or(base)
            } else {
                base
            };
            read.push(base);
        }
    }
}

/// A version manager the program lives in: a shim (`ROOT/shims/python`, pyenv, rbenv, asdf, mise) grants the
/// manager's root; a program in a manager's default place under HOME sets the variable that names it.
fn manager(program: &Path, home: Option<&Path>, chain: &mut Chain) {
    if let Some(root) = program
        .parent()
        .filter(|d| d.file_name().is_some_and(|n| n == "shims"))
        .and_then(Path::parent)
    {
        chain.read.push(root.to_path_buf());
    }
    let Some(home) = home else {
        return;
    };
    for (place, var) in MANAGER_DEFAULTS {
        let root = home.join(place);
        if program.starts_with(&root) && std::env::var_os(var).is_none() {
            chain.read.push(root.clone());
            chain
                .env
                .insert((*var).to_owned(), root.to_string_lossy().into_owned());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(p: &Path, text: &str, exec: bool) {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
        if exec {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
        }
    }

    #[test]
    fn a_venv_script_grants_the_venv_and_its_base_interpreter_wherever_it_is() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        let base = home.join("miniconda3");
        write(&base.join("bin/python3.11"), "ELF", true);
        std::fs::create_dir_all(base.join("conda-meta")).unwrap();
        let venv = root.join("srv/venv");
        write(
            &venv.join("pyvenv.cfg"),
            &format!("home = {}\n", base.join("bin").display()),
            false,
        );
        std::fs::create_dir_all(venv.join("bin")).unwrap();
        std::os::unix::fs::symlink(base.join("bin/python3.11"), venv.join("bin/python")).unwrap();
        let script = venv.join("bin/mcp-server-time");
        write(
            &script,
            &format!("#!{}\nimport sys\n", venv.join("bin/python").display()),
            true,
        );
        let env = BTreeMap::from([("PATH".to_string(), "/usr/bin".to_string())]);
        let chain = follow(&script.to_string_lossy(), &env, Some(&home));
        assert!(chain.read.contains(&venv), "{chain:?}");
        assert!(chain.read.contains(&base), "{chain:?}");
        assert_eq!(chain.programs.last(), Some(&base.join("bin/python3.11")));
    }

    #[test]
    fn env_shebangs_shims_and_home_folders() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let home = root.join("home");
        let pyenv = root.join("shared/alice/.pyenv");
        write(
            &pyenv.join("shims/python"),
            "#!/usr/bin/env bash\nexec pyenv\n",
            true,
        );
        write(
            &home.join("bin-scripts/server"),
            "#!/usr/bin/env -S python -u\n",
            true,
        );
        let env = BTreeMap::from([(
            "PATH".to_string(),
            format!("{}:/usr/bin", pyenv.join("shims").display()),
        )]);
        let chain = follow(
            &home.join("bin-scripts/server").to_string_lossy(),
            &env,
            Some(&home),
        );
        assert!(chain.read.contains(&pyenv), "the shim's manager: {chain:?}");
        assert!(chain.programs.contains(&pyenv.join("shims/python")));

        write(&home.join(".cargo/bin/tool"), "ELF", true);
        write(&home.join(".cargo/credentials.toml"), "token", false);
        assert_eq!(
            install_of(&home.join(".cargo/bin/tool"), Some(&home)),
            vec![home.join(".cargo/bin")]
        );
        write(&home.join(".local/bin/tool"), "ELF", true);
        assert_eq!(
            install_of(&home.join(".local/bin/tool"), Some(&home)),
            vec![home.join(".local/bin"), home.join(".local/lib")]
        );
        write(&home.join("miniconda3/bin/python"), "ELF", true);
        std::fs::create_dir_all(home.join("miniconda3/conda-meta")).unwrap();
        assert_eq!(
            install_of(&home.join("miniconda3/bin/python"), Some(&home)),
            vec![home.join("miniconda3")]
        );
        write(&home.join("proj/node_modules/pkg/dist/cli.js"), "", false);
        assert_eq!(
            install_of(&home.join("proj/node_modules/pkg/dist/cli.js"), Some(&home)),
            vec![home.join("proj")]
        );
    }
}
