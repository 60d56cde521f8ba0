package fusefs

import (
	"errors"
	"fmt"
	"testing"

	"github.com/layerfs/layerfs/store"
)

// TestServerReportKeepsTheKind: a background server's failure reaches its
// caller as an error of the same kind, with the same message; one of no
// kind the report names is ErrServerFailed.
func TestServerReportKeepsTheKind(t *testing.T) {
	for _, c := range []struct {
		err  error
		kind error
	}{
		{fmt.Errorf("mount at /m: %w: /m is served from /s#main", ErrMounted), ErrMounted},
		{fmt.Errorf("mount point /m does not exist: %w", store.ErrNotFound), store.ErrNotFound},
		{fmt.Errorf("open /s: %w", store.ErrNewerFormat), store.ErrNewerFormat},
		{errors.New("mount at /m: fusermount: exit status 1\nsecond line"), ErrServerFailed},
	} {
		got := serverError(report(c.err))
		if !errors.Is(got, c.kind) {
			t.Errorf("%q came back as %v, not of kind %v", c.err, got, c.kind)
		}
		if c.kind != ErrServerFailed && got.Error() != c.err.Error() {
			t.Errorf("%q came back as %q", c.err, got)
		}
	}
}
