package layerfs

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/layerfs/layerfs/api"
	"github.com/layerfs/layerfs/store"
)

// TestAPIErrorIsSentinel: an error the daemon returned matches, with
// errors.Is, the sentinel its code names and no other, whichever call
// met it (a commit's 409 is read apart from other failures, health's 503
// too); errors.As still finds the APIError.
func TestAPIErrorIsSentinel(t *testing.T) {
	code := make(chan string, 1)
	sock := filepath.Join(t.TempDir(), "d.sock")
	serveUnix(t, sock, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := <-code
		status := map[string]int{api.CodeNotFound: 404, api.CodeCap: 429, api.CodeDirty: 409, api.CodeMarkers: 409,
			api.CodeUnsettled: 409, api.CodeRunning: 409, api.CodeChanged: 409, api.CodeUnhealthy: 503, api.CodeInternal: 500}[c]
		if status == 0 {
			status = 400
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(api.Error{Code: c, Error: "refused as " + c})
	}))
	cl := Dial(sock)
	ctx := context.Background()
	calls := map[string]func() error{
		"health": func() error { _, err := cl.Health(ctx); return err },
		"create": func() error { _, err := cl.Create(ctx, api.CreateRequest{}); return err },
		"exec":   func() error { _, err := cl.Exec(ctx, "ws-1", api.ExecRequest{Argv: []string{"x"}}); return err },
		"stream": func() error {
			_, err := cl.ExecStream(ctx, "ws-1", api.ExecRequest{Argv: []string{"x"}}, nil)
			return err
		},
		"commit":  func() error { _, err := cl.Commit(ctx, "ws-1", api.CommitRequest{}); return err },
		"end":     func() error { return cl.End(ctx, "ws-1", false) },
		"inspect": func() error { _, err := cl.Inspect(ctx, "ws-1"); return err },
	}
	all := []error{ErrNotFound, ErrBadRequest, ErrWorkspaceCap, ErrUncommitted, ErrMarkers, ErrUnsettled,
		ErrCommandsRunning, ErrCommandNotFound, ErrCannotRun, ErrUnhealthy}
	for _, c := range []struct {
		code string
		want error // nil: matches none
	}{
		{api.CodeNotFound, ErrNotFound},
		{api.CodeBadRequest, ErrBadRequest},
		{api.CodeCap, ErrWorkspaceCap},
		{api.CodeDirty, ErrUncommitted},
		{api.CodeMarkers, ErrMarkers},
		{api.CodeUnsettled, ErrUnsettled},
		{api.CodeRunning, ErrCommandsRunning},
		{api.CodeChanged, ErrFileChanged},
		{api.CodeNoCommand, ErrCommandNotFound},
		{api.CodeCannotRun, ErrCannotRun},
		{api.CodeUnhealthy, ErrUnhealthy},
		{api.CodeInternal, nil},
	} {
		for name, call := range calls {
			code <- c.code
			err := call()
			var ae *APIError
			if !errors.As(err, &ae) || ae.Code != c.code {
				t.Errorf("%s refused as %s: %v, want an APIError with that code", name, c.code, err)
				continue
			}
			for _, s := range all {
				if got := errors.Is(err, s); got != (s == c.want) {
					t.Errorf("%s refused as %s: errors.Is(err, %q) = %v", name, c.code, s, got)
				}
			}
		}
	}
	// Not found is the Store's not found, as for file calls.
	code <- api.CodeNotFound
	if _, err := cl.Inspect(ctx, "ws-1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("inspect refused as not_found: %v, want store.ErrNotFound", err)
	}
}
