package store

import (
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/object"
)

func TestOpenMissingStoreWithoutCreate(t *testing.T) {
	_, err := Open(filepath.Join(t.TempDir(), "none.layerfs"), Options{})
	if !errors.Is(err, ErrNotFound) {
		t.Fatalf("open missing store: got %v, want ErrNotFound", err)
	}
	if !strings.Contains(err.Error(), "layerfs init") {
		t.Errorf("error should say how to create a Store: %v", err)
	}
}

func TestOpenUnsupportedFilesystem(t *testing.T) {
	for _, dir := range []string{"/proc", "/sys"} {
		_, err := Open(filepath.Join(dir, "x.layerfs"), Options{Create: true})
		if !errors.Is(err, ErrUnsupported) {
			t.Fatalf("open under %s: got %v, want ErrUnsupported", dir, err)
		}
		if name := filepath.Base(dir); !strings.Contains(err.Error(), map[string]string{"proc": "proc", "sys": "sysfs"}[name]) {
			t.Errorf("error should name the filesystem found: %v", err)
		}
	}
}

func TestReopenKeepsData(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.layerfs")
	s, err := Open(path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	b := s.NewBatch()
	id, _ := b.Put(object.KindChunk, []byte("hello"))
	if err := b.Flush(); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = Open(path, Options{Durability: Full})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.Get(id, object.KindChunk)
	if err != nil || string(got) != "hello" {
		t.Fatalf("after reopen: %q %v", got, err)
	}
}

// TestOpenOddNames: a Store's file is the one named, whatever the name
// holds; SQLite's URI filenames read '#', '?' and %HH otherwise.
func TestOpenOddNames(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"proj#1.layerfs", "what?.layerfs", "x%41.layerfs", "sp ace&=;.layerfs"} {
		path := filepath.Join(dir, name)
		s, err := Open(path, Options{Create: true})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b := s.NewBatch()
		id, _ := b.Put(object.KindChunk, []byte(name))
		if err := b.Flush(); err != nil {
			t.Fatal(err)
		}
		s.Close()
		if _, err := os.Stat(path); err != nil {
			t.Errorf("%s: no file of that name: %v", name, err)
		}
		s, err = Open(path, Options{})
		if err != nil {
			t.Fatalf("%s: reopen: %v", name, err)
		}
		if got, err := s.Get(id, object.KindChunk); err != nil || string(got) != name {
			t.Errorf("%s: reopened, read %q %v", name, got, err)
		}
		s.Close()
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !strings.Contains(e.Name(), ".layerfs") {
			t.Errorf("a file no Store was named: %q", e.Name())
		}
	}
}

// TestOpenEmptyFile: opening an empty file, not to create a Store, does
// not make one of it.
func TestOpenEmptyFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, Options{}); !errors.Is(err, ErrNotStore) {
		t.Errorf("open of an empty file: %v, want ErrNotStore", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Errorf("the empty file after the open: %v %v", fi.Size(), err)
	}
	s, err := Open(path, Options{Create: true}) // init may
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}

func TestOpenRefusesNewerFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.layerfs")
	s, err := Open(path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.Exec(`PRAGMA user_version = 99`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	_, err = Open(path, Options{})
	if !errors.Is(err, ErrNewerFormat) || !strings.Contains(err.Error(), "99") {
		t.Fatalf("open newer format: got %v, want ErrNewerFormat naming format 99", err)
	}
}

func TestOpenRefusesNonStores(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("not sqlite at all ", 300)), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(garbage, Options{}); !errors.Is(err, ErrNotStore) {
		t.Errorf("open garbage file: got %v, want ErrNotStore", err)
	}
	other := filepath.Join(dir, "other.db")
	db, err := sql.Open("sqlite", other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`CREATE TABLE t(x)`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(other, Options{}); !errors.Is(err, ErrNotStore) {
		t.Errorf("open foreign sqlite db: got %v, want ErrNotStore", err)
	}
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrNotStore) {
		t.Errorf("open a directory: got %v, want ErrNotStore", err)
	}
}

func TestParseDurability(t *testing.T) {
	for _, d := range []Durability{Fast, Normal, Full} {
		got, err := ParseDurability(d.String())
		if err != nil || got != d {
			t.Errorf("ParseDurability(%q) = %v, %v", d, got, err)
		}
	}
	if _, err := ParseDurability("sometimes"); err == nil {
		t.Error("ParseDurability accepted a bad name")
	}
}

// TestOpenMigratesFormat1: a Store written at format 1 (before blame)
// gains the blame table on open and keeps its objects.
func TestOpenMigratesFormat1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.layerfs")
	s, err := Open(path, Options{Create: true})
	if err != nil {
		t.Fatal(err)
	}
	id := putFlush(t, s, object.KindChunk, []byte("kept across the migration"))
	for _, q := range []string{`DROP TABLE blame`, `DROP TABLE leases`, `DROP TABLE lww`, `ALTER TABLE manifest DROP COLUMN squashed_into`, `PRAGMA user_version = 1`, `UPDATE meta SET value = '1' WHERE key = 'version'`} {
		if _, err := s.w.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	s, err = Open(path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Meta("version") != fmt.Sprint(FormatVersion) {
		t.Errorf("meta version %q after migration", s.Meta("version"))
	}
	if _, err := s.Blame("x", id); err != nil {
		t.Errorf("blame table after migration: %v", err)
	}
	if got, err := s.Get(id, object.KindChunk); err != nil || string(got) != "kept across the migration" {
		t.Errorf("object after migration: %q %v", got, err)
	}
}
