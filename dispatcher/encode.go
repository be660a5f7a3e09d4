package dispatcher

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/hookd/hookd/hookdtype"
)

// A hand-written encoder for the envelope and the interceptive contexts, on the hot path of every
// decision. Its output is byte for byte what json.Marshal gives for the same value (the field
// order, encoding/json's string escaping with HTML escaping on, invalid UTF-8 as \ufffd, U+2028
// and U+2029 escaped, the Value rule); TestEncoderMatchesMarshal and FuzzEncoderMatchesMarshal
// pin that on random values. Anything it is not sure about goes to json.Marshal itself.

// encodeEnvelope renders env exactly as json.Marshal(env) does.
func encodeEnvelope(env *Envelope) ([]byte, error) {
	if !env.canonical && !isCanonicalJSON([]byte(env.Context)) {
		// Context bytes we did not render ourselves (read back from the outbox, say) and that
		// json.Marshal would rewrite (spaces, HTML characters) or reject. (A copy, so that env
		// itself does not escape on the common path.)
		c := *env
		return json.Marshal(&c)
	}
	n := 200 + len(env.EventID) + len(env.HookType) + len(env.HookName) + len(env.Context)
	if env.TraceID != nil {
		n += len(*env.TraceID)
	}
	b := make([]byte, 0, n+n/8)
	b = append(b, `{"schemaVersion":`...)
	b = hookdtype.AppendJSONString(b, env.SchemaVersion)
	b = append(b, `,"eventId":`...)
	b = hookdtype.AppendJSONString(b, env.EventID)
	b = append(b, `,"hookType":`...)
	b = hookdtype.AppendJSONString(b, string(env.HookType))
	b = append(b, `,"hookName":`...)
	b = hookdtype.AppendJSONString(b, env.HookName)
	b = append(b, `,"occurredAt":`...)
	b = strconv.AppendInt(b, env.OccurredAt, 10)
	b = append(b, `,"dispatchedAt":`...)
	b = strconv.AppendInt(b, env.DispatchedAt, 10)
	b = append(b, `,"deliveryAttempt":`...)
	b = strconv.AppendInt(b, int64(env.DeliveryAttempt), 10)
	b = append(b, `,"traceId":`...)
	b = hookdtype.AppendJSONStringPtr(b, env.TraceID)
	b = append(b, `,"sessionId":`...)
	b = hookdtype.AppendJSONIntPtr(b, env.SessionID)
	b = append(b, `,"principalId":`...)
	b = hookdtype.AppendJSONIntPtr(b, env.PrincipalID)
	b = append(b, `,"agentId":`...)
	b = hookdtype.AppendJSONIntPtr(b, env.AgentID)
	b = append(b, `,"context":`...)
	if env.Context == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, env.Context...)
	}
	return append(b, '}'), nil
}

// encodeContext renders an event's context once per event, as json.Marshal does; canonical
// reports that the bytes are json.Marshal's own output, which an envelope can embed verbatim.
// The interceptive contexts and post_tool_use (the busiest observational one) have hand-written
// encoders; the rest go through json.Marshal.
func encodeContext(c any) (raw json.RawMessage, canonical bool, err error) {
	var b []byte
	switch c := c.(type) {
	case json.RawMessage:
		return c, false, nil
	case *PreToolUseContext:
		if c == nil {
			break
		}
		b = make([]byte, 0, 48+len(c.ToolName)+len(c.ToolCallID)+len(c.Arguments)+codingAgentLen(c.CodingAgent))
		if b, err = appendToolCall(b, c.ToolName, c.ToolCallID, c.Arguments); err != nil {
			return nil, false, err
		}
		return append(appendCodingAgent(b, c.CodingAgent), '}'), true, nil
	case *PostToolUseContext:
		if c == nil {
			break
		}
		b = make([]byte, 0, 128+len(c.ToolName)+len(c.ToolCallID)+len(c.Arguments)+len(c.Output)+codingAgentLen(c.CodingAgent))
		if b, err = appendToolCall(b, c.ToolName, c.ToolCallID, c.Arguments); err != nil {
			return nil, false, err
		}
		b = append(b, `,"output":`...)
		if b, err = appendValue(b, c.Output); err != nil {
			return nil, false, fmt.Errorf("encode context: %w", err)
		}
		b = append(b, `,"succeeded":`...)
		b = strconv.AppendBool(b, c.Succeeded)
		b = append(b, `,"errorMessage":`...)
		b = hookdtype.AppendJSONStringPtr(b, c.ErrorMessage)
		b = append(b, `,"durationMs":`...)
		b = strconv.AppendInt(b, c.DurationMs, 10)
		return append(appendCodingAgent(b, c.CodingAgent), '}'), true, nil
	case *UserMessageContext:
		if c == nil {
			break
		}
		b = make([]byte, 0, 160+len(c.UserInput)+len(c.ChatMode)+len(c.TriggerSource.SourceType)+codingAgentLen(c.CodingAgent))
		b = append(b, `{"userInput":`...)
		b = hookdtype.AppendJSONString(b, c.UserInput)
		b = append(b, `,"chatMode":`...)
		b = hookdtype.AppendJSONString(b, c.ChatMode)
		b = append(b, `,"triggerSource":{"sourceType":`...)
		b = hookdtype.AppendJSONString(b, c.TriggerSource.SourceType)
		b = append(b, `,"channelType":`...)
		b = hookdtype.AppendJSONStringPtr(b, c.TriggerSource.ChannelType)
		b = append(b, `,"channelProvider":`...)
		b = hookdtype.AppendJSONStringPtr(b, c.TriggerSource.ChannelProvider)
		b = append(b, `},"bizKey":`...)
		b = hookdtype.AppendJSONStringPtr(b, c.BizKey)
		b = append(b, `,"userNickname":`...)
		b = hookdtype.AppendJSONStringPtr(b, c.UserNickname)
		return append(appendCodingAgent(b, c.CodingAgent), '}'), true, nil
	case *PreScheduledTaskContext:
		if c == nil {
			break
		}
		b = make([]byte, 0, 48+len(c.TaskName))
		b = append(b, `{"taskId":`...)
		b = strconv.AppendInt(b, c.TaskID, 10)
		b = append(b, `,"taskName":`...)
		b = hookdtype.AppendJSONString(b, c.TaskName)
		return append(b, '}'), true, nil
	}
	if b, err = json.Marshal(c); err != nil {
		return nil, false, fmt.Errorf("encode context: %w", err)
	}
	return b, true, nil
}

// appendToolCall opens a tool call's context: its name, call id and arguments.
func appendToolCall(b []byte, name, callID string, args Value) ([]byte, error) {
	b = append(b, `{"toolName":`...)
	b = hookdtype.AppendJSONString(b, name)
	b = append(b, `,"toolCallId":`...)
	b = hookdtype.AppendJSONString(b, callID)
	b = append(b, `,"arguments":`...)
	b, err := appendValue(b, args)
	if err != nil {
		return nil, fmt.Errorf("encode context: %w", err)
	}
	return b, nil
}

// appendCodingAgent appends the fields of an embedded *CodingAgent, which encoding/json promotes
// into the context object after the context's own (nothing for nil).
func appendCodingAgent(b []byte, a *CodingAgent) []byte {
	if a == nil {
		return b
	}
	b = append(b, `,"agentKind":`...)
	b = hookdtype.AppendJSONString(b, a.AgentKind)
	b = append(b, `,"externalSessionId":`...)
	b = hookdtype.AppendJSONString(b, a.ExternalSessionID)
	if a.Cwd != "" {
		b = append(b, `,"cwd":`...)
		b = hookdtype.AppendJSONString(b, a.Cwd)
	}
	if a.PermissionMode != "" {
		b = append(b, `,"permissionMode":`...)
		b = hookdtype.AppendJSONString(b, a.PermissionMode)
	}
	return b
}

func codingAgentLen(a *CodingAgent) int {
	if a == nil {
		return 0
	}
	return 64 + len(a.AgentKind) + len(a.ExternalSessionID) + len(a.Cwd) + len(a.PermissionMode)
}

// appendValue appends v as encoding/json renders a Value field: Value.MarshalJSON's output,
// compacted and HTML-escaped. JSON that is already compact and has nothing to escape is copied as
// it is; anything else takes json.Marshal itself.
func appendValue(b []byte, v Value) ([]byte, error) {
	if v.opensContainer() && isCanonicalJSON(string(v)) {
		return append(b, v...), nil
	}
	if !v.opensContainer() || !hookdtype.Valid([]byte(v)) {
		// Text: a JSON string (Value.MarshalJSON's json.Marshal(string(v))).
		return hookdtype.AppendJSONString(b, string(v)), nil
	}
	out, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return append(b, out...), nil
}

// isCanonicalJSON reports whether b is valid JSON (as json.Valid has it) that encoding/json's
// compaction with HTML escaping (what json.Marshal applies to a Marshaler's output) leaves
// unchanged: no whitespace outside strings, no <, > or &, no U+2028 or U+2029. It may say false
// for such JSON when it nests deeper than maxCanonicalDepth (the caller then takes the slow, exact
// way); it never says true for anything else.
func isCanonicalJSON[T string | []byte](b T) bool {
	s := canonicalScanner[T]{b: b}
	return s.value(0) && s.i == len(b)
}

const maxCanonicalDepth = 64

type canonicalScanner[T string | []byte] struct {
	b T
	i int
}

func (s *canonicalScanner[T]) value(depth int) bool {
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.str()
	case c == '{':
		if depth >= maxCanonicalDepth {
			return false
		}
		s.i++
		if s.i < len(s.b) && s.b[s.i] == '}' {
			s.i++
			return true
		}
		for {
			if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() {
				return false
			}
			if s.i >= len(s.b) || s.b[s.i] != ':' {
				return false
			}
			s.i++
			if !s.value(depth + 1) {
				return false
			}
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case ',':
				s.i++
			case '}':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		if depth >= maxCanonicalDepth {
			return false
		}
		s.i++
		if s.i < len(s.b) && s.b[s.i] == ']' {
			s.i++
			return true
		}
		for {
			if !s.value(depth + 1) {
				return false
			}
			if s.i >= len(s.b) {
				return false
			}
			switch s.b[s.i] {
			case ',':
				s.i++
			case ']':
				s.i++
				return true
			default:
				return false
			}
		}
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return s.number()
	}
	return false
}

func (s *canonicalScanner[T]) literal(lit string) bool {
	if len(s.b)-s.i < len(lit) || string(s.b[s.i:s.i+len(lit)]) != lit {
		return false
	}
	s.i += len(lit)
	return true
}

// str scans a string whose opening quote is at s.i.
func (s *canonicalScanner[T]) str() bool {
	b := s.b
	for i := s.i + 1; i < len(b); {
		c := b[i]
		if plainInString[c] {
			i++
			continue
		}
		switch {
		case c == '"':
			s.i = i + 1
			return true
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) {
					return false
				}
				for j := i + 2; j < i+6; j++ {
					h := b[j]
					if !('0' <= h && h <= '9' || 'a' <= h && h <= 'f' || 'A' <= h && h <= 'F') {
						return false
					}
				}
				i += 6
			default:
				return false
			}
		case c == 0xE2:
			if i+2 < len(b) && b[i+1] == 0x80 && b[i+2]&^1 == 0xA8 {
				return false // U+2028, U+2029: escaped by json.Marshal
			}
			i++
		default:
			return false // a control character (invalid), or <, > or & (escaped by json.Marshal)
		}
	}
	return false
}

// plainInString marks the bytes a canonical string holds as they are: not ", \, <, >, &, a
// control character, or 0xE2 (which may begin U+2028 or U+2029).
var plainInString = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' && c != 0xE2
	}
	return t
}()

// number scans -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func (s *canonicalScanner[T]) number() bool {
	b, i := s.b, s.i
	digits := func() bool {
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		return i > start
	}
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		digits()
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		if !digits() {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if !digits() {
			return false
		}
	}
	s.i = i
	return true
}
