package publish

import (
	"bytes"
	"fmt"
	"sort"
	"strings"

	"github.com/layerfs/layerfs/extents"
	"github.com/layerfs/layerfs/object"
	"github.com/layerfs/layerfs/store"
)

// Why a path could not be merged.
const (
	ConflictText   = "text"   // overlapping line edits
	ConflictBinary = "binary" // both sides changed a binary (or very large) file
	ConflictType   = "type"   // file, directory and symlink do not mix
	ConflictDelete = "delete" // one side deleted what the other changed
	ConflictMode   = "mode"   // both sides changed the mode, differently
)

// maxMergeBytes: larger files are not merged line by line.
const maxMergeBytes = 8 << 20

// PathConflict is one path both sides changed in a way that does not merge.
type PathConflict struct {
	Path string `json:"path"`
	Kind string `json:"kind"`
	// Merge holds the line merge of a text conflict (markers come from it),
	// and HeadEntry the head's entry for the path (nil: head deleted it).
	Merge     *Merged      `json:"-"`
	HeadEntry *store.Entry `json:"-"`
}

// MergedPath is a path whose line edits from both sides merged cleanly.
type MergedPath struct {
	Path    string       `json:"path"`
	Content []byte       `json:"-"` // the merged text
	Entry   *store.Entry `json:"-"` // the merged entry
}

// mergeInfo is what blame needs to credit a merged file's lines.
type mergeInfo struct {
	merged            *Merged
	base, head, ours  *store.Entry
	baseV, headV, ouV *version
	result            object.ID // the merged content
	// baseAt and headAt are the Commits whose trees hold base and head,
	// for ownership not recorded yet (ownershipOf).
	baseAt, headAt object.ID
}

// reconciled is the changeset after the gate looked at what head did.
type reconciled struct {
	base, head object.ID // the Commits compared
	changes    []Change
	conflicts  []PathConflict
	merged     []MergedPath
	lww        []store.LWWDecision
	merges     map[string]*mergeInfo
}

// reconcile compares every touched path at base and head. Paths head left
// alone pass; those it changed the same way keep head's entry; .lww paths
// go to the newer side; text both sides edited is merged line by line;
// the rest conflicts.
func (g *gate) reconcile(base, head object.ID) (*reconciled, error) {
	bc, err := g.s.Commit(base)
	if err != nil {
		return nil, fmt.Errorf("base %s: %w", base.Short(), err)
	}
	hc, err := g.s.Commit(head)
	if err != nil {
		return nil, fmt.Errorf("head %s: %w", head.Short(), err)
	}
	r := &reconciled{base: base, head: head, merges: map[string]*mergeInfo{}}
	if bc.Tree == hc.Tree {
		r.changes = g.cs.Changes
		return r, nil
	}
	rules, err := g.loadRules(bc.Tree, hc.Tree)
	if err != nil {
		return nil, err
	}
	for i := range g.cs.Changes {
		c := g.cs.Changes[i]
		keep, err := g.reconcileOne(r, &c, bc.Tree, hc, rules)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", c.Path, err)
		}
		if keep {
			r.changes = append(r.changes, c)
		}
	}
	sort.Slice(r.conflicts, func(i, j int) bool { return r.conflicts[i].Path < r.conflicts[j].Path })
	return r, nil
}

// gateRules are the head's .lww rules, and the ignore rules of both the
// base and the head: a path goes unvalidated only where both ignore it. A
// path the head has just begun to ignore is one it may have removed or
// changed on the way, as a tracked path, which ours must not undo unseen.
type gateRules struct{ lww, ignore, ignoreBase *Rules }

func (g *gate) loadRules(base, head object.ID) (gateRules, error) {
	var r gateRules
	var err error
	if r.lww, err = LoadRules(g.s, head, LWWFile); err != nil {
		return r, err
	}
	if r.ignore, err = LoadRules(g.s, head, IgnoreFile); err != nil {
		return r, err
	}
	r.ignoreBase, err = LoadRules(g.s, base, IgnoreFile)
	return r, err
}

// ignored reports whether both the base's and the head's rules ignore p.
func (r gateRules) ignored(p string, isDir bool) bool {
	return r.ignore.Match(p, isDir) && r.ignoreBase.Match(p, isDir)
}

// reconcileOne decides one change; it reports whether the (possibly
// rewritten) change still applies.
func (g *gate) reconcileOne(r *reconciled, c *Change, baseTree object.ID, hc *store.Commit, rules gateRules) (bool, error) {
	be, err := LookupEntry(g.s, baseTree, c.Path)
	if err != nil {
		return false, err
	}
	he, err := LookupEntry(g.s, hc.Tree, c.Path)
	if err != nil {
		return false, err
	}
	fb, fh, fo := fpOrZero(be), fpOrZero(he), fpOrZero(c.Entry)
	switch {
	case fb == fh:
		return true, nil // head left it alone
	case fo == fh:
		// Head made the same change: its entry stands as it is, mtime and
		// owner included. Ours, landed, was a change of mtime alone,
		// which a diff listed as modified with nothing to show.
		return false, nil
	case g.cs.StaysRemoved(c, be, he):
		return false, nil
	case metaOnly(c) && (he == nil || he.Type == store.TypeDir):
		return true, nil // a directory kept or made: below it both may change
	case rules.ignored(c.Path, isDir(c.Entry) || isDir(he)):
		return true, nil // ignored paths are not validated
	case rules.lww.Match(c.Path, isDir(c.Entry) || isDir(he)):
		return g.lastWriterWins(r, c, he, hc), nil
	}
	return g.merge(r, c, be, he)
}

// StaysRemoved reports whether c, one of cs's changes, leaves the head's
// removal of its path standing: the base held the path (be), the head
// removed it (he is nil), and ours only touched a directory's metadata
// there (an ignored file made in it, say) and adds nothing below it. The
// gate drops such a change, which would bring back an empty directory;
// a Workspace's rebase drops its directory likewise.
func (cs *Changeset) StaysRemoved(c *Change, be, he *store.Entry) bool {
	return metaOnly(c) && he == nil && be != nil && !cs.addsBelow(c.Path)
}

// addsBelow reports whether the changeset puts anything below dir: not a
// deletion, nor a directory's metadata alone.
func (cs *Changeset) addsBelow(dir string) bool {
	for i := range cs.Changes {
		c := &cs.Changes[i]
		if c.Entry != nil && !metaOnly(c) && strings.HasPrefix(c.Path, dir+"/") {
			return true
		}
	}
	return false
}

func fpOrZero(e *store.Entry) Fingerprint {
	if e == nil {
		return Fingerprint{}
	}
	return fingerprintOf(e)
}

func isDir(e *store.Entry) bool { return e != nil && e.Type == store.TypeDir }

// lastWriterWins keeps the side with the newer mtime (ours on a tie); a
// deletion counts as made when its commit was.
func (g *gate) lastWriterWins(r *reconciled, c *Change, he *store.Entry, hc *store.Commit) bool {
	d := store.LWWDecision{Path: c.Path, OursMTime: g.meta.Time, HeadMTime: hc.Time}
	if c.Entry != nil {
		d.OursMTime = c.Entry.MTime
	}
	if he != nil {
		d.HeadMTime = he.MTime
	}
	d.Winner = store.LWWOurs
	if d.HeadMTime > d.OursMTime {
		d.Winner = store.LWWHead
	}
	r.lww = append(r.lww, d)
	return d.Winner == store.LWWOurs
}

// merge tries a three-way line merge of a file both sides changed.
func (g *gate) merge(r *reconciled, c *Change, be, he *store.Entry) (bool, error) {
	conflict := func(kind string) (bool, error) {
		r.conflicts = append(r.conflicts, PathConflict{Path: c.Path, Kind: kind, HeadEntry: he})
		return false, nil
	}
	oe := c.Entry
	switch {
	case oe == nil || he == nil:
		return conflict(ConflictDelete)
	case be == nil && (oe.Type != he.Type):
		return conflict(ConflictType)
	case be != nil && (oe.Type != be.Type || he.Type != be.Type):
		return conflict(ConflictType)
	case oe.Type != store.TypeFile || he.Type != store.TypeFile:
		return conflict(ConflictType) // symlinks or whole trees placed: no merge
	}
	mode, ok := mergeMode(be, he, oe)
	if !ok {
		return conflict(ConflictMode)
	}
	mi, err := g.loadVersions(be, he, oe)
	if err != nil {
		return false, err
	}
	if mi == nil {
		return conflict(ConflictBinary)
	}
	mi.baseAt, mi.headAt = r.base, r.head
	mi.merged = Merge3(linesOf(mi.baseV), mi.ouV.lines, mi.headV.lines)
	if !mi.merged.Clean() {
		r.conflicts = append(r.conflicts, PathConflict{Path: c.Path, Kind: ConflictText, Merge: mi.merged, HeadEntry: he})
		return false, nil
	}
	return true, g.takeMerged(r, c, mi, mode)
}

// mergeMode merges the permission bits: the side that changed them wins;
// both changing them differently conflicts.
func mergeMode(be, he, oe *store.Entry) (uint32, bool) {
	baseMode := oe.Mode
	if be != nil {
		baseMode = be.Mode
	}
	switch {
	case oe.Mode == baseMode || oe.Mode == he.Mode:
		return he.Mode, true
	case he.Mode == baseMode:
		return oe.Mode, true
	}
	return 0, false
}

// loadVersions reads the three versions; nil when one is not mergeable
// text.
func (g *gate) loadVersions(be, he, oe *store.Entry) (*mergeInfo, error) {
	mi := &mergeInfo{base: be, head: he, ours: oe}
	for _, e := range []*store.Entry{be, he, oe} {
		if e != nil && e.Size > maxMergeBytes {
			return nil, nil
		}
	}
	var err error
	if be != nil {
		if mi.baseV, err = loadVersion(g.s, be); err != nil {
			return nil, err
		}
	}
	if mi.headV, err = loadVersion(g.s, he); err != nil {
		return nil, err
	}
	if mi.ouV, err = loadVersion(g.content, oe); err != nil {
		return nil, err
	}
	if (mi.baseV != nil && mi.baseV.binary) || mi.headV.binary || mi.ouV.binary {
		return nil, nil
	}
	return mi, nil
}

func linesOf(v *version) []string {
	if v == nil {
		return nil
	}
	return v.lines
}

// takeMerged stores the merged text and rewrites the change to land it.
func (g *gate) takeMerged(r *reconciled, c *Change, mi *mergeInfo, mode uint32) error {
	data := []byte(strings.Join(mi.merged.Lines, ""))
	f, err := extents.WriteBytes(g.trees, data)
	if err != nil {
		return err
	}
	e := *c.Entry
	e.ID, e.Size, e.Mode, e.MTime = f.ID, f.Size, mode, g.meta.Time
	c.Entry = &e
	r.merged = append(r.merged, MergedPath{Path: c.Path, Content: data, Entry: &e})
	mi.result = e.ID
	r.merges[c.Path] = mi
	return nil
}

func conflictPaths(cs []PathConflict) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Path
	}
	return out
}

// ErrMarkers: a file about to land still holds conflict markers.
var ErrMarkers = fmt.Errorf("conflict markers left in the file: resolve them, or commit with force (ws commit --force, \"force\": true)")

// checkMarkers refuses text files that still hold a complete marker block
// as the gate writes them.
func (g *gate) checkMarkers(changes []Change) error {
	var bad []string
	for i := range changes {
		e := changes[i].Entry
		if e == nil || e.Type != store.TypeFile || e.Size > maxMergeBytes || e.Size < int64(len(markerOurs)) {
			continue
		}
		data, err := readAll(g.staged(), e)
		if err != nil {
			return fmt.Errorf("%s: %w", changes[i].Path, err)
		}
		if hasMarkers(data) {
			bad = append(bad, changes[i].Path)
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%s: %w", strings.Join(bad, ", "), ErrMarkers)
	}
	return nil
}

// hasMarkers looks for an ours marker line followed by a head marker line.
func hasMarkers(data []byte) bool {
	at := lineIndex(data, []byte(markerOurs))
	return at >= 0 && lineIndex(data[at:], []byte(markerHead)) >= 0
}

// lineIndex finds prefix at the start of a line.
func lineIndex(data, prefix []byte) int {
	for off := 0; off < len(data); {
		if bytes.HasPrefix(data[off:], prefix) {
			return off
		}
		nl := bytes.IndexByte(data[off:], '\n')
		if nl < 0 {
			return -1
		}
		off += nl + 1
	}
	return -1
}

// staged reads objects the gate holds (merged content), the caller's
// staged content, or the Store — asking the Store only for what neither
// Stage holds.
func (g *gate) staged() extents.Getter { return stages{g.trees, g.content} }
