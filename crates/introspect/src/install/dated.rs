//! Dependency drift of a PyPI project: a project whose start fails inside a dependency that moved on since its release
//! (`ImportError: cannot import name ...`, `'Server' object has no attribute ...`, `No module named 'mcp.server.fastmcp'
//! ... pin 'mcp<2'`) is installed again with its dependencies as they were on its release day: uv's `--exclude-newer`
//! at the first day on which the installed version resolves (found by asking uv, `--dry-run --no-deps --reinstall`, for a day
//! cut-off halved each time). Everything goes through uv and the user's index configuration.

use std::path::Path;
use std::time::Duration;

use super::run::run_tool;

/// The failure line that says a dependency drifted, when `lines` (a start-up failure's stderr) hold one.
pub(crate) fn drift_signature<'a>(lines: impl IntoIterator<Item = &'a str>) -> Option<String> {
    lines.into_iter().find_map(|l| {
        let t = l.trim();
        let hit = t.starts_with("ImportError: cannot import name")
            || (t.starts_with("AttributeError:") && t.contains("has no attribute"))
            // A submodule missing from an installed package (`mcp.server.fastmcp`), not a package missing outright.
            || t.strip_prefix("ModuleNotFoundError: No module named '")
                .is_some_and(|r| r.split('\'').next().is_some_and(|m| m.contains('.')))
            || (t.contains("Error") && (t.contains("pin '") || t.contains("pin \"")));
        hit.then(|| {
            let mut s = t.to_owned();
            crate::types::clip(&mut s, 200);
            s
        })
    })
}

/// `YYYY-MM-DDT00:00:00Z` of day `day` since the Unix epoch.
pub(crate) fn day_stamp(day: i64) -> String {
    let stamp = ad_core::clock::rfc3339_signed(day * 86_400_000);
    format!("{}T00:00:00Z", &stamp[..10])
}

/// The first day `d` in `(lo, hi]` for which `ok(d)` holds, given `ok` is monotonic (false up to some day, then
/// true) and `ok(hi)`; `None` when `ok(hi)` does not hold. `ok` is asked about log2(hi - lo) days.
pub(crate) async fn first_day<F, Fut>(mut lo: i64, mut hi: i64, mut ok: F) -> Option<i64>
where
    F: FnMut(i64) -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    if !ok(hi).await {
        return None;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid).await {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// The day cut-off (`YYYY-MM-DDT00:00:00Z`, exclusive: the midnight after the upload) at which `spec`
/// (`name==version`) first resolves, asked of uv with `--dry-run --no-deps` into the environment of `python`.
pub(crate) async fn release_cutoff(
    uv: &str,
    python: &Path,
    spec: &str,
    cwd: &Path,
    env: &[(&str, String)],
) -> Option<String> {
    let today = (std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?
        .as_secs()
        / 86_400) as i64;
    let day = first_day(0, today + 1, |d| async move {
        let args: Vec<String> = [
            "pip",
            "install",
            "--dry-run",
            "--quiet",
            "--no-deps",
            // Resolved from the index, not found already installed in the environment (which any cut-off accepts).
            "--reinstall",
            "--python",
            &python.display().to_string(),
            "--exclude-newer",
            &day_stamp(d),
            spec,
        ]
        .iter()
        .map(|s| (*s).to_owned())
        .collect();
        run_tool(uv, &args, cwd, env, Duration::from_secs(60))
            .await
            .is_ok_and(|o| o.status == Some(0))
    })
    .await?;
    Some(day_stamp(day))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn drift_lines_of_real_failures() {
        // chroma-mcp 0.2.6: its pinned SDK imports a private helper a newer pydantic dropped.
        assert!(drift_signature(["ImportError: cannot import name 'eval_type_backport' from 'pydantic._internal._typing_extra' (/x/site-packages/pydantic/_internal/_typing_extra.py)"]).is_some());
        // mcp-server-duckdb 1.1.0 on mcp 2.x.
        assert!(
            drift_signature([
                "    @server.list_resources()",
                "AttributeError: 'Server' object has no attribute 'list_resources'"
            ])
            .is_some()
        );
        // office-powerpoint-mcp-server 2.0.7 on mcp 2.x.
        assert!(drift_signature(["ModuleNotFoundError: No module named 'mcp.server.fastmcp'. This is mcp 2.x, where FastMCP was renamed to MCPServer; pin 'mcp<2' to keep running v1 code."]).is_some());
        // A package missing outright, a credential error, a plain traceback line: not drift.
        assert!(drift_signature(["ModuleNotFoundError: No module named 'torch'"]).is_none());
        assert!(
            drift_signature([
                "Error: GITHUB_TOKEN is required",
                "Traceback (most recent call last):"
            ])
            .is_none()
        );
        assert!(drift_signature(["RuntimeError: cannot import the config"]).is_none());
    }

    #[test]
    fn day_stamps() {
        assert_eq!(day_stamp(0), "1970-01-01T00:00:00Z");
        assert_eq!(day_stamp(20_315), "2025-08-15T00:00:00Z");
        assert_eq!(day_stamp(19_417), "2023-03-01T00:00:00Z");
        assert_eq!(day_stamp(19_416), "2023-02-28T00:00:00Z");
        assert_eq!(day_stamp(11_016), "2000-02-29T00:00:00Z");
    }

    #[tokio::test]
    async fn first_day_halves_the_range() {
        let asked = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let a = asked.clone();
        let day = first_day(0, 20_000, move |d| {
            a.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            async move { d >= 19_999 }
        })
        .await;
        assert_eq!(day, Some(19_999));
        assert!(asked.load(std::sync::atomic::Ordering::Relaxed) <= 16);
        assert_eq!(first_day(0, 100, |d| async move { d >= 1 }).await, Some(1));
        assert_eq!(first_day(0, 100, |_| async { false }).await, None);
        assert_eq!(first_day(0, 100, |_| async { true }).await, Some(1));
    }
}
