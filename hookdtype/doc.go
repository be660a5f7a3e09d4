// Package hookdtype holds the few small types and helpers that many of hookd's packages share — a
// tool-name matcher, the input error that names its field, a typo suggestion, strict JSON
// decoding and the JSON writers of the hot paths — so that the agent, the scheduler, the API and
// the storage can use them without importing the dispatcher. It imports nothing of hookd.
package hookdtype
