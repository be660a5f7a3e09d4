package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// RepairArguments turns the argument text a model produced for a tool call into a JSON object,
// repairing what is trivially repairable:
//
//   - empty (or only whitespace) and a bare null become {};
//   - surrounding whitespace and a markdown code fence (```json ... ```) are stripped;
//   - trailing commas before } or ] (and at the very end) are removed;
//   - a missing closing " } ] at the end (output cut short) is added;
//   - an object encoded once more as a JSON string ("{\"a\":1}") is decoded.
//
// Anything else that is not a single JSON object is an error, worded for the model:
// "arguments are not valid JSON: ..." or "arguments must be a JSON object, got ...". The result
// is compact JSON.
func RepairArguments(raw string) (json.RawMessage, error) {
	return repairArguments(raw, true)
}

func repairArguments(raw string, unwrapString bool) (json.RawMessage, error) {
	s := stripCodeFence(strings.TrimSpace(raw))
	if s == "" || s == "null" {
		return json.RawMessage("{}"), nil
	}
	candidate := s
	if !json.Valid([]byte(candidate)) {
		fixed := fixJSON(s)
		if !json.Valid([]byte(fixed)) {
			return nil, fmt.Errorf("arguments are not valid JSON: %s", describeJSONError(s))
		}
		candidate = fixed
	}
	switch candidate[0] {
	case '{':
		var b bytes.Buffer
		if err := json.Compact(&b, []byte(candidate)); err != nil {
			return nil, fmt.Errorf("arguments are not valid JSON: %v", err)
		}
		return json.RawMessage(b.Bytes()), nil
	case '"':
		if unwrapString {
			var inner string
			if err := json.Unmarshal([]byte(candidate), &inner); err == nil {
				inner = strings.TrimSpace(inner)
				if strings.HasPrefix(inner, "{") || strings.HasPrefix(inner, "```") {
					if obj, err := repairArguments(inner, false); err == nil {
						return obj, nil
					}
				}
			}
		}
		return nil, errors.New("arguments must be a JSON object, got a string")
	case '[':
		return nil, errors.New("arguments must be a JSON object, got an array")
	case 't', 'f':
		return nil, errors.New("arguments must be a JSON object, got a boolean")
	default:
		return nil, errors.New("arguments must be a JSON object, got a number")
	}
}

// stripCodeFence removes a markdown code fence around s: an opening ``` with an optional
// language tag, and a closing ``` if there is one.
func stripCodeFence(s string) string {
	if !strings.HasPrefix(s, "```") {
		return s
	}
	s = strings.TrimLeft(s, "`")
	// A language tag: letters (json, JSON, jsonc, javascript) right after the fence.
	i := 0
	for i < len(s) && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z') {
		i++
	}
	s = s[i:]
	s = strings.TrimSpace(s)
	if strings.HasSuffix(s, "```") {
		s = strings.TrimRight(s, "`")
	}
	return strings.TrimSpace(s)
}

// fixJSON closes what is left open at the end of s (a string, then objects and arrays, innermost
// first) and removes trailing commas before } and ] and at the end. It does not check anything
// else: the caller validates the result.
func fixJSON(s string) string {
	out := make([]byte, 0, len(s)+8)
	var stack []byte // the closers still owed, innermost last
	inString, escaped := false, false
	dropTrailingComma := func() {
		out = bytes.TrimRight(out, " \t\r\n")
		if n := len(out); n > 0 && out[n-1] == ',' {
			out = out[:n-1]
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if inString {
			out = append(out, c)
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{':
			stack = append(stack, '}')
		case '[':
			stack = append(stack, ']')
		case '}', ']':
			dropTrailingComma()
			if n := len(stack); n > 0 && stack[n-1] == c {
				stack = stack[:n-1]
			}
		}
		out = append(out, c)
	}
	if inString {
		if escaped { // a dangling backslash: drop it rather than escape the closing quote
			out = out[:len(out)-1]
		}
		out = append(out, '"')
	}
	dropTrailingComma()
	for i := len(stack) - 1; i >= 0; i-- {
		out = append(out, stack[i])
	}
	return string(out)
}

// describeJSONError says what is wrong with s, with the byte offset when known.
func describeJSONError(s string) string {
	var v any
	dec := json.NewDecoder(strings.NewReader(s))
	err := dec.Decode(&v)
	if err == nil {
		// One valid value followed by something else.
		return fmt.Sprintf("unexpected text after the JSON value at byte %d", dec.InputOffset())
	}
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return fmt.Sprintf("%s (at byte %d)", syn.Error(), syn.Offset)
	}
	if err.Error() == "unexpected EOF" {
		return "unexpected end of input"
	}
	return err.Error()
}
