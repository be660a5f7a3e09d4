package hookdtype

import (
	"fmt"
	"time"
)

// ValidationError names the field that is wrong, in the API's JSON path
// (`dispatchConfig.url`, `policyConfig.rules[1].when`). The HTTP layer answers it with 400.
type ValidationError struct {
	Field string
	Msg   string
}

func (e *ValidationError) Error() string { return e.Field + ": " + e.Msg }

// Invalid builds a ValidationError for field.
func Invalid(field, format string, args ...any) error {
	return &ValidationError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// SameCreatedAt refuses a replacement that names a createdAt other than the stored one: the time
// is set by the server once, and a body that sends another (to backdate a hook, say) would
// otherwise be stored without it and answered 200. Absent, or as GET showed it, is accepted.
func SameCreatedAt(sent, stored *time.Time) error {
	if sent == nil || stored == nil || sent.Equal(*stored) {
		return nil
	}
	return Invalid("createdAt", "%s, but it was created at %s; createdAt is set by hookd (leave it out or send it as GET shows it)",
		sent.Format(time.RFC3339Nano), stored.Format(time.RFC3339Nano))
}
