package agent

import "fmt"

// budget is the run's token budget: agent.tokenBudget, or the lower one the run was started
// with (a subagent's, what its parent had left); 0 is none.
func (r *run) budget() int64 {
	b := r.rt.cfg.TokenBudget
	if s := r.spec.TokenBudget; s > 0 && (b == 0 || s < b) {
		return s
	}
	return b
}

// spent is the tokens the run and its subagents used.
func (s *runState) spent() int64 { return s.Usage.Total() + s.SubagentTokens }

// budgetLeft is what the run may still spend since it last (re)started counting; meaningful when
// budget is not 0.
func (r *run) budgetLeft() int64 { return r.budget() - (r.state.spent() - r.state.BudgetBase) }

// overBudget reports whether the run used its token budget since it last (re)started counting.
func (r *run) overBudget() bool {
	return r.budget() > 0 && r.budgetLeft() <= 0
}

// requestStop pauses a run that spent its budget; a resume gives it a fresh budget.
func (r *run) requestStop() {
	r.emit(Event{Kind: KindStopRequested, Stop: &StopInfo{
		Reason:         fmt.Sprintf("单轮 token 消耗超过预算上限 %d，已暂停", r.budget()),
		GenerateReason: ReasonMiddleware}})
	r.suspend(SuspendRequestStop, "token budget spent")
}
