package sessions

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/layerfs/layerfs/api"
)

// TestBodyTooLarge: a body over api.MaxBody is refused with 413 after
// reading at most that much, not read into memory whole.
func TestBodyTooLarge(t *testing.T) {
	body := `{"argv":["true"],"stdin":"` + strings.Repeat("x", api.MaxBody) + `"}`
	r := httptest.NewRequest(http.MethodPost, "/workspaces/ws-1/exec", strings.NewReader(body))
	r.Pattern = "POST /workspaces/{id}/exec"
	w := httptest.NewRecorder()
	var req api.ExecRequest
	if decode(w, r, &req) {
		t.Fatal("a body over the bound was decoded")
	}
	if w.Code != http.StatusRequestEntityTooLarge || !strings.Contains(w.Body.String(), "over 64 MiB") {
		t.Fatalf("%d %s", w.Code, w.Body.String())
	}
}

// TestUncleanPathsAnswerJSON: a path with //, /./ or /../ gets a JSON 404
// like any other unknown route, not the mux's redirect with an HTML body.
func TestUncleanPathsAnswerJSON(t *testing.T) {
	h := (&Daemon{}).Handler()
	for _, p := range []string{"/workspaces//x", "/workspaces/../health", "/workspaces/./x/exec", "/health/.."} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.URL.Path = p
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusNotFound || w.Header().Get("Content-Type") != "application/json" || !strings.Contains(w.Body.String(), `"code":"not_found"`) {
			t.Errorf("%s: %d %s %s", p, w.Code, w.Header().Get("Content-Type"), w.Body.String())
		}
	}
}
