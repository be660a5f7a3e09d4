package hookdtype

import "fmt"

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
