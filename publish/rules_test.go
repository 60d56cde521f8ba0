package publish

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/store"
)

func TestRules(t *testing.T) {
	r := ParseRules(`
# lockfiles
package-lock.json
*.lock
/build/
gen/**/*.pb.go
node_modules/
!keep.lock
docs/*.md
`)
	for p, want := range map[string]bool{
		"package-lock.json":         true,
		"web/package-lock.json":     true,
		"Cargo.lock":                true,
		"a/b/yarn.lock":             true,
		"keep.lock":                 false,
		"build/out.o":               true,
		"src/build/out.o":           false,
		"gen/x/y/z.pb.go":           true,
		"gen/z.pb.go":               true,
		"other/gen/z.pb.go":         false,
		"node_modules/x/index.js":   true,
		"a/node_modules/x/index.js": true,
		"docs/readme.md":            true,
		"docs/sub/readme.md":        false,
		"src/main.go":               false,
		"package-lock.json.orig":    false,
		"build":                     false, // a file named build: dir-only rule
	} {
		if got := r.Match(p, false); got != want {
			t.Errorf("Match(%q) = %v, want %v", p, got, want)
		}
	}
	if !r.Match("build", true) {
		t.Error("the build directory itself")
	}
}

// Rules are read from each file once, and from at most maxRuleFiles: a
// rule file a Workspace's command wrote must not make the daemon parse
// without end.
func TestLoadRulesWithBoundsIncludes(t *testing.T) {
	reads := 0
	files := map[string]string{
		".layerfsignore": strings.Repeat("%include b\n", 10000) + "*.o\n",
		"b":              "%include b\n%include .layerfsignore\nbuild/\n",
	}
	for i := range maxRuleFiles + 1 {
		files["many"] += fmt.Sprintf("%%include f%d\n", i)
	}
	read := func(p string) ([]byte, error) {
		reads++
		if data, ok := files[p]; ok {
			return []byte(data), nil
		}
		return nil, nil
	}
	r, err := LoadRulesWith(read, ".layerfsignore")
	if err != nil || reads != 2 || !r.Match("x.o", false) || !r.Match("build", true) || r.Match("src", true) {
		t.Fatalf("rules %v, %v after %d reads; want *.o and build/ from 2", r, err, reads)
	}
	if _, err := LoadRulesWith(read, "many"); err == nil || !strings.Contains(err.Error(), "more than") {
		t.Fatalf("%d includes: %v; want refused", maxRuleFiles+1, err)
	}
}

// TestLoadRulesNamesABadInclude: an include that names no path in the tree
// is refused, naming the rule file and the line, not as a bare "bad path".
func TestLoadRulesNamesABadInclude(t *testing.T) {
	r := newRepo(t, map[string]string{".lww": "%include ../shared\n*.lock\n"})
	c, err := r.s.Commit(r.head())
	if err != nil {
		t.Fatal(err)
	}
	_, err = LoadRules(r.s, c.Tree, LWWFile)
	if !errors.Is(err, store.ErrBadPath) || !strings.Contains(err.Error(), ".lww: %include ../shared") {
		t.Fatalf("LoadRules: %v; want a bad path naming .lww's include", err)
	}
}
