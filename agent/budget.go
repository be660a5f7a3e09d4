package agent

import "fmt"

// overBudget reports whether the run used its token budget since it last (re)started counting.
func (r *run) overBudget() bool {
	b := r.rt.cfg.TokenBudget
	return b > 0 && r.state.Usage.Total()-r.state.BudgetBase >= b
}

// requestStop pauses a run that spent its budget; a resume gives it a fresh budget.
func (r *run) requestStop() {
	r.emit(Event{Kind: KindStopRequested, Stop: &StopInfo{
		Reason:         fmt.Sprintf("单轮 token 消耗超过预算上限 %d，已暂停", r.rt.cfg.TokenBudget),
		GenerateReason: ReasonMiddleware}})
	r.suspend(SuspendRequestStop, "token budget spent")
}
