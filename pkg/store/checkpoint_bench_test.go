package store

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkCommitTail measures the tail of SQLite commit latency with the
// checkpoint on the commit path (SQLite's default, wal_autocheckpoint 1000)
// and off it (the background checkpointer, checkpoint.go). Each commit
// writes about one page, the size of a deploy's step or event row; every
// 1,000th commit of the "inline" variant runs the checkpoint itself.
//
//	go test ./pkg/store -run '^$' -bench CommitTail -benchtime 5000x
func BenchmarkCommitTail(b *testing.B) {
	for _, inline := range []bool{true, false} {
		name := "background"
		if inline {
			name = "inline"
		}
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			st, err := Open(ctx, "sqlite:"+filepath.Join(b.TempDir(), "m.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			conn, err := st.DB().Conn(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			if inline {
				st.ckpt.stop()
				if _, err := conn.ExecContext(ctx, "PRAGMA wal_autocheckpoint=1000"); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := conn.ExecContext(ctx, "CREATE TABLE filler (b BLOB)"); err != nil {
				b.Fatal(err)
			}
			row := strings.Repeat("x", 3000)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				if _, err := conn.ExecContext(ctx, "INSERT INTO filler (b) VALUES (?)", row); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(t0))
			}
			b.StopTimer()
			if b.N < 100 {
				return // the calibration run: too few commits for a tail
			}
			slices.Sort(lat)
			q := func(p float64) time.Duration { return lat[min(len(lat)-1, int(float64(len(lat))*p))] }
			fmt.Printf("BenchmarkCommitTail/%s commits=%d p50 %v p99 %v p99.9 %v max %v\n",
				name, b.N, q(0.50), q(0.99), q(0.999), lat[len(lat)-1])
			b.ReportMetric(float64(q(0.999).Microseconds())/1000, "p99.9-ms")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds())/1000, "max-ms")
		})
	}
}
