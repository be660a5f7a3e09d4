// Package tracing follows a chat turn through hookd with OpenTelemetry: the chat request, the
// run, each model call, each tool call, each interceptive hook call and each delivery attempt are
// spans of one trace, and the receivers of hooks get that trace in a W3C traceparent header and
// as the envelope's traceId.
//
// Export is off unless Setup is given an endpoint or the standard OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set; the spans are then sent over OTLP/HTTP. Off, spans
// are the API's no-op ones, which still carry a trace a client sent in traceparent: so a
// receiver sees the client's trace either way.
//
// The rest of hookd calls one function per span here (a line or two where the work happens);
// everything OpenTelemetry is in this package.
package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"
)

// Name is the instrumentation scope of hookd's spans.
const Name = "github.com/hookd/hookd"

// propagator reads and writes W3C traceparent (and tracestate). It is ours, not the global one,
// so that propagation works whether or not export is on.
var propagator = propagation.TraceContext{}

// tracer is hookd's tracer from the global provider. It is looked up again only when the provider
// changes: the lookup (a lock and a map) was a measurable part of every decision.
func tracer() trace.Tracer {
	tp := otel.GetTracerProvider()
	if c := cachedTracer.Load(); c != nil && c.tp == tp {
		return c.t
	}
	t := tp.Tracer(Name)
	cachedTracer.Store(&providerTracer{tp, t})
	return t
}

type providerTracer struct {
	tp trace.TracerProvider
	t  trace.Tracer
}

var cachedTracer atomic.Pointer[providerTracer]

// offProvider is the global provider before any is set: while it is the global one, export is off
// and the API's spans record nothing.
var offProvider = otel.GetTracerProvider()

// exporting tells whether spans are recorded: whether a provider has been set (Setup, or a test).
// The hot paths (a request, a hook call, a delivery attempt) make no span without it.
func exporting() bool { return otel.GetTracerProvider() != offProvider }

// Config is the otel section of the daemon's config.
type Config struct {
	// Endpoint is the OTLP/HTTP endpoint URL (e.g. http://collector:4318); empty: the standard
	// OTEL_EXPORTER_OTLP_* variables decide, and with none set export is off.
	Endpoint string
	Service  string // service.name; default hookd
	Version  string // service.version
}

// Enabled reports whether c (or the environment) asks for export.
func (c Config) Enabled() bool {
	return c.Endpoint != "" || os.Getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" ||
		os.Getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// Setup installs the exporting tracer provider when c is enabled; shutdown flushes it. Off, it
// installs nothing and shutdown does nothing.
func Setup(ctx context.Context, c Config) (shutdown func(context.Context) error, err error) {
	if !c.Enabled() {
		return func(context.Context) error { return nil }, nil
	}
	var opts []otlptracehttp.Option
	if c.Endpoint != "" {
		opts = append(opts, otlptracehttp.WithEndpointURL(c.Endpoint))
	}
	exp, err := otlptracehttp.New(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("otel: %w", err)
	}
	if c.Service == "" {
		c.Service = "hookd"
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(
		semconv.ServiceName(c.Service), semconv.ServiceVersion(c.Version)))
	if err != nil {
		return nil, fmt.Errorf("otel: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	return tp.Shutdown, nil
}

var serverKind = trace.WithSpanKind(trace.SpanKindServer)

// Middleware starts the span of each HTTP request, as a child of the trace the client sent in
// traceparent, if any. The route template names it.
func Middleware() gin.HandlerFunc {
	return func(c *gin.Context) {
		ctx, traced := extract(c.Request.Context(), c.Request.Header)
		if !exporting() {
			// Export off: a span would record nothing, and its context would be the client's,
			// which ctx already holds (for the logs and the receivers); no span, then, on every
			// request.
			if traced {
				c.Request = c.Request.WithContext(ctx)
			}
			return
		}
		route := c.FullPath()
		if route == "" {
			route = "unmatched"
		}
		ctx, span := tracer().Start(ctx, c.Request.Method+" "+route, serverKind)
		defer span.End()
		c.Request = c.Request.WithContext(ctx)
		if !span.IsRecording() { // export off: nothing to record on every request
			c.Next()
			return
		}
		span.SetAttributes(semconv.HTTPRequestMethodKey.String(c.Request.Method), semconv.HTTPRoute(route))
		c.Next()
		status := c.Writer.Status()
		span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		if status >= 500 {
			span.SetStatus(codes.Error, http.StatusText(status))
		}
	}
}

// extract is ctx continuing the trace a client sent in h's traceparent, and whether it holds a
// span then. Most requests send none: that is told by one look into h, without the propagator's
// header lookup (which canonicalises "traceparent" anew, an allocation, on every request).
func extract(ctx context.Context, h http.Header) (context.Context, bool) {
	if v := h["Traceparent"]; len(v) == 0 || v[0] == "" {
		return ctx, false // what propagator.Extract gives without a traceparent
	}
	ctx = propagator.Extract(ctx, propagation.HeaderCarrier(h))
	return ctx, trace.SpanContextFromContext(ctx).IsValid()
}

// TraceID is the id of ctx's trace, or "" without one.
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}

// Parent is ctx's span as a traceparent value, for work that continues it later or elsewhere (a
// run, a queued delivery); "" without a span.
func Parent(ctx context.Context) string {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return ""
	}
	h := http.Header{}
	propagator.Inject(ctx, propagation.HeaderCarrier(h))
	return h.Get("traceparent")
}

// Inherit is what a new run records of ctx's trace: its traceId (the one given, else the trace's)
// and its parent (Parent).
func Inherit(ctx context.Context, traceID string) (string, string) {
	if traceID == "" {
		traceID = TraceID(ctx)
	}
	return traceID, Parent(ctx)
}

// resume is ctx continuing the span a traceparent names.
func resume(ctx context.Context, parent string) context.Context {
	if parent == "" {
		return ctx
	}
	return propagator.Extract(ctx, propagation.HeaderCarrier(http.Header{"Traceparent": {parent}}))
}

// Inject sends ctx's trace to a receiver: traceparent (and tracestate) on h.
func Inject(ctx context.Context, h http.Header) { propagator.Inject(ctx, propagation.HeaderCarrier(h)) }

// End ends the span of ctx.
func End(ctx context.Context) { trace.SpanFromContext(ctx).End() }

// StartRun starts the span of a run (requestId), continuing parent (Parent of the request that
// started it) — also when a run resumes after a restart. End it with End.
func StartRun(ctx context.Context, parent, requestID string) context.Context {
	ctx, _ = tracer().Start(resume(ctx, parent), "run", trace.WithAttributes(attribute.String("hookd.request_id", requestID)))
	return ctx
}

// StartFiring starts the span of a scheduled task's firing: the root of a new trace at a cron
// tick (ctx has no span), a child of the request that fired it by hand. end records how the
// firing ended: its task run's status and error code, and whether it failed.
func StartFiring(ctx context.Context, taskID int64, kind string) (context.Context, func(status, errorCode string, failed bool)) {
	ctx, span := tracer().Start(ctx, "task firing", trace.WithAttributes(
		attribute.Int64("hookd.task.id", taskID), attribute.String("hookd.task.fire_kind", kind)))
	return ctx, func(status, errorCode string, failed bool) {
		span.SetAttributes(attribute.String("hookd.task.status", status))
		if errorCode != "" {
			span.SetAttributes(attribute.String("hookd.error_code", errorCode))
		}
		if failed {
			span.SetStatus(codes.Error, errorCode)
		}
		span.End()
	}
}

// Carry is to with from's span: work that outlives the request or loop that began it (to's
// cancellation and values, from's trace).
func Carry(to, from context.Context) context.Context {
	return trace.ContextWithSpan(to, trace.SpanFromContext(from))
}

// StartModelCall starts the span of one model call; end calls it with the call's error.
func StartModelCall(ctx context.Context, modelName string, attempt int) (context.Context, func(error)) {
	ctx, span := tracer().Start(ctx, "model call", trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(
		attribute.String("gen_ai.request.model", modelName), attribute.Int("hookd.attempt", attempt)))
	return ctx, func(err error) { endWith(span, err) }
}

// StartToolCall starts the span of a tool's execution; end calls it with the tool's error.
func StartToolCall(ctx context.Context, tool, callID string) (context.Context, func(error)) {
	ctx, span := tracer().Start(ctx, "tool "+tool, trace.WithAttributes(
		attribute.String("gen_ai.tool.name", tool), attribute.String("gen_ai.tool.call.id", callID)))
	return ctx, func(err error) { endWith(span, err) }
}

// HookResult is what one interceptive hook call came to.
type HookResult struct {
	Decision        string
	Latency         time.Duration
	FromFailureMode bool
	Status          int
	Err             error // the exchange's failure (the failureMode decided)
}

var hookCallKind = trace.WithSpanKind(trace.SpanKindClient)

func endNothing(HookResult) {}

// StartHookCall starts the span of one interceptive hook call; end records its decision.
func StartHookCall(ctx context.Context, hookID int64, hookName, hookType string) (context.Context, func(HookResult)) {
	if !exporting() {
		return ctx, endNothing // export off: ctx already carries the trace to the receiver
	}
	ctx, span := tracer().Start(ctx, "hook "+hookType, hookCallKind)
	if !span.IsRecording() {
		// Export off (the API's no-op span, which still carries the trace to the receiver): no
		// attributes to build, on every decision.
		return ctx, func(HookResult) { span.End() }
	}
	span.SetAttributes(attribute.Int64("hookd.hook.id", hookID), attribute.String("hookd.hook.name", hookName),
		attribute.String("hookd.hook.type", hookType))
	return ctx, func(r HookResult) {
		span.SetAttributes(attribute.String("hookd.decision", r.Decision), attribute.Int64("hookd.latency_ms", r.Latency.Milliseconds()),
			attribute.Bool("hookd.from_failure_mode", r.FromFailureMode))
		if r.Status != 0 {
			span.SetAttributes(semconv.HTTPResponseStatusCode(r.Status))
		}
		endWith(span, r.Err)
	}
}

func endDeliveryNothing(int, error) {}

// StartDelivery starts the span of one delivery attempt of a queued event, continuing parent
// (Parent when the event was queued); end records the receiver's status and error.
func StartDelivery(ctx context.Context, parent, eventID, hookType string, hookID int64, attempt int) (context.Context, func(status int, err error)) {
	if !exporting() {
		return resume(ctx, parent), endDeliveryNothing // export off: the queued event's trace goes on to the receiver
	}
	ctx, span := tracer().Start(resume(ctx, parent), "deliver "+hookType, trace.WithSpanKind(trace.SpanKindProducer), trace.WithAttributes(
		attribute.String("hookd.event_id", eventID), attribute.Int64("hookd.hook.id", hookID),
		attribute.String("hookd.hook.type", hookType), attribute.Int("hookd.attempt", attempt)))
	return ctx, func(status int, err error) {
		if status != 0 {
			span.SetAttributes(semconv.HTTPResponseStatusCode(status))
		}
		if err == nil && status/100 != 2 && status != 0 {
			err = fmt.Errorf("HTTP %d", status)
		}
		endWith(span, err)
	}
}

func endWith(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// LogHandler adds trace_id and span_id to each record logged with a context that has a span.
func LogHandler(h slog.Handler) slog.Handler { return logHandler{h} }

type logHandler struct{ slog.Handler }

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.Handler.Handle(ctx, r)
}

func (l logHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return logHandler{l.Handler.WithAttrs(as)}
}
func (l logHandler) WithGroup(name string) slog.Handler { return logHandler{l.Handler.WithGroup(name)} }
