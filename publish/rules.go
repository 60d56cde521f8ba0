package publish

import (
	"errors"
	"fmt"
	"path"
	"strings"

	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// Rule files at the root of a tree.
const (
	// LWWFile names paths where the newest edit wins instead of a line
	// merge: lockfiles, generated code, caches.
	LWWFile = ".lww"
	// IgnoreFile names paths that are never captured from a Workspace nor
	// checked at the gate: scratch, build output.
	IgnoreFile = ".layerfsignore"
)

// Rules is a gitignore-style pattern list. The last pattern that matches
// a path decides; a "!" pattern un-matches.
type Rules struct {
	patterns []pattern
}

type pattern struct {
	negate   bool
	dirOnly  bool
	anchored bool     // has a slash before its end: matches from the root
	parts    []string // the pattern split at "/"
}

// ParseRules reads gitignore syntax: blank lines and "#" comments are
// skipped; "!" negates; a trailing "/" matches directories only; a "/"
// elsewhere anchors the pattern at the root; "*", "?" and "[...]" match
// within a name and "**" across directories.
func ParseRules(text string) *Rules {
	r := &Rules{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimRight(line, " \t\r")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		r.add(line)
	}
	return r
}

func (r *Rules) add(line string) {
	var p pattern
	if strings.HasPrefix(line, "!") {
		p.negate, line = true, line[1:]
	} else if strings.HasPrefix(line, `\`) {
		line = line[1:] // \# and \! match those characters
	}
	if strings.HasSuffix(line, "/") {
		p.dirOnly, line = true, strings.TrimSuffix(line, "/")
	}
	if strings.Contains(line, "/") {
		p.anchored = true
	}
	line = strings.TrimPrefix(line, "/")
	if line == "" {
		return
	}
	p.parts = strings.Split(line, "/")
	r.patterns = append(r.patterns, p)
}

// Empty reports whether there are no rules.
func (r *Rules) Empty() bool { return r == nil || len(r.patterns) == 0 }

// Match reports whether the rules select path (slash-separated, relative
// to the root). A path below a selected directory is selected too.
func (r *Rules) Match(p string, isDir bool) bool {
	if r.Empty() {
		return false
	}
	parts := strings.Split(p, "/")
	// A directory that matches selects everything below it: check each
	// ancestor first, as git does.
	for i := 1; i < len(parts); i++ {
		if r.matchOne(parts[:i], true) {
			return true
		}
	}
	return r.matchOne(parts, isDir)
}

func (r *Rules) matchOne(parts []string, isDir bool) bool {
	matched := false
	for _, p := range r.patterns {
		if p.dirOnly && !isDir {
			continue
		}
		if p.matches(parts) {
			matched = !p.negate
		}
	}
	return matched
}

func (p *pattern) matches(parts []string) bool {
	if !p.anchored {
		return len(p.parts) == 1 && nameMatch(p.parts[0], parts[len(parts)-1])
	}
	return globParts(p.parts, parts)
}

// globParts matches pattern components against path components, "**"
// standing for any number of them.
func globParts(pat, parts []string) bool {
	if len(pat) == 0 {
		return len(parts) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(parts); i++ {
			if globParts(pat[1:], parts[i:]) {
				return true
			}
		}
		return false
	}
	return len(parts) > 0 && nameMatch(pat[0], parts[0]) && globParts(pat[1:], parts[1:])
}

func nameMatch(pat, name string) bool {
	ok, err := path.Match(pat, name)
	return err == nil && ok
}

// maxIncludes bounds %include chains in a rule file.
const maxIncludes = 16

// LoadRules reads a rule file from the tree root, following "%include
// <file>" lines (paths from the root) up to a bounded depth. A missing
// file is no rules.
func LoadRules(s *store.Store, root object.ID, file string) (*Rules, error) {
	return LoadRulesWith(func(p string) ([]byte, error) {
		e, err := s.Lookup(root, p)
		if errors.Is(err, store.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		if e.Type != store.TypeFile || e.Size > MaxRuleFile {
			return nil, nil
		}
		data, err := readAll(s, &e)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", p, err)
		}
		return data, nil
	}, file)
}

// MaxRuleFile: a rule file larger than this is no rules.
const MaxRuleFile = 1 << 20

// LoadRulesWith reads a rule file, and the files it includes, with read,
// which returns a file's content by its path from the root, or nil for
// one that is missing or not a regular file of at most MaxRuleFile bytes.
// Each file is read once, however often it is included, and at most
// maxRuleFiles files: a rule file is anyone's to write (a Workspace's
// command), and must not make its reader parse without end.
func LoadRulesWith(read func(path string) ([]byte, error), file string) (*Rules, error) {
	l := &ruleLoader{read: read, seen: map[string]bool{}, r: &Rules{}}
	err := l.load(file, 0)
	return l.r, err
}

// maxRuleFiles bounds the files one set of rules is read from.
const maxRuleFiles = 64

type ruleLoader struct {
	read func(string) ([]byte, error)
	seen map[string]bool
	r    *Rules
}

func (l *ruleLoader) load(file string, depth int) error {
	if depth > maxIncludes {
		return fmt.Errorf("%s: %%include nested more than %d deep: %w", file, maxIncludes, store.ErrBadPath)
	}
	if l.seen[file] {
		return nil // its rules are in already
	}
	if len(l.seen) == maxRuleFiles {
		return fmt.Errorf("%s: rules from more than %d files: %w", file, maxRuleFiles, store.ErrBadPath)
	}
	l.seen[file] = true
	data, err := l.read(file)
	if err != nil || data == nil {
		return err
	}
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if inc, ok := strings.CutPrefix(line, "%include "); ok {
			inc = strings.TrimPrefix(strings.TrimSpace(inc), "/")
			if err := l.load(inc, depth+1); err != nil {
				// Named, or a merge fails saying only "bad path".
				return fmt.Errorf("%s: %%include %s: %w", file, inc, err)
			}
			continue
		}
		if line != "" && !strings.HasPrefix(line, "#") {
			l.r.add(line)
		}
	}
	return nil
}
