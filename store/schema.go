package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
)

// FormatVersion is the Store's on-disk format, kept in PRAGMA user_version
// and in meta. Bump it with every schema change and add a migration.
const FormatVersion = 5

// schemaV1 creates a fresh Store. Objects and packs are append-only: the
// triggers make SQLite itself refuse to rewrite history.
const schemaV1 = `
CREATE TABLE meta (
	key   TEXT PRIMARY KEY,
	value TEXT NOT NULL
);

CREATE TABLE packs (
	id           INTEGER PRIMARY KEY,
	created      INTEGER NOT NULL,
	sealed       INTEGER NOT NULL DEFAULT 0,
	objects      INTEGER NOT NULL DEFAULT 0,
	raw_bytes    INTEGER NOT NULL DEFAULT 0,
	stored_bytes INTEGER NOT NULL DEFAULT 0
);

CREATE TABLE objects (
	seq    INTEGER PRIMARY KEY,
	id     BLOB NOT NULL UNIQUE,
	kind   INTEGER NOT NULL,
	size   INTEGER NOT NULL,
	enc    INTEGER NOT NULL,
	base   BLOB,
	depth  INTEGER NOT NULL DEFAULT 0,
	pack   INTEGER NOT NULL,
	data   BLOB NOT NULL
);

CREATE TABLE branches (
	name    TEXT PRIMARY KEY,
	head    BLOB NOT NULL,
	start   TEXT NOT NULL,
	created INTEGER NOT NULL,
	updated INTEGER NOT NULL
);

CREATE TABLE manifest (
	seq       INTEGER PRIMARY KEY,
	layer     BLOB NOT NULL,
	commit_id BLOB NOT NULL,
	created   INTEGER NOT NULL
);

CREATE TRIGGER objects_append_only_update BEFORE UPDATE ON objects
BEGIN SELECT RAISE(ABORT, 'layerfs: objects are append-only'); END;

CREATE TRIGGER objects_append_only_delete BEFORE DELETE ON objects
BEGIN SELECT RAISE(ABORT, 'layerfs: objects are append-only'); END;

CREATE TRIGGER objects_into_open_pack BEFORE INSERT ON objects
WHEN (SELECT sealed FROM packs WHERE id = NEW.pack) IS NOT 0
BEGIN SELECT RAISE(ABORT, 'layerfs: objects go only into an open pack'); END;

CREATE TRIGGER packs_sealed BEFORE UPDATE ON packs WHEN OLD.sealed != 0
BEGIN SELECT RAISE(ABORT, 'layerfs: sealed packs are append-only'); END;

CREATE TRIGGER packs_append_only_delete BEFORE DELETE ON packs
WHEN OLD.sealed != 0
BEGIN SELECT RAISE(ABORT, 'layerfs: packs are append-only'); END;
`

// migrations[v] upgrades a Store from format v to v+1. A new Store is
// made at format 1 and migrated up, so every path through the schema is
// the same one.
var migrations = map[int]string{
	// 2: line ownership (blame), an audit kept apart from the objects so it
	// survives squashing; rows are appended after their Commit lands.
	1: `
CREATE TABLE blame (
	seq       INTEGER PRIMARY KEY,
	path      TEXT NOT NULL,
	content   BLOB NOT NULL,
	commit_id BLOB NOT NULL,
	data      BLOB NOT NULL
);
CREATE INDEX blame_path_content ON blame(path, content);
`,
	// 3: leases, so every process sees which Commits Workspaces pin.
	2: `
CREATE TABLE leases (
	id        TEXT PRIMARY KEY,
	commit_id BLOB NOT NULL,
	branch    TEXT NOT NULL,
	holder    TEXT NOT NULL,
	created   INTEGER NOT NULL,
	updated   INTEGER NOT NULL
);
`,
	// 4: .lww decisions kept with their Commit; squashed layers stay in the
	// manifest, hidden, so L<n> of a squashed layer still resolves.
	3: `
CREATE TABLE lww (
	commit_id  BLOB NOT NULL,
	path       TEXT NOT NULL,
	winner     TEXT NOT NULL,
	ours_mtime INTEGER NOT NULL,
	head_mtime INTEGER NOT NULL,
	PRIMARY KEY (commit_id, path)
);
ALTER TABLE manifest ADD COLUMN squashed_into INTEGER;
`,
	// 5: large directories are cut into nodes (tree_nodes.go). Trees
	// written before stay as they are — one leaf each, which every reader
	// of format 5 reads — so nothing is rewritten; the cut is recorded.
	4: `INSERT OR REPLACE INTO meta(key, value) VALUES('trees', '` + treeSpec() + `');`,
}

// prepareSchema creates the schema in an empty file, migrates an older one,
// and refuses a newer one or a database that is not a Store.
func prepareSchema(ctx context.Context, db *sql.DB, meta map[string]string) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	var version, tables int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return err
	}
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema`).Scan(&tables); err != nil {
		return err
	}
	switch {
	case version == 0 && tables == 0:
		if err := createSchema(ctx, tx, meta); err != nil {
			return err
		}
	case version == 0:
		return fmt.Errorf("%w: it has tables but no layerfs format version", ErrNotStore)
	case version > FormatVersion:
		return fmt.Errorf("%w: the Store has format %d, this layerfs reads up to %d; upgrade layerfs",
			ErrNewerFormat, version, FormatVersion)
	default:
		if err := checkMeta(ctx, tx); err != nil {
			return err
		}
		if err := migrate(ctx, tx, version); err != nil {
			return err
		}
	}
	return tx.Commit()
}

func createSchema(ctx context.Context, tx *sql.Tx, meta map[string]string) error {
	if _, err := tx.ExecContext(ctx, schemaV1); err != nil {
		return fmt.Errorf("create schema: %w", err)
	}
	meta["format"] = "layerfs"
	meta["version"] = "1"
	for k, v := range meta {
		if _, err := tx.ExecContext(ctx, `INSERT INTO meta(key, value) VALUES(?, ?)`, k, v); err != nil {
			return fmt.Errorf("write meta %s: %w", k, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `PRAGMA user_version = 1`); err != nil {
		return err
	}
	return migrate(ctx, tx, 1)
}

func checkMeta(ctx context.Context, tx *sql.Tx) error {
	var format string
	err := tx.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'format'`).Scan(&format)
	if err != nil || format != "layerfs" {
		return fmt.Errorf("%w: no layerfs format mark", ErrNotStore)
	}
	return nil
}

func migrate(ctx context.Context, tx *sql.Tx, from int) error {
	for v := from; v < FormatVersion; v++ {
		step, ok := migrations[v]
		if !ok {
			return fmt.Errorf("%w: no migration from format %d", ErrNewerFormat, v)
		}
		if _, err := tx.ExecContext(ctx, step); err != nil {
			return fmt.Errorf("migrate format %d to %d: %w", v, v+1, err)
		}
	}
	if from == FormatVersion {
		return nil
	}
	if _, err := tx.ExecContext(ctx, `UPDATE meta SET value = ? WHERE key = 'version'`, strconv.Itoa(FormatVersion)); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, FormatVersion))
	return err
}
