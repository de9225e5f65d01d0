package units

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// The signal loop must never wait for the consumer: an agent restarting on
// a node with thousands of units emits one event per unit before anything
// reads them (it deadlocked at 1024 with a plain buffered channel).
func TestEmitNeverBlocksAndKeepsOrder(t *testing.T) {
	w := NewWatcher(nil, Namer{Prefix: "uv"}, time.Hour, testLogger(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go w.pump(ctx)
	const n = 5000
	done := make(chan struct{})
	go func() {
		for i := range n {
			w.emit(State{Name: fmt.Sprint(i)})
		}
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("emit blocked without a consumer")
	}
	for i := range n {
		ev := <-w.Events()
		if ev.Name != fmt.Sprint(i) {
			t.Fatalf("event %d is %s: out of order", i, ev.Name)
		}
	}
}
