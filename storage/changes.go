package storage

import "sync"

// Topic names rows whose commits live views follow (the console's approvals inbox and decision
// tail, and its streams, which end with their session). A writer announces a topic after its transaction commits; a view waits on Changed and
// then reads what is new. Commits of other replicas are not announced here: views on a shared
// PostgreSQL also re-read on a slow timer.
type Topic uint8

// The topics.
const (
	TopicDecisions Topic = iota
	TopicAsks
	// TopicConsoleSessions: a console session was ended (signed out).
	TopicConsoleSessions
	numTopics
)

// changes holds, per topic, the channel the next commit closes.
type changes struct {
	mu sync.Mutex
	ch [numTopics]chan struct{}
}

// Changed returns a channel that is closed at the next commit of rows of t in this process.
func (db *DB) Changed(t Topic) <-chan struct{} {
	c := &db.changes
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch[t] == nil {
		c.ch[t] = make(chan struct{})
	}
	return c.ch[t]
}

// announce wakes the views of t; call it only after the commit that wrote the rows.
func (db *DB) announce(t Topic) {
	c := &db.changes
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch[t] != nil {
		close(c.ch[t])
		c.ch[t] = nil
	}
}
