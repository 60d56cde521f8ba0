package bench

import "testing"

// Creating and ending a Workspace, on Go's tree (~15k files) and on a tree
// of 100k files, alternately in one run: creating one copies, scans and
// installs nothing, so the two should cost the same.
// Bars: create median under 5 ms and the 100k/15k ratio within 1.5; end
// under 3 ms.
//
//	go test -run '^$' -bench 'WorkspaceCreate' -benchtime 50x ./bench/
func BenchmarkWorkspaceCreate(b *testing.B) {
	wsNeedRoot(b)
	small := wsStart(b, wsPrivateCopy(b, wsGorootStore(b)))
	big := wsStart(b, wsPrivateCopy(b, ws100kStore(b)))
	for _, e := range []*wsEnv{small, big} { // the first of each warms up
		e.end(b, e.create(b).ID)
	}
	var create15k, create100k, end samples
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		var id string
		create15k.time(func() { id = small.create(b).ID })
		end.time(func() { small.end(b, id) })
		create100k.time(func() { id = big.create(b).ID })
		end.time(func() { big.end(b, id) })
	}
	b.StopTimer()
	create15k.report(b, "create-15k-ms")
	create100k.report(b, "create-100k-ms")
	b.ReportMetric(create100k.ms()/create15k.ms(), "create-100k/15k")
	end.report(b, "end-ms")
}
