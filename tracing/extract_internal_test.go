package tracing

import (
	"context"
	"math/rand/v2"
	"net/http"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TestExtractMatchesPropagator: extract gives the span context propagator.Extract gives, on
// generated headers (traceparent valid, malformed, empty, repeated, under a key Get does not
// find; tracestate and baggage alone), from a context with and without a span; and it says it
// holds a span where the middleware took the propagator's context for the request's.
func TestExtractMatchesPropagator(t *testing.T) {
	parent := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1, 2, 3}, SpanID: trace.SpanID{4, 5, 6}, TraceFlags: trace.FlagsSampled}))
	keys := []string{"Traceparent", "traceparent", "TRACEPARENT", "Tracestate", "Baggage", "Content-Type"}
	values := []string{"", " ", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-09-x",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01", "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7", "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE", "k=v", "bad==state"}
	rnd := rand.New(rand.NewPCG(3, 4))
	traced := 0
	for i := range 20000 {
		h := http.Header{}
		for range rnd.IntN(4) {
			k := keys[rnd.IntN(len(keys))]
			h[k] = append(h[k], values[rnd.IntN(len(values))])
		}
		for _, base := range []context.Context{context.Background(), parent} {
			want := propagator.Extract(base, propagation.HeaderCarrier(h))
			got, ok := extract(base, h)
			if !trace.SpanContextFromContext(got).Equal(trace.SpanContextFromContext(want)) {
				t.Fatalf("%d: %v: got %v, want %v", i, h, trace.SpanContextFromContext(got), trace.SpanContextFromContext(want))
			}
			if base == parent {
				continue
			}
			if wantOK := trace.SpanContextFromContext(want).IsValid(); ok != wantOK {
				t.Fatalf("%d: %v: holds a span %v, want %v", i, h, ok, wantOK)
			}
			if ok {
				traced++
			}
		}
	}
	if traced < 1000 || traced > 19000 {
		t.Fatalf("%d of 20000 headers continue a trace: the headers do not cover both paths", traced)
	}
}
