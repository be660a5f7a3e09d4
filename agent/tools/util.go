package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/hookd/hookd/hookdtype"
)

// errorResult is a failure the model should see.
func errorResult(format string, args ...any) Result {
	return Result{Text: fmt.Sprintf(format, args...), IsError: true}
}

// decodeArgs decodes a call's JSON arguments into v, as strictly as every body hookd takes
// (hookdtype.DecodeStrict). Unknown fields are refused so that a misspelt argument ("file_path"
// for "path") is reported instead of silently ignored; so is a key that differs from an
// argument's name only in case, and a key sent twice: encoding/json would take "Path" for "path"
// and the last of two, while the hooks, policies and permission rules that judged the call read
// "path" and the first — the tool would run with what they never saw. The error is worded for
// the model.
func decodeArgs(tool string, args json.RawMessage, v any) error {
	if len(bytes.TrimSpace(args)) == 0 {
		args = json.RawMessage("{}")
	}
	if err := hookdtype.DecodeStrict(args, v, "arguments"); err != nil {
		return fmt.Errorf("invalid arguments for %s: %v", tool, err)
	}
	return nil
}

// utf8Prefix returns the longest prefix of b not longer than n that does not end in the middle
// of a UTF-8 sequence.
func utf8Prefix(b []byte, n int) []byte {
	if n >= len(b) {
		return b
	}
	if n <= 0 {
		return b[:0]
	}
	cut := n
	// Step back over continuation bytes (at most 3) to the start of the rune that straddles n.
	for i := 0; i < utf8.UTFMax && cut > 0 && !utf8.RuneStart(b[cut]); i++ {
		cut--
	}
	if !utf8.RuneStart(b[cut]) {
		return b[:n] // not UTF-8 anyway
	}
	return b[:cut]
}

// utf8Suffix returns b without leading UTF-8 continuation bytes (at most 3), so a tail cut from
// a longer text starts at a rune boundary.
func utf8Suffix(b []byte) []byte {
	for i := 0; i < utf8.UTFMax-1 && len(b) > 0 && !utf8.RuneStart(b[0]); i++ {
		b = b[1:]
	}
	return b
}

// looksLikeText reports whether sample is text: valid UTF-8 without NUL bytes. A sample cut
// from a longer file may end in the middle of a rune; complete says whether it is the whole file.
func looksLikeText(sample []byte, complete bool) bool {
	if bytes.IndexByte(sample, 0) >= 0 {
		return false
	}
	if !complete {
		sample = dropPartialRune(sample)
	}
	return utf8.Valid(sample)
}

// dropPartialRune returns b without an incomplete UTF-8 sequence at its end.
func dropPartialRune(b []byte) []byte {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return b[:i]
			}
			break
		}
	}
	return b
}

// formatSize renders n bytes for a listing or a note.
func formatSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d bytes", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	case n < 1<<30:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	default:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	}
}

// ready says whether a call may start: its context is live and the session has a workspace.
func ready(ctx context.Context, env Env) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if env.Workspace == "" {
		return errNoWorkspace
	}
	return nil
}
