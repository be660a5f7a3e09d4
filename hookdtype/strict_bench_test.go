package hookdtype

import (
	"encoding/json"
	"testing"
)

// A dispatch request as an agent outside hookd sends it, and its shape.
var benchBody = []byte(`{"hookType":"pre_tool_use","sessionId":10001,"principalId":1001,"agentId":5001,"traceId":"req-7a8b9c0d",
	"context":{"toolName":"transferFunds","toolCallId":"call_abc123","arguments":{"amount":50000,"target":"ACC-002"}}}`)

type benchRequest struct {
	HookType    string          `json:"hookType"`
	SessionID   *int64          `json:"sessionId"`
	PrincipalID *int64          `json:"principalId"`
	AgentID     *int64          `json:"agentId"`
	TraceID     string          `json:"traceId"`
	Context     json.RawMessage `json:"context"`
}

type benchContext struct {
	ToolName   string          `json:"toolName"`
	ToolCallID string          `json:"toolCallId"`
	Arguments  json.RawMessage `json:"arguments"`
}

// BenchmarkDecodeStrict decodes the request and its context as the dispatch API does.
func BenchmarkDecodeStrict(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var r benchRequest
		var c benchContext
		if DecodeStrict(benchBody, &r, "") != nil || DecodeStrict(r.Context, &c, "context") != nil {
			b.Fatal("decode")
		}
	}
}

// BenchmarkDecodeLoose is the baseline: encoding/json alone, unknown fields ignored.
func BenchmarkDecodeLoose(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		var r benchRequest
		var c benchContext
		if json.Unmarshal(benchBody, &r) != nil || json.Unmarshal(r.Context, &c) != nil {
			b.Fatal("decode")
		}
	}
}

// BenchmarkDecodeStrictManyKeys is an object of 50,000 keys (half a megabyte), which the check
// for a key sent twice once read in time quadratic in the keys (six seconds), against
// encoding/json alone on the same text.
func BenchmarkDecodeStrictManyKeys(b *testing.B) {
	body := manyKeys(50000, -1)
	b.Run("strict", func(b *testing.B) {
		for b.Loop() {
			var m map[string]int
			if DecodeStrict(body, &m, "") != nil {
				b.Fatal("decode")
			}
		}
	})
	b.Run("loose", func(b *testing.B) {
		for b.Loop() {
			var m map[string]int
			if json.Unmarshal(body, &m) != nil {
				b.Fatal("decode")
			}
		}
	})
}
