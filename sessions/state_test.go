package sessions

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestOverwriteRecord: a record written over a longer one in place reads
// back as the new one, the old one's tail blanked, not left behind.
func TestOverwriteRecord(t *testing.T) {
	dir := t.TempDir()
	long := &record{ID: "ws-1", Branch: "main", Lease: strings.Repeat("ab", 32), Path: "/a/very/long/path/indeed", Gen: 7}
	if err := long.save(dir); err != nil {
		t.Fatal(err)
	}
	short := &record{ID: "ws-1", Branch: "main", Lease: strings.Repeat("cd", 32), Path: "/w", Gen: 8}
	data, _ := jsonRecord(short)
	if err := overwriteRecord(filepath.Join(dir, "state.json"), data); err != nil {
		t.Fatal(err)
	}
	got, err := loadRecord(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Gen != 8 || got.Path != "/w" || got.Lease != short.Lease {
		t.Fatalf("read back %+v", got)
	}
	if fi, _ := os.Stat(filepath.Join(dir, "state.json")); fi.Size() < int64(len(data)) {
		t.Fatalf("size %d", fi.Size())
	}
}

// TestOverwriteRecordKeepsToItsBlocks: a record longer than the blocks
// the old one has is refused, the old one left whole.
func TestOverwriteRecordKeepsToItsBlocks(t *testing.T) {
	dir := t.TempDir()
	r := &record{ID: "ws-1", Branch: "main", Lease: strings.Repeat("ab", 32), Path: "/w"}
	if err := r.save(dir); err != nil {
		t.Fatal(err)
	}
	long := *r
	for i := 0; i < 200; i++ {
		long.Unsettled = append(long.Unsettled, unsettledPath{Path: strings.Repeat("p", 40), Kind: "binary", Head: "0123456789ab", Ours: "file 644"})
	}
	data, _ := jsonRecord(&long)
	if err := overwriteRecord(filepath.Join(dir, "state.json"), data); err == nil {
		t.Fatal("a record past the file's blocks was written in place")
	}
	if got, err := loadRecord(dir); err != nil || len(got.Unsettled) != 0 {
		t.Fatalf("the old record after the refusal: %+v %v", got, err)
	}
}
