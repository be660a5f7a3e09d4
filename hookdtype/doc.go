// Package hookdtype holds the few small types that many of hookd's packages share — a tool-name
// matcher, the input error that names its field, a typo suggestion — so that the agent, the
// scheduler and the API can use them without importing the dispatcher. It imports nothing of hookd.
package hookdtype
