package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strconv"
)

// chainHash is the SHA-256 (hex) of d's canonical form: a JSON object of every field but the
// database id (the order is the chain's), exactly as encoding/json writes the struct chainForm
// of chainform_test.go, which TestChainFormMatchesMarshal holds it to. It is written by hand
// because every decision row is hashed on the writer's path, and Marshal's reflection was most of
// that cost.
func chainHash(d *Decision) string {
	var buf [640]byte
	sum := sha256.Sum256(appendChainForm(buf[:0], d))
	return hex.EncodeToString(sum[:])
}

func appendChainForm(b []byte, d *Decision) []byte {
	b = appendStr(append(b, `{"decisionId":`...), d.DecisionID)
	b = appendStr(append(b, `,"eventId":`...), d.EventID)
	b = strconv.AppendInt(append(b, `,"hookId":`...), d.HookID, 10)
	b = appendStr(append(b, `,"hookName":`...), d.HookName)
	b = strconv.AppendInt(append(b, `,"hookPriority":`...), int64(d.HookPriority), 10)
	b = appendStr(append(b, `,"hookType":`...), d.HookType)
	if d.RuleName != "" { // omitted when empty: rows of webhooks hash as before rules existed
		b = appendStr(append(b, `,"ruleName":`...), d.RuleName)
	}
	b = appendIntPtr(append(b, `,"sessionId":`...), d.SessionID)
	b = appendIntPtr(append(b, `,"principalId":`...), d.PrincipalID)
	b = appendIntPtr(append(b, `,"agentId":`...), d.AgentID)
	b = appendStrPtr(append(b, `,"traceId":`...), d.TraceID)
	b = appendStr(append(b, `,"toolName":`...), d.ToolName)
	b = appendStr(append(b, `,"toolCallId":`...), d.ToolCallID)
	b = appendIntPtr(append(b, `,"taskId":`...), d.TaskID)
	b = appendStr(append(b, `,"subjectHash":`...), d.SubjectHash)
	b = appendStrPtr(append(b, `,"subject":`...), d.Subject)
	b = appendStr(append(b, `,"outcome":`...), d.Outcome)
	b = appendStr(append(b, `,"reason":`...), d.Reason)
	b = appendStr(append(b, `,"modifiedHash":`...), d.ModifiedHash)
	b = strconv.AppendBool(append(b, `,"fromFailureMode":`...), d.FromFailureMode)
	b = appendStr(append(b, `,"breakerState":`...), d.BreakerState)
	b = strconv.AppendInt(append(b, `,"statusCode":`...), int64(d.StatusCode), 10)
	b = appendStr(append(b, `,"error":`...), d.Error)
	b = strconv.AppendInt(append(b, `,"latencyMs":`...), d.LatencyMs, 10)
	b = strconv.AppendInt(append(b, `,"createdAt":`...), ms(d.CreatedAt), 10) // epoch ms, as stored
	if d.AgentKind != "" {                                                    // left out when empty: rows from before it existed keep their hashes
		b = appendStr(append(b, `,"agentKind":`...), d.AgentKind)
	}
	b = appendStr(append(b, `,"prevHash":`...), d.PrevHash)
	return append(b, '}')
}

// appendStr appends s as encoding/json writes a string: as it is when every byte is printable
// ASCII that needs no escape (ids, hashes, names), through Marshal itself otherwise, so that its
// escaping rules (HTML characters, U+2028, invalid UTF-8) need no copy here.
func appendStr(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string: Marshal cannot fail
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

func appendStrPtr(b []byte, s *string) []byte {
	if s == nil {
		return append(b, "null"...)
	}
	return appendStr(b, *s)
}

func appendIntPtr(b []byte, n *int64) []byte {
	if n == nil {
		return append(b, "null"...)
	}
	return strconv.AppendInt(b, *n, 10)
}
