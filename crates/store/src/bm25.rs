//! `ad_bm25`, an FTS5 ranking function: FTS5's own `bm25()` (the same formula, k1 = 1.2, b = 0.75, per-column weights,
//! the same IDF), except that each row's length in tokens comes from a map held in memory instead of from FTS5's
//! `%_docsize` table, which FTS5 reads with one SQL statement per matched row: at 10k tools that lookup was 37% of a
//! `find_tool` query (callgrind). Before each query the map is reloaded if the database changed since it was read
//! (`PRAGMA data_version` for other connections, the connection's change count for its own); a row it lacks still
//! gets FTS5's own lookup.
//!
//! `unsafe` because FTS5 auxiliary functions exist only in its C API, which rusqlite does not wrap.

use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::sync::{Arc, Mutex};

use rusqlite::{Connection, ffi};

/// The function's SQL name.
pub(super) const FUNCTION: &str = "ad_bm25";
const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Token counts of the rows of `server_tools_fts` (all columns together), and the database state they were read at.
#[derive(Default)]
pub(super) struct DocLengths {
    /// (`PRAGMA data_version`, this connection's total changes) when loaded.
    version: Option<(i64, i64)>,
    lengths: Arc<HashMap<i64, u32>>,
}

pub(super) type SharedLengths = Arc<Mutex<DocLengths>>;

/// Reloads the lengths when another connection committed or this one changed rows since they were read.
/// Call with the connection's lock held, before a query that ranks with `ad_bm25`.
pub(super) fn refresh(shared: &SharedLengths, conn: &Connection) -> rusqlite::Result<()> {
    let data_version: i64 = conn.query_row("PRAGMA data_version", [], |r| r.get(0))?;
    // SAFETY: `handle` is this open connection's pointer; the call only reads a counter.
    let own_changes = unsafe { ffi::sqlite3_total_changes64(conn.handle()) };
    let now = Some((data_version, own_changes));
    if shared.lock().unwrap_or_else(|p| p.into_inner()).version == now {
        return Ok(());
    }
    let mut stmt = conn.prepare_cached("SELECT id, sz FROM server_tools_fts_docsize")?;
    let rows = stmt.query_map([], |r| {
        Ok((r.get::<_, i64>(0)?, r.get_ref(1)?.as_blob()?.to_vec()))
    })?;
    let mut lengths = HashMap::new();
    for row in rows {
        let (id, sizes) = row?;
        lengths.insert(id, total_tokens(&sizes));
    }
    *shared.lock().unwrap_or_else(|p| p.into_inner()) = DocLengths {
        version: now,
        lengths: Arc::new(lengths),
    };
    Ok(())
}

/// The sum of a `%_docsize` record: one SQLite varint per column.
fn total_tokens(mut record: &[u8]) -> u32 {
    let mut total = 0u64;
    while !record.is_empty() {
        let (value, used) = varint(record);
        total += value;
        record = &record[used..];
    }
    total.min(u64::from(u32::MAX)) as u32
}

/// SQLite's variable-length integer: up to 8 bytes of 7 bits (high bit set on all but the last), a 9th of 8 bits.
fn varint(bytes: &[u8]) -> (u64, usize) {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(9) {
        if i == 8 {
            return ((v << 8) | u64::from(b), 9);
        }
        v = (v << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    (v, bytes.len().min(9))
}

/// Registers `ad_bm25` on `conn`, reading row lengths from `shared`.
pub(super) fn register(conn: &Connection, shared: SharedLengths) -> rusqlite::Result<()> {
    let fail = |what: &str| {
        rusqlite::Error::SqliteFailure(
            ffi::Error::new(ffi::SQLITE_ERROR),
            Some(format!("cannot register {FUNCTION}: {what}")),
        )
    };
    // SAFETY: the documented way to reach FTS5's API (`SELECT fts5(?1)` with a pointer bound as "fts5_api_ptr");
    // every pointer is checked before use, and the statement is finalised before returning.
    unsafe {
        let db = conn.handle();
        let mut api: *mut ffi::fts5_api = std::ptr::null_mut();
        let mut stmt: *mut ffi::sqlite3_stmt = std::ptr::null_mut();
        if ffi::sqlite3_prepare_v2(
            db,
            c"SELECT fts5(?1)".as_ptr(),
            -1,
            &mut stmt,
            std::ptr::null_mut(),
        ) != ffi::SQLITE_OK
        {
            return Err(fail("this SQLite has no FTS5"));
        }
        ffi::sqlite3_bind_pointer(
            stmt,
            1,
            (&raw mut api).cast::<c_void>(),
            c"fts5_api_ptr".as_ptr(),
            None,
        );
        ffi::sqlite3_step(stmt);
        ffi::sqlite3_finalize(stmt);
        let Some(create) = api.as_ref().and_then(|a| a.xCreateFunction) else {
            return Err(fail("FTS5 gave no API"));
        };
        let user = Box::into_raw(Box::new(shared)).cast::<c_void>();
        let name = c"ad_bm25";
        debug_assert_eq!(name.to_str(), Ok(FUNCTION));
        if create(api, name.as_ptr(), user, Some(ad_bm25), Some(drop_shared)) != ffi::SQLITE_OK {
            drop_shared(user);
            return Err(fail("xCreateFunction failed"));
        }
    }
    Ok(())
}

unsafe extern "C" fn drop_shared(p: *mut c_void) {
    // SAFETY: `p` is the box made in `register`, handed back once by SQLite when the function is dropped.
    drop(unsafe { Box::from_raw(p.cast::<SharedLengths>()) });
}

/// What a query computes once and every row uses: IDF per phrase, the average row length, the lengths map.
struct QueryData {
    idf: Vec<f64>,
    avgdl: f64,
    freq: Vec<f64>,
    lengths: Arc<HashMap<i64, u32>>,
}

unsafe extern "C" fn drop_query_data(p: *mut c_void) {
    // SAFETY: `p` is the box made in `query_data`, handed back once by FTS5 at the end of the query.
    drop(unsafe { Box::from_raw(p.cast::<QueryData>()) });
}

unsafe extern "C" fn count_row(
    _api: *const ffi::Fts5ExtensionApi,
    _fts: *mut ffi::Fts5Context,
    user: *mut c_void,
) -> c_int {
    // SAFETY: `user` is the `i64` counter `query_data` passes to xQueryPhrase.
    unsafe { *user.cast::<i64>() += 1 };
    ffi::SQLITE_OK
}

unsafe extern "C" fn ad_bm25(
    api: *const ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    ctx: *mut ffi::sqlite3_context,
    n_val: c_int,
    vals: *mut *mut ffi::sqlite3_value,
) {
    // SAFETY: FTS5 calls this with its API, the cursor's context and `n_val` argument values.
    let scored = std::panic::catch_unwind(|| unsafe { score(&*api, fts, n_val, vals) });
    // SAFETY: `ctx` is this call's result context.
    unsafe {
        match scored {
            Ok(Ok(score)) => ffi::sqlite3_result_double(ctx, -score),
            Ok(Err(rc)) => ffi::sqlite3_result_error_code(ctx, rc),
            Err(_) => ffi::sqlite3_result_error(ctx, c"ad_bm25 failed".as_ptr(), -1),
        }
    }
}

/// The BM25 score of the current row (positive; the SQL result is negated like `bm25()`).
unsafe fn score(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
    n_val: c_int,
    vals: *mut *mut ffi::sqlite3_value,
) -> Result<f64, c_int> {
    macro_rules! call {
        ($f:ident $(, $arg:expr)*) => {
            match api.$f {
                Some(f) => f(fts $(, $arg)*),
                None => return Err(ffi::SQLITE_ERROR),
            }
        };
    }
    // SAFETY (whole body): every call goes through FTS5's API for the current row, with pointers to live locals.
    unsafe {
        let mut data = call!(xGetAuxdata, 0).cast::<QueryData>();
        if data.is_null() {
            let fresh = Box::into_raw(Box::new(query_data(api, fts)?));
            let rc = call!(xSetAuxdata, fresh.cast::<c_void>(), Some(drop_query_data));
            if rc != ffi::SQLITE_OK {
                return Err(rc);
            }
            data = fresh;
        }
        let data = &mut *data;
        data.freq.iter_mut().for_each(|f| *f = 0.0);
        let mut n_inst: c_int = 0;
        let rc = call!(xInstCount, &mut n_inst);
        if rc != ffi::SQLITE_OK {
            return Err(rc);
        }
        for i in 0..n_inst {
            let (mut phrase, mut col, mut off) = (0, 0, 0);
            let rc = call!(xInst, i, &mut phrase, &mut col, &mut off);
            if rc != ffi::SQLITE_OK {
                return Err(rc);
            }
            let w = if n_val > col {
                ffi::sqlite3_value_double(*vals.add(col as usize))
            } else {
                1.0
            };
            if let Some(f) = data.freq.get_mut(phrase as usize) {
                *f += w;
            }
        }
        let rowid = call!(xRowid);
        let len = match data.lengths.get(&rowid) {
            Some(&n) => f64::from(n),
            None => {
                let mut n: c_int = 0;
                let rc = call!(xColumnSize, -1, &mut n);
                if rc != ffi::SQLITE_OK {
                    return Err(rc);
                }
                f64::from(n)
            }
        };
        let norm = K1 * (1.0 - B + B * len / data.avgdl);
        Ok(data
            .idf
            .iter()
            .zip(&data.freq)
            .map(|(idf, f)| idf * (f * (K1 + 1.0)) / (f + norm))
            .sum())
    }
}

/// IDF of each phrase (from the number of rows it matches) and the average row length, as `bm25()` computes them.
unsafe fn query_data(
    api: &ffi::Fts5ExtensionApi,
    fts: *mut ffi::Fts5Context,
) -> Result<QueryData, c_int> {
    let lengths = {
        // SAFETY: the user data is the `SharedLengths` box registered with the function.
        let user = unsafe { api.xUserData.ok_or(ffi::SQLITE_ERROR)?(fts) };
        let shared = unsafe { &*user.cast::<SharedLengths>() };
        shared
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .lengths
            .clone()
    };
    // SAFETY: calls through FTS5's API with pointers to live locals.
    unsafe {
        let phrases = api.xPhraseCount.ok_or(ffi::SQLITE_ERROR)?(fts).max(0) as usize;
        let (mut rows, mut tokens) = (0i64, 0i64);
        let rc = api.xRowCount.ok_or(ffi::SQLITE_ERROR)?(fts, &mut rows);
        if rc != ffi::SQLITE_OK {
            return Err(rc);
        }
        let rc = api.xColumnTotalSize.ok_or(ffi::SQLITE_ERROR)?(fts, -1, &mut tokens);
        if rc != ffi::SQLITE_OK {
            return Err(rc);
        }
        let mut idf = Vec::with_capacity(phrases);
        for i in 0..phrases {
            let mut hits = 0i64;
            let rc = api.xQueryPhrase.ok_or(ffi::SQLITE_ERROR)?(
                fts,
                i as c_int,
                (&raw mut hits).cast::<c_void>(),
                Some(count_row),
            );
            if rc != ffi::SQLITE_OK {
                return Err(rc);
            }
            let v = (((rows - hits) as f64 + 0.5) / (hits as f64 + 0.5)).ln();
            idf.push(if v <= 0.0 { 1e-6 } else { v });
        }
        Ok(QueryData {
            idf,
            avgdl: tokens as f64 / rows.max(1) as f64,
            freq: vec![0.0; phrases],
            lengths,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_as_sqlite_writes_them() {
        assert_eq!(varint(&[0x05]), (5, 1));
        assert_eq!(varint(&[0x81, 0x00]), (128, 2));
        assert_eq!(varint(&[0xff, 0x7f]), (16383, 2));
        assert_eq!(total_tokens(&[3, 12]), 15);
        assert_eq!(total_tokens(&[0x81, 0x00, 2]), 130);
    }

    /// Same scores as FTS5's own bm25() on a table whose rows change under it (the lengths map goes stale and is
    /// refreshed, and rows it lacks fall back to FTS5's lookup).
    #[test]
    fn scores_equal_fts5_bm25() {
        let conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(
            "CREATE TABLE server_tools (id INTEGER PRIMARY KEY, name TEXT, description TEXT);
             CREATE VIRTUAL TABLE server_tools_fts USING fts5(name, description, content='server_tools',
                 content_rowid='id', tokenize='porter unicode61 remove_diacritics 1');",
        )
        .unwrap();
        let shared = SharedLengths::default();
        register(&conn, shared.clone()).unwrap();
        let add = |id: i64, name: &str, desc: &str| {
            conn.execute(
                "INSERT INTO server_tools (id, name, description) VALUES (?1, ?2, ?3)",
                rusqlite::params![id, name, desc],
            )
            .unwrap();
            conn.execute(
                "INSERT INTO server_tools_fts (rowid, name, description) VALUES (?1, ?2, ?3)",
                rusqlite::params![id, name, desc],
            )
            .unwrap();
        };
        let words = [
            "create",
            "issue",
            "list",
            "cancel",
            "subscription",
            "customer",
            "invoice",
            "send",
        ];
        for i in 0..300i64 {
            let w = |k: i64| words[((i * 7 + k * 3) % words.len() as i64) as usize];
            let desc = (0..(i % 9 + 1)).map(w).collect::<Vec<_>>().join(" ");
            add(i + 1, &format!("{}_{}", w(1), w(2)), &desc);
        }
        let compare = |query: &str| {
            refresh(&shared, &conn).unwrap();
            let mut stmt = conn
                .prepare(
                    "SELECT rowid, bm25(server_tools_fts, 4.0, 1.0), ad_bm25(server_tools_fts, 4.0, 1.0)
                     FROM server_tools_fts WHERE server_tools_fts MATCH ?1",
                )
                .unwrap();
            let rows: Vec<(i64, f64, f64)> = stmt
                .query_map([query], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .unwrap()
                .map(Result::unwrap)
                .collect();
            assert!(!rows.is_empty(), "{query} matched nothing");
            for (id, theirs, ours) in rows {
                assert!(
                    (theirs - ours).abs() < 1e-9 * theirs.abs().max(1.0),
                    "{query}: row {id}: bm25 {theirs} vs ad_bm25 {ours}"
                );
            }
        };
        compare("\"cancel\" OR \"subscription\"");
        compare("\"create\" OR \"issue\" OR \"customers\"");
        // Rows change: lengths of updated rows, new rows and deleted rows must follow.
        conn.execute_batch(
            "INSERT INTO server_tools_fts(server_tools_fts, rowid, name, description)
                 SELECT 'delete', id, name, description FROM server_tools WHERE id <= 50;
             DELETE FROM server_tools WHERE id <= 50;",
        )
        .unwrap();
        add(
            1000,
            "cancel_subscription",
            "cancel cancel cancel a customer subscription now",
        );
        compare("\"cancel\" OR \"subscription\"");
        // A stale map (not refreshed) still scores rows it lacks correctly.
        add(1001, "send_invoice", "send an invoice");
        let mut stmt = conn
            .prepare(
                "SELECT bm25(server_tools_fts, 4.0, 1.0), ad_bm25(server_tools_fts, 4.0, 1.0)
                 FROM server_tools_fts WHERE server_tools_fts MATCH 'invoice' AND rowid = 1001",
            )
            .unwrap();
        let (theirs, ours): (f64, f64) =
            stmt.query_row([], |r| Ok((r.get(0)?, r.get(1)?))).unwrap();
        assert!((theirs - ours).abs() < 1e-9, "{theirs} vs {ours}");
    }
}
