// Package openapitest checks real answers against the API's OpenAPI document (api/openapi.json),
// so that the document cannot drift from the code: wrap the handler a test serves with Handler, or
// the client's transport with Transport, and every answer the test receives is validated. Each
// failure names the request, the documented route, the status and the field, and fails the test
// when it ends.
//
// The check is stricter than the document reads: an object schema that lists its properties and
// says nothing of others is closed here (additionalProperties: false), so a field the code sends
// and the document lacks fails as surely as a field of the wrong type. Clients reading the
// document keep the usual open-world reading. An answer with a status the operation does not
// document (nor a default response) fails too.
package openapitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"

	"github.com/hookd/hookd/api"
)

// Checker validates answers against one document.
type Checker struct {
	router routers.Router
}

var (
	shared     *Checker
	sharedErr  error
	sharedOnce sync.Once
)

// Default is the checker of api/openapi.json, loaded once.
func Default() (*Checker, error) {
	sharedOnce.Do(func() {
		doc, err := Load(api.OpenAPI())
		if err == nil {
			shared, sharedErr = New(doc)
		} else {
			sharedErr = err
		}
	})
	return shared, sharedErr
}

// Load parses a document and runs the validator's document check on it.
func Load(raw []byte) (*openapi3.T, error) {
	doc, err := openapi3.NewLoader().LoadFromData(raw)
	if err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.json does not pass the document check: %w", err)
	}
	return doc, nil
}

// New makes a checker of doc, closing its object schemas (see the package comment).
func New(doc *openapi3.T) (*Checker, error) {
	closeSchemas(doc)
	r, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, err
	}
	return &Checker{router: r}, nil
}

// Check validates one answer to req. The error names the request, route, status and each field
// that does not match.
func (c *Checker) Check(req *http.Request, status int, header http.Header, body []byte) error {
	what := fmt.Sprintf("%s %s → %d", req.Method, req.URL.RequestURI(), status)
	route, params, err := c.router.FindRoute(req)
	if err != nil {
		// An unknown path or method is answered by the API's own 404/405; that answer needs no
		// route, and a test that asked for it meant to.
		if status == http.StatusNotFound || status == http.StatusMethodNotAllowed {
			return nil
		}
		return fmt.Errorf("%s: no route of openapi.json serves it (%v)", what, err)
	}
	what += fmt.Sprintf(" (route %s %s)", route.Method, route.Path)
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if isStream(header) {
		// A stream's frames are checked by the tests of each dialect; here its status and type.
		if err := streamDocumented(route, status); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		in.Options.ExcludeResponseBody = true
	}
	in.SetBodyBytes(body)
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		return fmt.Errorf("%s: %s", what, describe(err))
	}
	return nil
}

func isStream(h http.Header) bool {
	mt, _, _ := mime.ParseMediaType(h.Get("Content-Type"))
	return mt == "text/event-stream"
}

func streamDocumented(route *routers.Route, status int) error {
	ref := route.Operation.Responses.Status(status)
	if ref == nil {
		ref = route.Operation.Responses.Default()
	}
	if ref == nil || ref.Value == nil || ref.Value.Content.Get("text/event-stream") == nil {
		return fmt.Errorf("response: a text/event-stream with status %d is not documented", status)
	}
	return nil
}

// describe lists each schema failure as "field a.b.0.c: reason".
func describe(err error) string {
	var lines []string
	var walk func(error)
	walk = func(err error) {
		var me openapi3.MultiError
		var se *openapi3.SchemaError
		var re *openapi3filter.ResponseError
		switch {
		case errors.As(err, &me):
			for _, e := range me {
				walk(e)
			}
		case errors.As(err, &se):
			field := strings.Join(se.JSONPointer(), ".")
			if field == "" {
				field = "(the body)"
			}
			reason := se.Reason
			if reason == "" && se.Origin != nil {
				reason = se.Origin.Error()
			}
			lines = append(lines, fmt.Sprintf("field %s: %s", field, reason))
		case errors.As(err, &re) && re.Err != nil:
			lines = append(lines, re.Reason+":")
			walk(re.Err)
		default:
			lines = append(lines, err.Error())
		}
	}
	walk(err)
	return strings.Join(lines, "\n\t")
}

// closeSchemas sets additionalProperties: false on every object schema that lists properties and
// leaves additionalProperties unsaid — except the members of an allOf, each of which sees only
// part of the object.
func closeSchemas(doc *openapi3.T) {
	seen := map[*openapi3.Schema]bool{}
	var visit func(ref *openapi3.SchemaRef, inAllOf bool)
	visit = func(ref *openapi3.SchemaRef, inAllOf bool) {
		if ref == nil || ref.Value == nil || seen[ref.Value] {
			return
		}
		s := ref.Value
		seen[s] = true
		ap := &s.AdditionalProperties
		if len(s.Properties) > 0 && ap.Has == nil && ap.Schema == nil && !inAllOf {
			no := false
			ap.Has = &no
		}
		for _, p := range s.Properties {
			visit(p, false)
		}
		visit(s.Items, false)
		visit(ap.Schema, false)
		for _, m := range s.AllOf {
			visit(m, true)
		}
		for _, m := range slices.Concat(s.OneOf, s.AnyOf) {
			visit(m, false)
		}
	}
	for _, s := range doc.Components.Schemas {
		visit(s, false)
	}
	for _, item := range doc.Paths.Map() {
		for _, op := range item.Operations() {
			for _, r := range op.Responses.Map() {
				if r.Value == nil {
					continue
				}
				for _, mt := range r.Value.Content {
					visit(mt.Schema, false)
				}
			}
		}
	}
}

// recorder keeps the status, headers and (but for a stream) the body of what a handler writes,
// passing everything through as it comes.
type recorder struct {
	http.ResponseWriter
	status int
	stream bool
	body   bytes.Buffer
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 && code >= 200 {
		r.status = code
		r.stream = isStream(r.Header())
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	if !r.stream {
		r.body.Write(b)
	}
	return r.ResponseWriter.Write(b)
}

func (r *recorder) Flush() {
	if r.status == 0 {
		r.WriteHeader(http.StatusOK)
	}
	http.NewResponseController(r.ResponseWriter).Flush()
}

func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// report gathers the failures of one test and fails it with them when it ends — after the
// servers it started have closed, so no answer is missed and nothing logs after the test.
type report struct {
	mu       sync.Mutex
	failures []string       // in the order first seen
	count    map[string]int // how often each was seen
}

func newReport(t testing.TB) *report {
	r := &report{count: map[string]int{}}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, f := range r.failures {
			times := ""
			if n := r.count[f]; n > 1 {
				times = fmt.Sprintf(" (%d answers)", n)
			}
			t.Errorf("answer does not match api/openapi.json%s: %s", times, f)
		}
	})
	return r
}

func (r *report) add(err error) {
	if err == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.count[err.Error()]++; r.count[err.Error()] == 1 {
		r.failures = append(r.failures, err.Error())
	}
}

func mustDefault(t testing.TB) *Checker {
	t.Helper()
	c, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// Handler serves h and checks each of its answers against api/openapi.json. Call it before the
// test starts a server on it, so that the check runs after that server closed.
func Handler(t testing.TB, h http.Handler) http.Handler {
	c, rep := mustDefault(t), newReport(t)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, req)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		rep.add(c.Check(req, rec.status, w.Header(), rec.body.Bytes()))
	})
}

// Transport sends requests with rt (http.DefaultTransport if nil) and checks each answer against
// api/openapi.json. A stream's body is left to the caller unread.
func Transport(t testing.TB, rt http.RoundTripper) http.RoundTripper {
	if rt == nil {
		rt = http.DefaultTransport
	}
	return &transport{rt: rt, c: mustDefault(t), rep: newReport(t)}
}

type transport struct {
	rt  http.RoundTripper
	c   *Checker
	rep *report
}

func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.rt.RoundTrip(req)
	if err != nil {
		return resp, err
	}
	var body []byte
	if !isStream(resp.Header) {
		body, err = io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
	}
	t.rep.add(t.c.Check(req, resp.StatusCode, resp.Header, body))
	return resp, nil
}
