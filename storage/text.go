package storage

import (
	"strings"
	"unicode/utf8"
)

// text is s as the log columns keep it: bytes that are not UTF-8, and NUL, become U+FFFD.
// PostgreSQL's text refuses both, and one such value (a receiver's binary answer, a NUL in a
// reason) would fail the whole commit it shares with other callers' rows; SQLite keeps the
// same text so that the two databases hold one record.
func text(s string) string {
	if utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}

func textPtr(s *string) *string {
	if s == nil {
		return nil
	}
	t := text(*s)
	return &t
}

// clean brings every text of b that a caller or a receiver chose (not hookd) to text's form,
// before the decisions' hashes are taken.
func (b *WriteBatch) clean() {
	for i := range b.Outcomes {
		o := &b.Outcomes[i]
		o.Error = text(o.Error)
		if a := o.Attempt; a != nil {
			a.Error, a.ResponseBody = text(a.Error), text(a.ResponseBody)
		}
	}
	for i := range b.Decisions {
		d := &b.Decisions[i]
		d.HookName, d.RuleName, d.TraceID = text(d.HookName), text(d.RuleName), textPtr(d.TraceID)
		d.ToolName, d.ToolCallID, d.Subject = text(d.ToolName), text(d.ToolCallID), textPtr(d.Subject)
		d.Reason, d.Error = text(d.Reason), text(d.Error)
	}
}
