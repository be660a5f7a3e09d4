// Package wire holds what every HTTP route of hookd shares: the REST response wrapper, JSON
// binding with clear errors, SSE framing, and who the caller of a chat API is.
package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/hookd/hookd/dispatcher"
	"github.com/hookd/hookd/hookdtype"
	"github.com/hookd/hookd/storage"
)

// Response is the wrapper every REST response uses; the HTTP status equals HTTPStatusCode.
type Response struct {
	Success        bool   `json:"success"`
	HTTPStatusCode int    `json:"httpStatusCode"`
	Data           any    `json:"data"`
	Message        string `json:"message"`
}

// OK writes a success wrapper.
func OK(c *gin.Context, status int, data any) { OKNoted(c, status, data, nil) }

// noteSep comes before each note in a success message.
const noteSep = "; note: "

// OKNoted writes a success wrapper whose message carries notes, when there are any: what the
// request did that is valid but likely not what was meant ("success; note: …"; Notes reads them).
func OKNoted(c *gin.Context, status int, data any, notes []string) {
	msg := "success"
	if len(notes) > 0 {
		msg += noteSep + strings.Join(notes, noteSep)
	}
	c.JSON(status, Response{Success: true, HTTPStatusCode: status, Data: data, Message: msg})
}

// Notes are the notes of a success message OKNoted wrote.
func Notes(message string) []string { return strings.Split(message, noteSep)[1:] }

// A JSONAppender appends its JSON encoding, exactly as json.Marshal has it, to b.
type JSONAppender interface {
	AppendJSON(b []byte) ([]byte, error)
}

// OKJSON writes a success wrapper around data: the bytes and headers OK would write, without
// reflection on a hot path's answer. status is one that has a body.
func OKJSON(c *gin.Context, status int, data JSONAppender) {
	b := make([]byte, 0, 256)
	b = append(b, `{"success":true,"httpStatusCode":`...)
	b = strconv.AppendInt(b, int64(status), 10)
	b, err := data.AppendJSON(append(b, `,"data":`...))
	if err != nil {
		FailErr(c, err)
		return
	}
	Data(c, status, jsonType, append(b, `,"message":"success"}`...))
}

// Data writes what c.Data(status, contentType[0], body) writes, without allocating its renderer
// and content type on every answer: contentType is shared (net/http only reads it). status is
// one that has a body.
func Data(c *gin.Context, status int, contentType []string, body []byte) {
	c.Status(status)
	h := c.Writer.Header()
	if len(h["Content-Type"]) == 0 {
		h["Content-Type"] = contentType
	}
	if len(body) > 0 {
		h["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	if _, err := c.Writer.Write(body); err != nil {
		_ = c.Error(err)
		c.Abort()
	}
}

// jsonType is OKJSON's Content-Type, shared (net/http only reads it).
var jsonType = []string{"application/json; charset=utf-8"}

// Fail writes an error wrapper and stops the handler chain.
func Fail(c *gin.Context, status int, format string, args ...any) {
	c.AbortWithStatusJSON(status, Response{HTTPStatusCode: status, Message: fmt.Sprintf(format, args...)})
}

// FailErr maps an error from below to its status: validation 400, missing 404, the dispatcher
// stopping 503, else 500 (whose detail goes to the log, not to the client).
func FailErr(c *gin.Context, err error) {
	var ve *hookdtype.ValidationError
	switch {
	case errors.As(err, &ve):
		Fail(c, http.StatusBadRequest, "%s", ve.Error())
	case errors.Is(err, storage.ErrNotFound):
		Fail(c, http.StatusNotFound, "not found")
	case errors.Is(err, dispatcher.ErrStopped):
		// The daemon is shutting down: a retry reaches the replica or the restart that takes over.
		_ = c.Error(err)
		Fail(c, http.StatusServiceUnavailable, "hookd is shutting down and did not finish this request; try again")
	default:
		_ = c.Error(err)
		Fail(c, http.StatusInternalServerError, "internal error")
	}
}

// BindStrict decodes the body into v as every API of the daemon does: strictly
// (hookdtype.DecodeStrict). A field v does not have, at any depth, is a 400 naming its JSON path
// with a "did you mean" when a known field is close; a body over the limit is 413. It reports
// whether decoding succeeded.
func BindStrict(c *gin.Context, v any) bool {
	data, err := ReadBody(c.Request.Body)
	switch tooBig, over := errors.AsType[*http.MaxBytesError](err); {
	case over:
		Fail(c, http.StatusRequestEntityTooLarge, "request body over %d bytes", tooBig.Limit)
		return false
	case err != nil:
		Fail(c, http.StatusBadRequest, "body: %v", err)
		return false
	}
	if err := hookdtype.DecodeStrict(data, v, ""); err != nil {
		FailErr(c, err)
		return false
	}
	return true
}

// NoBody refuses a body on a route that takes none (an empty object aside, which some clients
// send with every POST): what it said would be ignored.
func NoBody(c *gin.Context) {
	if err := CheckNoBody(c.Request, c.FullPath()); err != nil {
		Fail(c, http.StatusBadRequest, "%v", err)
	}
}

// GetTakesNoBody is NoBody for the GET requests of a group whose other routes take bodies.
func GetTakesNoBody(c *gin.Context) {
	if c.Request.Method == http.MethodGet {
		NoBody(c)
	}
}

// CheckNoBody is NoBody's check, for a dialect that answers in its own form; route names the
// route in the error.
func CheckNoBody(r *http.Request, route string) error {
	body, err := ReadBody(r.Body)
	if err != nil {
		return fmt.Errorf("body: %v", err)
	}
	if b := bytes.TrimSpace(body); len(b) > 0 && !isEmptyObject(b) {
		return fmt.Errorf("body: %s %s takes no body", r.Method, route)
	}
	return nil
}

// isEmptyObject reports whether b is {} (with any space inside).
func isEmptyObject(b []byte) bool {
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}' && len(bytes.TrimSpace(b[1:len(b)-1])) == 0
}

// Oversized is a request body over the server's limit on a route that answers such a body itself:
// the coding agents' hook route, whose harnesses take an error status for "no objection". Prefix
// is the body up to the limit; the rest was never read.
type Oversized struct {
	Limit  int64
	Prefix []byte
}

const oversizedKey = "hookd.oversized"

// MarkOversized hands the handler of c an oversized body instead of refusing it.
func MarkOversized(c *gin.Context, o Oversized) { c.Set(oversizedKey, o) }

// OversizedBody reports the body MarkOversized handed over, if any.
func OversizedBody(c *gin.Context) (Oversized, bool) {
	v, ok := c.Get(oversizedKey)
	o, _ := v.(Oversized)
	return o, ok
}

// Buffered is a request body already read into memory (the server reads every body before the
// handler runs): ReadBody hands out its bytes instead of copying them again.
type Buffered struct {
	bytes.Reader
	b []byte
}

// NewBuffered returns b as a request body.
func NewBuffered(b []byte) *Buffered {
	r := &Buffered{b: b}
	r.Reset(b)
	return r
}

// Close implements io.ReadCloser.
func (*Buffered) Close() error { return nil }

// ReadBody reads the rest of a request body; the bytes are the body's own when it is Buffered, so
// the caller must not change them.
func ReadBody(body io.Reader) ([]byte, error) {
	if r, ok := body.(*Buffered); ok {
		rest := r.b[len(r.b)-r.Len():]
		r.Reset(nil)
		return rest, nil
	}
	return io.ReadAll(body)
}
