package agent

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookd/hookd/storage/storagetest"
)

// BenchmarkStreamDeltas measures how many streamed deltas per second go through the whole path:
// the scripted model emitting one-rune text deltas, the loop turning them into events, the batched
// event log committing them to SQLite, and one live subscriber receiving them.
func BenchmarkStreamDeltas(b *testing.B) {
	const deltas = 20000
	script := fmt.Sprintf(`{"scripts":[{"match":"*","steps":[{"text":"%s","chunkSize":1}]}]}`, strings.Repeat("字", deltas))
	e := newEnv(b, storagetest.SQLite(b), script, Config{})
	b.ResetTimer()
	start := time.Now()
	total := 0
	for i := 0; i < b.N; i++ {
		info, err := e.rt.StartRun(context.Background(), StartRequest{UserID: "u", SessionKey: fmt.Sprint("s", i), Input: "go"})
		if err != nil {
			b.Fatal(err)
		}
		ch, _ := e.rt.Subscribe(context.Background(), info.RequestID, 0)
		n := 0
		for ev := range ch {
			if ev.Kind == KindBlockDelta {
				n++
			}
		}
		if n != deltas {
			b.Fatalf("subscriber got %d deltas", n)
		}
		total += n
	}
	b.ReportMetric(float64(total)/time.Since(start).Seconds(), "deltas/s")
}
