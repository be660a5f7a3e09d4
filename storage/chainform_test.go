package storage

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
	"time"
)

// chainForm is the canonical form a row's hash covers, as the chain defined it first: this
// struct encoded by encoding/json. appendChainForm must write the same bytes.
type chainForm struct {
	DecisionID      string  `json:"decisionId"`
	EventID         string  `json:"eventId"`
	HookID          int64   `json:"hookId"`
	HookName        string  `json:"hookName"`
	HookPriority    int     `json:"hookPriority"`
	HookType        string  `json:"hookType"`
	RuleName        string  `json:"ruleName,omitempty"`
	SessionID       *int64  `json:"sessionId"`
	PrincipalID     *int64  `json:"principalId"`
	AgentID         *int64  `json:"agentId"`
	TraceID         *string `json:"traceId"`
	ToolName        string  `json:"toolName"`
	ToolCallID      string  `json:"toolCallId"`
	TaskID          *int64  `json:"taskId"`
	SubjectHash     string  `json:"subjectHash"`
	Subject         *string `json:"subject"`
	Outcome         string  `json:"outcome"`
	Reason          string  `json:"reason"`
	ModifiedHash    string  `json:"modifiedHash"`
	FromFailureMode bool    `json:"fromFailureMode"`
	BreakerState    string  `json:"breakerState"`
	StatusCode      int     `json:"statusCode"`
	Error           string  `json:"error"`
	LatencyMs       int64   `json:"latencyMs"`
	CreatedAt       int64   `json:"createdAt"`
	AgentKind       string  `json:"agentKind,omitempty"`
	PrevHash        string  `json:"prevHash"`
}

func marshalChainForm(d *Decision) []byte {
	b, err := json.Marshal(chainForm{DecisionID: d.DecisionID, EventID: d.EventID, HookID: d.HookID,
		HookName: d.HookName, HookPriority: d.HookPriority, HookType: d.HookType, RuleName: d.RuleName, SessionID: d.SessionID,
		PrincipalID: d.PrincipalID, AgentID: d.AgentID, TraceID: d.TraceID, ToolName: d.ToolName,
		ToolCallID: d.ToolCallID, TaskID: d.TaskID, SubjectHash: d.SubjectHash, Subject: d.Subject,
		Outcome: d.Outcome, Reason: d.Reason, ModifiedHash: d.ModifiedHash, FromFailureMode: d.FromFailureMode,
		BreakerState: d.BreakerState, StatusCode: d.StatusCode, Error: d.Error, LatencyMs: d.LatencyMs,
		CreatedAt: ms(d.CreatedAt), AgentKind: d.AgentKind, PrevHash: d.PrevHash})
	if err != nil {
		panic(err)
	}
	return b
}

// The hand-written canonical form is byte for byte what encoding/json writes, for rows of every
// shape: empty and absent fields, negative numbers, and strings that need each kind of escape.
func TestChainFormMatchesMarshal(t *testing.T) {
	strs := []string{"", "allow", "0ABCDEFGHJKMN", "转账限额", "a\"b", `back\slash`, "<tag>&amp;", "line\nbreak\t\r",
		"\x00\x01\x1f\x7f", "\u2028\u2029", "bad \xff utf8", "emoji 🚀", "\b\f", "'single'"}
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string { return strs[rng.IntN(len(strs))] }
	strPtr := func() *string {
		if rng.IntN(3) == 0 {
			return nil
		}
		s := str()
		return &s
	}
	intPtr := func() *int64 {
		if rng.IntN(3) == 0 {
			return nil
		}
		n := rng.Int64() - rng.Int64()
		return &n
	}
	for i := range 5000 {
		d := Decision{DecisionID: str(), EventID: str(), HookID: rng.Int64(), HookName: str(), HookPriority: rng.IntN(2000) - 1000,
			HookType: str(), RuleName: str(), SessionID: intPtr(), PrincipalID: intPtr(), AgentID: intPtr(), TraceID: strPtr(),
			ToolName: str(), ToolCallID: str(), TaskID: intPtr(), SubjectHash: str(), Subject: strPtr(), Outcome: str(),
			Reason: str(), ModifiedHash: str(), FromFailureMode: rng.IntN(2) == 0, BreakerState: str(),
			StatusCode: rng.IntN(600), Error: str(), LatencyMs: rng.Int64N(1 << 40), AgentKind: str(), PrevHash: str(),
			CreatedAt: time.UnixMilli(rng.Int64N(1 << 42))}
		if got, want := string(appendChainForm(nil, &d)), string(marshalChainForm(&d)); got != want {
			t.Fatalf("row %d:\n got %s\nwant %s", i, got, want)
		}
	}
}

func BenchmarkChainHash(b *testing.B) {
	sid := int64(10001)
	d := Decision{DecisionID: "0ABCDEFGHJKMN", EventID: "0ABCDEFGHJKMP", HookID: 1, HookName: "bench-intercept",
		HookType: "pre_tool_use", SessionID: &sid, ToolName: "transferFunds", ToolCallID: "call_abc123",
		SubjectHash: "2ee2f5e1a9c3b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d", Outcome: "allow",
		BreakerState: "closed", StatusCode: 200, CreatedAt: time.Now(), PrevHash: "2ee2f5e1a9c3b4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d"}
	b.Run("marshal", func(b *testing.B) {
		for range b.N {
			marshalChainForm(&d)
		}
	})
	b.Run("append", func(b *testing.B) {
		var buf [640]byte
		for range b.N {
			appendChainForm(buf[:0], &d)
		}
	})
}
