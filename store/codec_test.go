package store

import (
	"bytes"
	"compress/gzip"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/object"
)

func TestLooksRandom(t *testing.T) {
	random := make([]byte, 16<<10)
	rand.New(rand.NewSource(1)).Read(random)
	// Compressed text: Go's own sources, gzipped.
	var gz bytes.Buffer
	w, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	names, _ := filepath.Glob("../*/*.go")
	for _, name := range names {
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		w.Write(src)
	}
	w.Close()
	if gz.Len() < 16<<10 {
		t.Fatalf("%d bytes of gzipped sources: too few", gz.Len())
	}
	exe, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Skip(err)
	}
	text := []byte(strings.Repeat("func (s *Store) Get(id object.ID, k object.Kind) ([]byte, error) {\n", 300))
	for _, c := range []struct {
		name string
		data []byte
		want bool
	}{
		{"random", random, true},
		{"gzip", gz.Bytes()[gz.Len()-16<<10:], true},
		{"text", text[:16<<10], false},
		{"zeros", make([]byte, 16<<10), false},
		{"machine code", exe[len(exe)/3:][:16<<10], false},
		{"small", random[:4<<10], false},
	} {
		if got := looksRandom(c.data); got != c.want {
			t.Errorf("%s: looksRandom = %v, want %v", c.name, got, c.want)
		}
	}
	c, err := newCodec()
	if err != nil {
		t.Fatal(err)
	}
	if enc, data := c.compress(random, object.KindChunk); enc != encRaw || !bytes.Equal(data, random) {
		t.Errorf("random chunk: encoding %d, want raw", enc)
	}
	if enc, _ := c.compress(text[:16<<10], object.KindChunk); enc != encZstd {
		t.Errorf("text chunk: encoding %d, want zstd", enc)
	}
}
