package storage

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	"github.com/hookd/hookd/hookdtype"
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
	b = hookdtype.AppendJSONString(append(b, `{"decisionId":`...), d.DecisionID)
	b = hookdtype.AppendJSONString(append(b, `,"eventId":`...), d.EventID)
	b = strconv.AppendInt(append(b, `,"hookId":`...), d.HookID, 10)
	b = hookdtype.AppendJSONString(append(b, `,"hookName":`...), d.HookName)
	b = strconv.AppendInt(append(b, `,"hookPriority":`...), int64(d.HookPriority), 10)
	b = hookdtype.AppendJSONString(append(b, `,"hookType":`...), d.HookType)
	if d.RuleName != "" { // omitted when empty: rows of webhooks hash as before rules existed
		b = hookdtype.AppendJSONString(append(b, `,"ruleName":`...), d.RuleName)
	}
	b = hookdtype.AppendJSONIntPtr(append(b, `,"sessionId":`...), d.SessionID)
	b = hookdtype.AppendJSONIntPtr(append(b, `,"principalId":`...), d.PrincipalID)
	b = hookdtype.AppendJSONIntPtr(append(b, `,"agentId":`...), d.AgentID)
	b = hookdtype.AppendJSONStringPtr(append(b, `,"traceId":`...), d.TraceID)
	b = hookdtype.AppendJSONString(append(b, `,"toolName":`...), d.ToolName)
	b = hookdtype.AppendJSONString(append(b, `,"toolCallId":`...), d.ToolCallID)
	b = hookdtype.AppendJSONIntPtr(append(b, `,"taskId":`...), d.TaskID)
	b = hookdtype.AppendJSONString(append(b, `,"subjectHash":`...), d.SubjectHash)
	b = hookdtype.AppendJSONStringPtr(append(b, `,"subject":`...), d.Subject)
	b = hookdtype.AppendJSONString(append(b, `,"outcome":`...), d.Outcome)
	b = hookdtype.AppendJSONString(append(b, `,"reason":`...), d.Reason)
	b = hookdtype.AppendJSONString(append(b, `,"modifiedHash":`...), d.ModifiedHash)
	b = strconv.AppendBool(append(b, `,"fromFailureMode":`...), d.FromFailureMode)
	b = hookdtype.AppendJSONString(append(b, `,"breakerState":`...), d.BreakerState)
	b = strconv.AppendInt(append(b, `,"statusCode":`...), int64(d.StatusCode), 10)
	b = hookdtype.AppendJSONString(append(b, `,"error":`...), d.Error)
	b = strconv.AppendInt(append(b, `,"latencyMs":`...), d.LatencyMs, 10)
	b = strconv.AppendInt(append(b, `,"createdAt":`...), ms(d.CreatedAt), 10) // epoch ms, as stored
	// agentKind is left out when empty: rows from before it existed keep their hashes.
	if d.AgentKind != "" {
		b = hookdtype.AppendJSONString(append(b, `,"agentKind":`...), d.AgentKind)
	}
	b = hookdtype.AppendJSONString(append(b, `,"prevHash":`...), d.PrevHash)
	return append(b, '}')
}
