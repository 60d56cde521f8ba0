package bench

import (
	"os/exec"
	"testing"
)

// BenchmarkWorkspaceExec times a command that does nothing, `true`, run in
// a Workspace through the socket API, against the same started directly:
// what every command an agent runs pays for the Workspace.
//
//	go test -run '^$' -bench WorkspaceExec -benchtime 200x ./bench/
func BenchmarkWorkspaceExec(b *testing.B) {
	wsNeedRoot(b)
	e := wsStart(b, wsStoreOf(b, map[string][]byte{"README": []byte("bench\n")}))
	id := e.create(b).ID
	e.sh(b, id, "true")
	var ws, direct samples
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		ws.time(func() { e.sh(b, id, "true") })
		direct.time(func() {
			if err := exec.Command("sh", "-c", "true").Run(); err != nil {
				b.Fatal(err)
			}
		})
	}
	b.StopTimer()
	e.end(b, id)
	ws.report(b, "exec-ms")
	direct.report(b, "direct-ms")
}
