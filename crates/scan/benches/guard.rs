//! What the guards on calls cost per call: a 1 KB argument read by the argument guard (`secrets_in_arguments`, the
//! normal path) and by the fast lane's raw test (`may_hold_secret`), clean and with a planted credential, and a 1 KB
//! result read by the result guards (`mask_text`, `instructions_in`): `cargo bench -p ad-scan --bench guard`
//! (release profile). Prints the mean and p50/p99 per operation, in CPU time of the benchmark's thread (the machine
//! is shared: wall clock would count the time other processes ran).

use ad_scan::guard;
use serde_json::{Map, Value, json};

/// CPU time of the calling thread, in microseconds.
fn thread_cpu_us() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 * 1e6 + ts.tv_nsec as f64 / 1e3
}

/// Times `f` over `n` runs after a warm-up; returns (mean, p50, p99) in microseconds of thread CPU time.
fn time(n: usize, mut f: impl FnMut()) -> (f64, f64, f64) {
    for _ in 0..n / 10 {
        f();
    }
    let mut t: Vec<f64> = (0..n)
        .map(|_| {
            let s = thread_cpu_us();
            f();
            thread_cpu_us() - s
        })
        .collect();
    t.sort_by(f64::total_cmp);
    let mean = t.iter().sum::<f64>() / n as f64;
    (mean, t[n / 2], t[n * 99 / 100])
}

/// About 1 KB of arguments as a real tool gets them: a path, a query, a paragraph of prose, numbers, a nested object.
fn arguments(planted: Option<&str>) -> Map<String, Value> {
    let prose = "The quarterly report summarises revenue by region and product line. Please compare the \
                 figures with last year's and highlight any region whose growth fell below five percent; \
                 include a short table and keep the tone neutral. Use the attached spreadsheet as the source, \
                 and note any rows with missing values so the finance team can follow up before Friday.";
    let v = json!({
        "path": "/home/user/projects/reports/2024/q3/summary.md",
        "query": "revenue growth by region site:intranet after:2024-07-01",
        "instructions": prose,
        "options": {"format": "markdown", "max_rows": 200, "include_totals": true, "locale": "en-GB",
                    "columns": ["region", "product", "revenue", "growth", "notes"]},
        "notes": format!("{prose} {}", planted.unwrap_or("")),
    });
    v.as_object().unwrap().clone()
}

fn main() {
    let clean = arguments(None);
    let key = format!(
        "ghp_{}",
        "a1B2c3D4e5F6g7H8i9J0".repeat(2).get(..36).unwrap()
    );
    let dirty = arguments(Some(&key));
    let raw_clean = serde_json::to_string(&clean).unwrap();
    let raw_dirty = serde_json::to_string(&dirty).unwrap();
    println!("arguments: {} bytes of JSON", raw_clean.len());
    let n = 200_000;
    let report = |what: &str, (mean, p50, p99): (f64, f64, f64)| {
        println!("{what}: mean {mean:.2} us, p50 {p50:.2} us, p99 {p99:.2} us");
    };
    report(
        "secrets_in_arguments, clean 1 KB (normal path)",
        time(n, || {
            std::hint::black_box(guard::secrets_in_arguments(std::hint::black_box(&clean)));
        }),
    );
    report(
        "secrets_in_arguments, 1 KB with a GitHub token",
        time(n, || {
            std::hint::black_box(guard::secrets_in_arguments(std::hint::black_box(&dirty)));
        }),
    );
    report(
        "may_hold_secret, clean 1 KB raw JSON (fast lane)",
        time(n, || {
            std::hint::black_box(guard::may_hold_secret(std::hint::black_box(&raw_clean)));
        }),
    );
    report(
        "may_hold_secret, 1 KB raw JSON with a GitHub token",
        time(n, || {
            std::hint::black_box(guard::may_hold_secret(std::hint::black_box(&raw_dirty)));
        }),
    );
    let result = clean["instructions"].as_str().unwrap().repeat(3);
    println!("result: {} bytes of text", result.len());
    report(
        "mask_text, clean 1 KB result",
        time(n, || {
            std::hint::black_box(guard::mask_text(std::hint::black_box(&result)));
        }),
    );
    report(
        "instructions_in, 1 KB result of ordinary prose",
        time(n / 10, || {
            std::hint::black_box(guard::instructions_in(std::hint::black_box(&result)));
        }),
    );
    // Long prose, as a fetched web page or a document: 8 KB of varied sentences.
    let page = [
        "The museum reopened in spring after two years of restoration work on its east wing.",
        "Visitors can now see the collection of maps, many of which were printed before 1800.",
        "Opening hours are from ten in the morning until six in the evening, except on Mondays.",
        "Guided tours start every hour; you can book them at the desk or on the website.",
        "The cafe on the ground floor serves lunch, and the garden is open when the weather allows.",
        "School groups should register two weeks in advance so that a guide is available for them.",
        "Photography without flash is allowed in most rooms, but not in the temporary exhibition.",
        "The library holds letters and diaries of the founders, which researchers may consult.",
        "Tickets are free for children under twelve and half price for students with a card.",
        "The building is accessible by wheelchair, and lifts connect all three floors of the wing.",
        "A new audio guide tells the story of each map in five languages, read by local actors.",
        "Next year the west wing will close for the same work, and part of the collection will travel.",
    ]
    .join(" ")
    .repeat(8);
    println!("page: {} bytes of text", page.len());
    report(
        "instructions_in, 8 KB page of ordinary prose",
        time(n / 100, || {
            std::hint::black_box(guard::instructions_in(std::hint::black_box(&page)));
        }),
    );
    let quiet = "Temperature 14 C, light rain, wind 12 km/h from the west; humidity 81 percent. "
        .repeat(12);
    report(
        "instructions_in, 1 KB result without a trigger word",
        time(n, || {
            std::hint::black_box(guard::instructions_in(std::hint::black_box(&quiet)));
        }),
    );
}
