//! The install and pre-flight stages: an npm package into `<cache>/npm/<name>@<version>` (npm, with the user's npm
//! configuration), a PyPI package into its own virtual environment `<cache>/pypi/<name>==<version>` (uv when present,
//! else python3's venv and pip); then the runnable entry point (npm `bin`, a console script) and the engines check.
//!
//! A package already in the cache at the wanted version is not installed again. Package managers get our environment
//! (they need their registry configuration, and npm its cache, shared by the whole batch; `--prefer-offline` reuses
//! what an earlier package of the batch fetched); the server itself never does (see `probe`).
//!
//! Lifecycle scripts are skipped at first (`npm install --ignore-scripts`; a PyPI project from wheels only): most
//! servers need none, and the ones that fail here download browsers or build natively. They are run (`npm rebuild`;
//! source distributions allowed) only when the first try fails for a reason scripts explain: a bin file that a script
//! generates, a start-up crash naming a missing native build or an un-run setup step ([`scripts_explain`]), or no
//! wheel for the project.
//!
//! Before installing an npm package from a registry, its manifest is read (`npm view`): a package with no `bin` is a
//! library that npx cannot start, filed `no_entry_point` (marked `library`) without installing it.
//!
//! A PyPI project whose start fails inside a dependency that moved on since its release is installed again with its
//! dependencies as of its release day (`dated`).
//!
//! Parts: `run` (a package manager under a time limit), `failure` (what a failed one said, as an `install_failed`
//! diagnosis), `naming` (cache folder names, the entry point to start), `scripts` (the skipped lifecycle scripts),
//! then `npm` and `pypi`, one per ecosystem. The Node version check (`engines.node`) is `ad_proxy::runtime`'s.

mod dated;
mod failure;
mod naming;
mod npm;
mod pypi;
mod run;
mod scripts;

pub(crate) use dated::drift_signature;
pub(crate) use pypi::reinstall_dated;
pub(crate) use scripts::{run_scripts, scripts_explain};

use crate::category::Diagnosis;
use crate::options::Options;
use crate::targets::{Ecosystem, Target};
use crate::types::{Installed, StageTime};

/// Runs the install and pre-flight stages. `Err` carries an `install_failed` or `no_entry_point` diagnosis.
pub(crate) async fn install(
    target: &Target,
    options: &Options,
    stages: &mut Vec<StageTime>,
) -> Result<Installed, Diagnosis> {
    match target.ecosystem {
        Ecosystem::Command => Ok(Installed {
            name: target.package.clone(),
            version: None,
            description: None,
            launch: target.package.clone(),
            readme: None,
            flags: Vec::new(),
            scripts_skipped_in: None,
            engines: None,
        }),
        Ecosystem::Npm => npm::npm(target, options, stages).await,
        Ecosystem::Pypi => pypi::pypi(target, options, stages, None).await,
    }
}
