package api

import (
	"encoding/json"
	"testing"
)

// TestExecEnvEmptyIsNotNil: an ExecRequest with an empty Env reaches the
// daemon as an empty environment, and one with a nil Env as none given
// (the daemon's own). With omitempty both went as none, so a Go client
// asking for an empty environment got the daemon's, whatever it held.
func TestExecEnvEmptyIsNotNil(t *testing.T) {
	for _, env := range [][]string{nil, {}, {"A=1"}} {
		data, err := json.Marshal(ExecRequest{Argv: []string{"env"}, Env: env})
		if err != nil {
			t.Fatal(err)
		}
		var got ExecRequest
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatal(err)
		}
		if (got.Env == nil) != (env == nil) || len(got.Env) != len(env) {
			t.Errorf("Env %#v went as %s and came back %#v", env, data, got.Env)
		}
	}
}
