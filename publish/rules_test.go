package publish

import "testing"

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
