package integration

import (
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
