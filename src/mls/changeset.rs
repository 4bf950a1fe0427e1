//! The changesets of the shared MLS state ([`super::shared`]): the rows a transaction
//! left behind, noted by temporary triggers and written out whole.
//!
//! Each replicated table gets a temporary table of touched primary keys and three
//! temporary triggers (insert, update, delete) that fill it; they live on this
//! connection only. At commit, each touched row is read back: present, it goes out
//! with every column; gone, as its key. Applying one is `INSERT OR REPLACE` or
//! `DELETE` per entry, in order.
//!
//! The encoding is hand-written because it is a few lines and serde formats at hand
//! (JSON) would carry blobs as number arrays; it is read only from our own database,
//! every read is checked against the length, and table names must be ones this
//! replica has:
//!
//! ```text
//! changeset := entry*
//! entry     := op:u8 (1 row, 2 deleted) table:bytes count:u16le value{count}
//! value     := 0 (null) | 1 i64le | 2 f64le | 3 bytes (text) | 4 bytes (blob)
//! bytes     := length:u32le data
//! ```

use rusqlite::types::Value;
use rusqlite::Connection;
use zeroize::Zeroizing;

/// One table's columns and primary key columns.
struct Table {
    name: String,
    columns: Vec<String>,
    key: Vec<String>,
}

fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

fn touched(table: &str) -> String {
    quote(&format!("mailseal_touched_{table}"))
}

fn describe(conn: &Connection, name: &str) -> rusqlite::Result<Table> {
    let mut st = conn.prepare(&format!("PRAGMA main.table_info({})", quote(name)))?;
    let mut columns = Vec::new();
    let mut key: Vec<(i64, String)> = Vec::new();
    let rows = st.query_map([], |r| Ok((r.get::<_, String>(1)?, r.get::<_, i64>(5)?)))?;
    for row in rows {
        let (column, pk) = row?;
        if pk > 0 {
            key.push((pk, column.clone()));
        }
        columns.push(column);
    }
    key.sort();
    Ok(Table {
        name: name.to_string(),
        columns,
        key: key.into_iter().map(|(_, c)| c).collect(),
    })
}

fn where_key(t: &Table) -> String {
    t.key
        .iter()
        .enumerate()
        .map(|(i, c)| format!("{} IS ?{}", quote(c), i + 1))
        .collect::<Vec<_>>()
        .join(" AND ")
}

/// Creates the touched-key tables and the triggers that fill them.
pub(crate) fn watch(conn: &Connection, tables: &[String]) -> Result<(), super::MlsError> {
    for name in tables {
        let t = describe(conn, name)?;
        if t.key.is_empty() {
            return Err(super::MlsError::State(format!(
                "shared MLS state: table {name} has no primary key"
            )));
        }
        let ks: Vec<String> = (0..t.key.len()).map(|i| format!("k{i}")).collect();
        let of = |row: &str| {
            t.key
                .iter()
                .map(|c| format!("{row}.{}", quote(c)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let (tt, tq) = (touched(name), quote(name));
        let note = |row: &str| format!("INSERT OR IGNORE INTO {tt} VALUES ({});", of(row));
        conn.execute_batch(&format!(
            "CREATE TEMP TABLE IF NOT EXISTS {tt} ({cols}, PRIMARY KEY ({cols}));
             CREATE TEMP TRIGGER IF NOT EXISTS {ti} AFTER INSERT ON main.{tq} BEGIN {new} END;
             CREATE TEMP TRIGGER IF NOT EXISTS {tu} AFTER UPDATE ON main.{tq} BEGIN {old} {new} END;
             CREATE TEMP TRIGGER IF NOT EXISTS {td} AFTER DELETE ON main.{tq} BEGIN {old} END;",
            cols = ks.join(", "),
            ti = quote(&format!("mailseal_touch_{name}_i")),
            tu = quote(&format!("mailseal_touch_{name}_u")),
            td = quote(&format!("mailseal_touch_{name}_d")),
            new = note("NEW"),
            old = note("OLD"),
        ))?;
    }
    Ok(())
}

/// Forgets the touched keys (after applying other processes' changes).
pub(crate) fn forget(conn: &Connection, tables: &[String]) -> rusqlite::Result<()> {
    for name in tables {
        conn.prepare_cached(&format!("DELETE FROM temp.{}", touched(name)))?
            .execute([])?;
    }
    Ok(())
}

/// The rows the open transaction touched, encoded; the notes cleared.
pub(crate) fn collect(
    conn: &Connection,
    tables: &[String],
) -> rusqlite::Result<Zeroizing<Vec<u8>>> {
    let mut out = Zeroizing::new(Vec::new());
    for name in tables {
        let keys: Vec<Vec<Value>> = {
            let mut st = conn.prepare_cached(&format!("SELECT * FROM temp.{}", touched(name)))?;
            let n = st.column_count();
            let rows = st.query_map([], |r| (0..n).map(|i| r.get::<_, Value>(i)).collect())?;
            rows.collect::<Result<_, _>>()?
        };
        if keys.is_empty() {
            continue;
        }
        let t = describe(conn, name)?;
        let select = format!(
            "SELECT {} FROM main.{} WHERE {}",
            t.columns
                .iter()
                .map(|c| quote(c))
                .collect::<Vec<_>>()
                .join(", "),
            quote(name),
            where_key(&t)
        );
        for key in keys {
            let mut st = conn.prepare_cached(&select)?;
            let mut rows = st.query(rusqlite::params_from_iter(key.iter()))?;
            match rows.next()? {
                Some(r) => {
                    let values: Vec<Value> = (0..t.columns.len())
                        .map(|i| r.get::<_, Value>(i))
                        .collect::<Result<_, _>>()?;
                    entry(&mut out, 1, name, &values);
                }
                None => entry(&mut out, 2, name, &key),
            }
        }
    }
    forget(conn, tables)?;
    Ok(out)
}

/// Every row of every table, as one changeset (a snapshot).
pub(crate) fn dump(conn: &Connection) -> rusqlite::Result<Zeroizing<Vec<u8>>> {
    let mut out = Zeroizing::new(Vec::new());
    for name in super::shared::replicated_tables(conn)? {
        let t = describe(conn, &name)?;
        let mut st = conn.prepare(&format!("SELECT * FROM main.{}", quote(&name)))?;
        let mut rows = st.query([])?;
        while let Some(r) = rows.next()? {
            let values: Vec<Value> = (0..t.columns.len())
                .map(|i| r.get::<_, Value>(i))
                .collect::<Result<_, _>>()?;
            entry(&mut out, 1, &name, &values);
        }
    }
    Ok(out)
}

fn bytes(out: &mut Vec<u8>, b: &[u8]) {
    out.extend_from_slice(&(b.len() as u32).to_le_bytes());
    out.extend_from_slice(b);
}

fn entry(out: &mut Vec<u8>, op: u8, table: &str, values: &[Value]) {
    out.push(op);
    bytes(out, table.as_bytes());
    out.extend_from_slice(&(values.len() as u16).to_le_bytes());
    for v in values {
        match v {
            Value::Null => out.push(0),
            Value::Integer(i) => {
                out.push(1);
                out.extend_from_slice(&i.to_le_bytes());
            }
            Value::Real(f) => {
                out.push(2);
                out.extend_from_slice(&f.to_le_bytes());
            }
            Value::Text(s) => {
                out.push(3);
                bytes(out, s.as_bytes());
            }
            Value::Blob(b) => {
                out.push(4);
                bytes(out, b);
            }
        }
    }
}

/// A reader over a changeset whose every step is checked against its length.
struct Reader<'a>(&'a [u8]);

fn bad(what: &str) -> rusqlite::Error {
    rusqlite::Error::InvalidParameterName(format!("shared MLS changeset: {what}"))
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> rusqlite::Result<&'a [u8]> {
        if self.0.len() < n {
            return Err(bad("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
    fn u8(&mut self) -> rusqlite::Result<u8> {
        Ok(self.take(1)?[0])
    }
    fn array<const N: usize>(&mut self) -> rusqlite::Result<[u8; N]> {
        let mut a = [0; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn bytes(&mut self) -> rusqlite::Result<&'a [u8]> {
        let n = u32::from_le_bytes(self.array()?) as usize;
        self.take(n)
    }
    fn value(&mut self) -> rusqlite::Result<Value> {
        Ok(match self.u8()? {
            0 => Value::Null,
            1 => Value::Integer(i64::from_le_bytes(self.array()?)),
            2 => Value::Real(f64::from_le_bytes(self.array()?)),
            3 => Value::Text(
                std::str::from_utf8(self.bytes()?)
                    .map_err(|_| bad("text is not UTF-8"))?
                    .to_string(),
            ),
            4 => Value::Blob(self.bytes()?.to_vec()),
            _ => return Err(bad("unknown value type")),
        })
    }
}

/// Applies a changeset in the caller's transaction.
pub(crate) fn apply(conn: &Connection, changeset: &[u8]) -> rusqlite::Result<()> {
    let tables = super::shared::replicated_tables(conn)?;
    let mut described: Vec<Table> = Vec::new();
    let mut r = Reader(changeset);
    while !r.0.is_empty() {
        let op = r.u8()?;
        let name = std::str::from_utf8(r.bytes()?).map_err(|_| bad("table name"))?;
        if !tables.iter().any(|t| t == name) {
            return Err(bad("a table this replica does not have"));
        }
        if !described.iter().any(|t| t.name == name) {
            described.push(describe(conn, name)?);
        }
        let t = described
            .iter()
            .find(|t| t.name == name)
            .ok_or_else(|| bad("table"))?;
        let count = u16::from_le_bytes(r.array()?) as usize;
        let values = (0..count)
            .map(|_| r.value())
            .collect::<rusqlite::Result<Vec<_>>>()?;
        let sql = match op {
            1 if count == t.columns.len() => format!(
                "INSERT OR REPLACE INTO main.{} ({}) VALUES ({})",
                quote(name),
                t.columns
                    .iter()
                    .map(|c| quote(c))
                    .collect::<Vec<_>>()
                    .join(", "),
                (1..=count)
                    .map(|i| format!("?{i}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            2 if count == t.key.len() => {
                format!("DELETE FROM main.{} WHERE {}", quote(name), where_key(t))
            }
            _ => return Err(bad("an entry that does not fit its table")),
        };
        conn.prepare_cached(&sql)?
            .execute(rusqlite::params_from_iter(values.iter()))?;
    }
    Ok(())
}

/// The fuzz target `mls_changeset`'s invariants, on an empty replica of the real
/// schema: a changeset applies whole or not at all (refused: the replica stays
/// empty); what applied, dumped and applied again to an empty replica, gives the same
/// rows (the encoder is the reference the decoder is held to). `Ok(true)` when it
/// applied, `Ok(false)` when it was refused whole, `Err` naming the invariant that
/// broke (the fuzz target panics on it: the fuzzer's signal; the library never does).
/// One replica per thread, emptied by rolling back each step, so a run costs no
/// schema migration.
#[doc(hidden)]
pub fn check(data: &[u8]) -> Result<bool, String> {
    thread_local! {
        static REPLICA: Result<super::state::State, String> =
            super::state::State::in_memory()
                .map_err(|e| format!("an empty replica: {e}"))
                .and_then(|state| {
                    super::shared::watch(&state.conn)
                        .map_err(|e| format!("triggers: {e}"))?;
                    Ok(state)
                });
    }
    REPLICA.with(|replica| {
        let conn = &replica.as_ref().map_err(Clone::clone)?.conn;
        let sql = |conn: &Connection, what: &str| {
            conn.execute_batch(what).map_err(|e| format!("{what}: {e}"))
        };
        let dumped = |conn: &Connection| dump(conn).map_err(|e| format!("dump: {e}"));
        let rolled_back = |conn: &Connection| {
            sql(conn, "ROLLBACK")?;
            if !dumped(conn)?.is_empty() {
                return Err("a rolled back replica has rows".to_string());
            }
            Ok(())
        };
        sql(conn, "BEGIN IMMEDIATE")?;
        if apply(conn, data).is_err() {
            rolled_back(conn)?;
            return Ok(false);
        }
        let rows = dumped(conn)?;
        rolled_back(conn)?;
        sql(conn, "BEGIN IMMEDIATE")?;
        apply(conn, &rows).map_err(|e| format!("a dump does not apply: {e}"))?;
        if *rows != *dumped(conn)? {
            return Err("a dump does not reproduce its rows".to_string());
        }
        rolled_back(conn)?;
        Ok(true)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = "CREATE TABLE mailseal_mls_a (id BLOB NOT NULL, n INTEGER NOT NULL, v, PRIMARY KEY (id, n)) WITHOUT ROWID;
         CREATE TABLE mailseal_mls_b (id INTEGER PRIMARY KEY AUTOINCREMENT, t TEXT);
         CREATE TABLE other (x PRIMARY KEY);";

    fn replica() -> Connection {
        let c = Connection::open_in_memory().unwrap();
        c.execute_batch(SCHEMA).unwrap();
        watch(&c, &crate::mls::shared::replicated_tables(&c).unwrap()).unwrap();
        c
    }

    fn tables(c: &Connection) -> Vec<String> {
        crate::mls::shared::replicated_tables(c).unwrap()
    }

    /// Inserts, updates (one changing its key), deletes and a REPLACE in one
    /// transaction: applied to a copy, the copy's rows are the original's.
    #[test]
    fn collected_changes_reproduce_the_rows() {
        let (a, b) = (replica(), replica());
        a.execute_batch(
            "BEGIN;
             INSERT INTO mailseal_mls_a VALUES (x'00ff', 1, 'one'), (x'00ff', 2, 2.5), (x'01', 1, NULL);
             INSERT INTO mailseal_mls_b (t) VALUES ('first'), ('second');
             INSERT INTO other VALUES (1);
             COMMIT;",
        )
        .unwrap();
        let first = collect(&a, &tables(&a)).unwrap();
        b.execute_batch("BEGIN").unwrap();
        apply(&b, &first).unwrap();
        b.execute_batch("COMMIT").unwrap();
        a.execute_batch(
            "BEGIN;
             UPDATE mailseal_mls_a SET v = x'deadbeef' WHERE n = 2;
             UPDATE mailseal_mls_a SET n = 7 WHERE id = x'01';
             DELETE FROM mailseal_mls_b WHERE t = 'first';
             INSERT OR REPLACE INTO mailseal_mls_b (id, t) VALUES (2, 'replaced');
             COMMIT;",
        )
        .unwrap();
        let second = collect(&a, &tables(&a)).unwrap();
        assert!(!second.is_empty());
        b.execute_batch("BEGIN").unwrap();
        apply(&b, &second).unwrap();
        b.execute_batch("COMMIT").unwrap();
        assert_eq!(*dump(&a).unwrap(), *dump(&b).unwrap());
        let other: i64 = b
            .query_row("SELECT count(*) FROM other", [], |r| r.get(0))
            .unwrap();
        assert_eq!(
            other, 0,
            "tables outside the replicated set are not carried"
        );
        // Nothing touched since: an empty changeset.
        assert!(collect(&a, &tables(&a)).unwrap().is_empty());
    }

    /// Every prefix of a changeset applies whole or is refused; a changeset naming a
    /// table the replica lacks, or a row that does not fit, is refused; nothing
    /// panics.
    #[test]
    fn fail_truncated_or_foreign_changesets_are_refused() {
        let a = replica();
        a.execute_batch(
            "INSERT INTO mailseal_mls_a VALUES (x'00', 1, 'v'), (x'01', 2, 3);
             INSERT INTO mailseal_mls_b (t) VALUES ('t');",
        )
        .unwrap();
        let full = dump(&a).unwrap();
        for cut in 0..full.len() {
            let b = replica();
            let _ = apply(&b, &full[..cut]);
        }
        let mut foreign = Vec::new();
        entry(&mut foreign, 1, "other", &[Value::Integer(1)]);
        assert!(apply(&replica(), &foreign).is_err());
        let mut short = Vec::new();
        entry(&mut short, 1, "mailseal_mls_a", &[Value::Integer(1)]);
        assert!(apply(&replica(), &short).is_err());
        let mut bad_op = Vec::new();
        entry(
            &mut bad_op,
            9,
            "mailseal_mls_b",
            &[Value::Integer(1), Value::Null],
        );
        assert!(apply(&replica(), &bad_op).is_err());
        assert!(apply(&replica(), &[1, 255, 255, 255, 255]).is_err());
    }
}
