package integration

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/layerfs/layerfs/sessions"
)

// TestCreateAnswersJSON: a create's 201 says its body is JSON, as every
// other reply does (it said text/plain: the status went out before the
// header was set).
func TestCreateAnswersJSON(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	rec := httptest.NewRecorder()
	d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/workspaces", nil))
	if ct := rec.Result().Header.Get("Content-Type"); rec.Code != http.StatusCreated || ct != "application/json" {
		t.Fatalf("create: %d, Content-Type %q: %s", rec.Code, ct, rec.Body)
	}
}

// TestCreateForAClientGoneEndsIt: a create whose client went away before
// the reply (a cancelled context: layerfs.Client.Create with a timeout
// that fired) ends the Workspace it made. The client never learns its
// id; it was left holding a lease and a place under the cap.
func TestCreateForAClientGoneEndsIt(t *testing.T) {
	d := startDaemon(t, map[string]string{"a.txt": "a\n"}, sessions.Config{Volume: sessions.VolumeOff})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	r := httptest.NewRequest(http.MethodPost, "/workspaces", nil).WithContext(ctx)
	d.Handler().ServeHTTP(httptest.NewRecorder(), r)
	if ws := d.List(); len(ws) != 0 {
		t.Fatalf("after a create whose client went away: %d Workspaces, want none: %+v", len(ws), ws)
	}
	// One whose client waits is kept, of course.
	rec := httptest.NewRecorder()
	d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/workspaces", nil))
	if ws := d.List(); rec.Code != http.StatusCreated || len(ws) != 1 {
		t.Fatalf("create: %d %s; %d Workspaces, want 1", rec.Code, rec.Body, len(ws))
	}
}
