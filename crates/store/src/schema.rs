//! Schema migrations, ordered and idempotent, versioned with `PRAGMA user_version`.

use crate::db::DbResult;
use rusqlite::{Connection, TransactionBehavior};

use ad_core::error::Result;

/// Each entry moves the schema from version `index` to `index + 1`. Never edit a shipped entry; append a new one.
const MIGRATIONS: &[&str] = &[
    // v1: servers, tools, secrets, metrics, and FTS5 indexes kept in sync by triggers.
    r#"
    CREATE TABLE servers (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        name TEXT NOT NULL UNIQUE,
        description TEXT NOT NULL DEFAULT '',
        source TEXT NOT NULL DEFAULT 'manual' CHECK (source IN ('manual','local','registry','npm','pypi','smithery')),
        command TEXT,
        args TEXT NOT NULL DEFAULT '[]',
        env TEXT NOT NULL DEFAULT '{}',
        tags TEXT NOT NULL DEFAULT '[]',
        package_name TEXT,
        package_version TEXT,
        transport TEXT NOT NULL DEFAULT 'stdio' CHECK (transport IN ('stdio','streamable-http','sse')),
        url TEXT,
        headers TEXT NOT NULL DEFAULT '{}',
        repository TEXT,
        homepage TEXT,
        installed INTEGER NOT NULL DEFAULT 1,
        active INTEGER NOT NULL DEFAULT 0,
        latest_version TEXT,
        last_health_check TEXT,
        health_status TEXT NOT NULL DEFAULT 'unknown' CHECK (health_status IN ('unknown','healthy','unhealthy')),
        error_count INTEGER NOT NULL DEFAULT 0,
        last_error TEXT,
        activate_timeout_ms INTEGER,
        call_timeout_ms INTEGER,
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
        updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
    );
    CREATE TABLE server_tools (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        name TEXT NOT NULL,
        description TEXT NOT NULL DEFAULT '',
        input_schema TEXT NOT NULL DEFAULT '{}',
        embedding BLOB,
        embedding_model TEXT,
        UNIQUE (server_id, name)
    );
    CREATE TABLE server_secrets (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        key TEXT NOT NULL,
        value BLOB NOT NULL,
        masked INTEGER NOT NULL DEFAULT 1,
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
        updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
        UNIQUE (server_id, key)
    );
    CREATE TABLE server_metrics (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        tool_name TEXT NOT NULL,
        call_count INTEGER NOT NULL DEFAULT 0,
        error_count INTEGER NOT NULL DEFAULT 0,
        total_latency_ms INTEGER NOT NULL DEFAULT 0,
        last_called_at TEXT,
        UNIQUE (server_id, tool_name)
    );
    CREATE INDEX server_tools_server ON server_tools(server_id);

    CREATE VIRTUAL TABLE servers_fts USING fts5(
        name, description, tags, content='servers', content_rowid='id', tokenize='unicode61 remove_diacritics 1'
    );
    CREATE TRIGGER servers_ai AFTER INSERT ON servers BEGIN
        INSERT INTO servers_fts(rowid, name, description, tags) VALUES (new.id, new.name, new.description, new.tags);
    END;
    CREATE TRIGGER servers_ad AFTER DELETE ON servers BEGIN
        INSERT INTO servers_fts(servers_fts, rowid, name, description, tags) VALUES ('delete', old.id, old.name, old.description, old.tags);
    END;
    CREATE TRIGGER servers_au AFTER UPDATE OF name, description, tags ON servers BEGIN
        INSERT INTO servers_fts(servers_fts, rowid, name, description, tags) VALUES ('delete', old.id, old.name, old.description, old.tags);
        INSERT INTO servers_fts(rowid, name, description, tags) VALUES (new.id, new.name, new.description, new.tags);
    END;

    CREATE VIRTUAL TABLE server_tools_fts USING fts5(
        name, description, content='server_tools', content_rowid='id', tokenize='unicode61 remove_diacritics 1'
    );
    CREATE TRIGGER server_tools_ai AFTER INSERT ON server_tools BEGIN
        INSERT INTO server_tools_fts(rowid, name, description) VALUES (new.id, new.name, new.description);
    END;
    CREATE TRIGGER server_tools_ad AFTER DELETE ON server_tools BEGIN
        INSERT INTO server_tools_fts(server_tools_fts, rowid, name, description) VALUES ('delete', old.id, old.name, old.description);
    END;
    CREATE TRIGGER server_tools_au AFTER UPDATE OF name, description ON server_tools BEGIN
        INSERT INTO server_tools_fts(server_tools_fts, rowid, name, description) VALUES ('delete', old.id, old.name, old.description);
        INSERT INTO server_tools_fts(rowid, name, description) VALUES (new.id, new.name, new.description);
    END;
    "#,
    // v2: tools are indexed with the Porter stemmer, so plural and inflected forms match as whole tokens (prefix
    // queries, which v1 needed for that, cost FTS5 a merge per term: ~30% of a find_tool query at 10k tools), and
    // segments are merged as soon as two of a level exist (automerge 2): tools arrive one server at a time, and a
    // query reads every segment (10-15% of a query at 10k tools with the default of 4).
    r#"
    DROP TRIGGER server_tools_ai;
    DROP TRIGGER server_tools_ad;
    DROP TRIGGER server_tools_au;
    DROP TABLE server_tools_fts;
    CREATE VIRTUAL TABLE server_tools_fts USING fts5(
        name, description, content='server_tools', content_rowid='id',
        tokenize='porter unicode61 remove_diacritics 1'
    );
    CREATE TRIGGER server_tools_ai AFTER INSERT ON server_tools BEGIN
        INSERT INTO server_tools_fts(rowid, name, description) VALUES (new.id, new.name, new.description);
    END;
    CREATE TRIGGER server_tools_ad AFTER DELETE ON server_tools BEGIN
        INSERT INTO server_tools_fts(server_tools_fts, rowid, name, description) VALUES ('delete', old.id, old.name, old.description);
    END;
    CREATE TRIGGER server_tools_au AFTER UPDATE OF name, description ON server_tools BEGIN
        INSERT INTO server_tools_fts(server_tools_fts, rowid, name, description) VALUES ('delete', old.id, old.name, old.description);
        INSERT INTO server_tools_fts(rowid, name, description) VALUES (new.id, new.name, new.description);
    END;
    INSERT INTO server_tools_fts(server_tools_fts) VALUES ('rebuild');
    INSERT INTO server_tools_fts(server_tools_fts, rank) VALUES ('automerge', 2);
    "#,
    // Issue 12 (integrity): tool pins (the approved and the last seen fingerprint and definition of each tool, the
    // rug-pull defence) and per-server allow/deny glob filters on tool names.
    r#"
    CREATE TABLE tool_pins (
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        tool TEXT NOT NULL,
        approved_fingerprint TEXT,
        approved_definition TEXT,
        approved_at TEXT,
        current_fingerprint TEXT NOT NULL,
        current_definition TEXT NOT NULL,
        seen_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
        PRIMARY KEY (server_id, tool)
    );
    CREATE TABLE tool_filters (
        server_id INTEGER PRIMARY KEY REFERENCES servers(id) ON DELETE CASCADE,
        allow TEXT NOT NULL DEFAULT '[]',
        deny TEXT NOT NULL DEFAULT '[]'
    );
    "#,
    // Issue 14 (batch introspection): the latest record per package key, linked to its catalog entry (a servers
    // row with installed = 0 whose tools are indexed beside installed ones).
    r#"
    CREATE TABLE introspections (
        key TEXT PRIMARY KEY,
        ecosystem TEXT NOT NULL,
        package TEXT NOT NULL,
        version TEXT,
        category TEXT NOT NULL,
        evidence TEXT NOT NULL DEFAULT '',
        hint TEXT NOT NULL DEFAULT '',
        pass INTEGER NOT NULL DEFAULT 1,
        tool_count INTEGER NOT NULL DEFAULT 0,
        duration_ms INTEGER NOT NULL DEFAULT 0,
        record TEXT NOT NULL,
        server_id INTEGER REFERENCES servers(id) ON DELETE SET NULL,
        introspected_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now'))
    );
    CREATE INDEX introspections_category ON introspections(category);
    CREATE INDEX introspections_server ON introspections(server_id);
    "#,
    // Issue 11 (OAuth): per-server OAuth records, each encrypted like a secret (AAD binds it to server and kind):
    // `tokens`, `client` (a registration, bound to its issuer) and `pending` (an authorization in progress, whose
    // authorize URL is also kept in clear to be shown).
    r#"
    CREATE TABLE server_oauth (
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        kind TEXT NOT NULL,
        value BLOB NOT NULL,
        auth_url TEXT,
        updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
        PRIMARY KEY (server_id, kind)
    );
    "#,
    // issue 10 (lifecycle): which config a server came from (`manual` or a client config file), and its one stored
    // status (seed 001's lifecycle plus `stopped`), with the authorization URL and error kind that go with it.
    r#"
    ALTER TABLE servers ADD COLUMN origin TEXT NOT NULL DEFAULT 'manual';
    ALTER TABLE servers ADD COLUMN status TEXT NOT NULL DEFAULT 'stopped'
        CHECK (status IN ('stopped','connecting','authenticating','ready','error','disabled'));
    ALTER TABLE servers ADD COLUMN auth_url TEXT;
    ALTER TABLE servers ADD COLUMN error_kind TEXT;
    CREATE INDEX servers_origin ON servers(origin);
    UPDATE servers SET status = 'ready' WHERE active = 1;
    "#,
    // issue 18 (protocol eras): the protocol revision the server's child last connected with (`2026-07-28` after
    // `server/discover`, else what `initialize` negotiated).
    r#"
    ALTER TABLE servers ADD COLUMN protocol TEXT;
    "#,
    // #15 (agents): A2A agents beside servers: added from a card URL or as a worker command agent-discover starts;
    // the card last read, auth headers sealed like secrets, a concurrency limit and the last probed status. Their
    // skills are indexed for find_tool (one row per skill, Porter-stemmed like the tool index).
    r#"
    CREATE TABLE agents (
        id TEXT PRIMARY KEY,
        url TEXT,
        command TEXT,
        args TEXT NOT NULL DEFAULT '[]',
        card TEXT,
        card_url TEXT,
        headers BLOB,
        max_concurrent INTEGER NOT NULL DEFAULT 4,
        status TEXT NOT NULL DEFAULT 'ready' CHECK (status IN ('ready','busy','unavailable')),
        last_error TEXT,
        created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
        updated_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')),
        CHECK ((url IS NULL) <> (command IS NULL))
    );
    CREATE VIRTUAL TABLE agent_skills_fts USING fts5(
        agent_id UNINDEXED, skill_id UNINDEXED, name, description, tags,
        tokenize='porter unicode61 remove_diacritics 1'
    );
    "#,
    // #16 (teams): the call log shared by a team's replicas (`calllog.rs` appends in batches; pruned by age). Each
    // process's own recent calls stay in its memory as before; this table is written only in team mode.
    r#"
    CREATE TABLE calls (
        id INTEGER PRIMARY KEY,
        replica TEXT NOT NULL,
        unix_ms INTEGER NOT NULL,
        server TEXT NOT NULL,
        tool TEXT NOT NULL,
        args TEXT NOT NULL,
        response TEXT NOT NULL,
        latency_ms INTEGER NOT NULL,
        success INTEGER NOT NULL
    );
    CREATE INDEX calls_by_time ON calls (unix_ms);
    "#,
    // #26 (sandbox): per-server sandbox settings as the user set them (the JSON of `SandboxSettings`: enabled,
    // network, extra read and write paths); a server without a row has the defaults.
    r#"
    CREATE TABLE server_sandbox (
        server_id INTEGER PRIMARY KEY REFERENCES servers(id) ON DELETE CASCADE,
        settings TEXT NOT NULL
    );
    "#,
    // #27 (scanner): the scanner's findings on a pin's current definition (JSON; NULL: none or not scanned) and who
    // approved it. Prompts and resource templates are pinned beside tools, as `prompt:NAME` and
    // `resource_template:NAME` (a colon is not a character of MCP tool names).
    r#"
    ALTER TABLE tool_pins ADD COLUMN findings TEXT;
    ALTER TABLE tool_pins ADD COLUMN approved_by TEXT;
    "#,
    // #27 (approvals): per-server approval policy rules (`target` is '' for the server-wide rule, `tool:NAME` for one
    // tool, `annotation:destructive` or `annotation:open_world` for tools that declare that hint), and the calls asked
    // of a person: pending until decided or past `deadline_ms`; an approval `once` becomes `used` when its call runs,
    // one for the `session` stays `approved` and lets the same digest pass for that session. Independent of any other
    // migration's number: it only creates its own tables.
    r#"
    CREATE TABLE tool_policies (
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        target TEXT NOT NULL,
        policy TEXT NOT NULL CHECK (policy IN ('allow','ask','deny')),
        set_at TEXT NOT NULL,
        PRIMARY KEY (server_id, target)
    );
    CREATE TABLE approvals (
        id TEXT PRIMARY KEY,
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL,
        digest TEXT NOT NULL,
        session_id TEXT,
        via TEXT NOT NULL CHECK (via IN ('elicitation','input','wait')),
        status TEXT NOT NULL CHECK (status IN ('pending','approved','denied','expired','used')),
        scope TEXT CHECK (scope IN ('once','session')),
        requested_at TEXT NOT NULL,
        deadline_ms INTEGER NOT NULL,
        decided_at TEXT,
        decided_by TEXT
    );
    CREATE INDEX approvals_by_status ON approvals (status, requested_at);
    CREATE INDEX approvals_by_digest ON approvals (digest, session_id);
    "#,
    // #30 (identity): who made each shared call: the user (`sub`, or `issuer#sub` for another issuer's) and the
    // OAuth client; NULL for a call without a validated access token (a single user, stdio, the CLI).
    r#"
    ALTER TABLE calls ADD COLUMN caller_user TEXT;
    ALTER TABLE calls ADD COLUMN caller_client TEXT;
    CREATE INDEX calls_by_user ON calls (caller_user, unix_ms);
    "#,
    // #31 (runtimes): which runtime last ran a server's child (JSON: kind, version, source).
    r#"
    CREATE TABLE server_runtime (
        server_id INTEGER PRIMARY KEY REFERENCES servers(id) ON DELETE CASCADE,
        runtime TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    "#,
    // Saved scripts: code-mode scripts served as the tools of the built-in server `scripts` (name, description, input
    // schema as JSON text, body, CPU limit); and a server's own paging limit for large tool results (bytes of text
    // that reach the agent before the rest is kept to be read in pages).
    r#"
    CREATE TABLE saved_scripts (
        name TEXT PRIMARY KEY,
        description TEXT NOT NULL,
        input_schema TEXT NOT NULL,
        code TEXT NOT NULL,
        timeout_ms INTEGER,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    CREATE TABLE server_paging (
        server_id INTEGER PRIMARY KEY REFERENCES servers(id) ON DELETE CASCADE,
        page_bytes INTEGER NOT NULL
    );
    "#,
    // Tool overrides: what the agent sees of a server's tool instead of its own definition (new name, title,
    // description, annotations, fixed and hidden parameters), a JSON body keyed by the tool's own name.
    r#"
    CREATE TABLE tool_overrides (
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        tool TEXT NOT NULL,
        body TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (server_id, tool)
    );
    "#,
    // Guards on calls: a server's own guard settings (the JSON of `GuardSettings`: arguments, result_secrets,
    // result_instructions, each `off`, `warn` or `block`); a server without a row follows the global settings.
    r#"
    CREATE TABLE server_guards (
        server_id INTEGER PRIMARY KEY REFERENCES servers(id) ON DELETE CASCADE,
        settings TEXT NOT NULL
    );
    "#,
    // Limits: per-server settings (JSON of `LimitSettings`), and the state replicas share in team mode: rate
    // buckets leased in batches, and each server's breaker opening. Only creates its own tables.
    r#"
    CREATE TABLE server_limits (
        server_id INTEGER PRIMARY KEY REFERENCES servers(id) ON DELETE CASCADE,
        settings TEXT NOT NULL
    );
    CREATE TABLE limit_buckets (
        key TEXT PRIMARY KEY,
        tokens REAL NOT NULL,
        updated_ms INTEGER NOT NULL
    );
    CREATE TABLE limit_breakers (
        server TEXT PRIMARY KEY,
        open_until_ms INTEGER NOT NULL,
        failures INTEGER NOT NULL
    );
    "#,
    // Profiles: a named set of servers and tool globs one client sees (the JSON of `ad_core::profile::Profile`).
    r#"
    CREATE TABLE profiles (
        name TEXT PRIMARY KEY,
        spec TEXT NOT NULL,
        updated_at TEXT NOT NULL
    );
    "#,
    // Each user's own secret values (sealed per user) and each server's rule for users without their own.
    r#"
    CREATE TABLE personal_secrets (
        server_id INTEGER NOT NULL REFERENCES servers(id) ON DELETE CASCADE,
        user_key TEXT NOT NULL,
        key TEXT NOT NULL,
        value BLOB NOT NULL,
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        PRIMARY KEY (server_id, user_key, key)
    );
    CREATE TABLE personal_settings (
        server_id INTEGER PRIMARY KEY REFERENCES servers(id) ON DELETE CASCADE,
        allow_shared INTEGER NOT NULL
    );
    "#,
];

pub const SCHEMA_VERSION: i64 = MIGRATIONS.len() as i64;

/// Applies the migrations this file lacks. Safe when several processes open a fresh file at once:
/// the check and the changes happen inside one IMMEDIATE transaction.
pub fn migrate(conn: &mut Connection) -> Result<()> {
    let current: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .db()?;
    if current >= SCHEMA_VERSION {
        return Ok(());
    }
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .db()?;
    let current: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0)).db()?;
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(current.max(0) as usize) {
        tx.execute_batch(sql).db()?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)
            .db()?;
    }
    tx.commit().db()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database written by v1 (prefix-matched, unstemmed tool index) is moved to the current schema with its tools
    /// still found, now by stemmed whole tokens.
    #[test]
    fn a_v1_database_is_migrated_and_its_tools_stay_searchable() {
        let mut conn = Connection::open_in_memory().unwrap();
        conn.execute_batch(MIGRATIONS[0]).unwrap();
        conn.pragma_update(None, "user_version", 1).unwrap();
        conn.execute_batch(
            "INSERT INTO servers (id, name) VALUES (1, 'stripe');
             INSERT INTO server_tools (server_id, name, description)
             VALUES (1, 'cancel_subscription', 'Cancels subscriptions of customers');",
        )
        .unwrap();
        migrate(&mut conn).unwrap();
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap();
        assert_eq!(version, SCHEMA_VERSION);
        let hits = |q: &str| -> i64 {
            conn.query_row(
                "SELECT count(*) FROM server_tools_fts WHERE server_tools_fts MATCH ?1",
                [q],
                |r| r.get(0),
            )
            .unwrap()
        };
        assert_eq!(hits("\"subscription\""), 1);
        assert_eq!(hits("\"customer\" AND \"cancelled\""), 1);
        assert_eq!(hits("\"invoice\""), 0);
        // The triggers were recreated with the table: new tools are indexed too.
        conn.execute(
            "INSERT INTO server_tools (server_id, name, description) VALUES (1, 'list_invoices', 'Lists invoices')",
            [],
        )
        .unwrap();
        assert_eq!(hits("\"invoice\""), 1);
    }
}
