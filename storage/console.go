package storage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// ConsoleSession is a signed-in console user. Only the SHA-256 of the cookie's token is kept, so
// the table gives nobody a usable session.
type ConsoleSession struct {
	TokenHash []byte
	// Credential identifies the admin token or reviewer key the session was signed in with,
	// without revealing it: an HMAC keyed by the session's token, which only its cookie holds.
	Credential []byte
	Role       string
	Subject    string
	Reviews    []string
	ExpiresAt  time.Time
	CreatedAt  time.Time
}

type consoleSessionRow struct {
	TokenHash  []byte `gorm:"primaryKey"`
	Credential []byte
	Role       string
	Subject    string
	Reviews    string
	ExpiresAt  int64
	CreatedAt  int64 `gorm:"autoCreateTime:false"`
}

func (consoleSessionRow) TableName() string { return "console_sessions" }

// AddConsoleSession stores a new session and drops the expired ones.
func (db *DB) AddConsoleSession(ctx context.Context, s ConsoleSession) error {
	reviews, err := json.Marshal(s.Reviews)
	if err != nil {
		return fmt.Errorf("storage: console session: %w", err)
	}
	return db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Where("expires_at <= ?", s.CreatedAt.UnixMilli()).Delete(&consoleSessionRow{}).Error; err != nil {
			return fmt.Errorf("storage: prune console sessions: %w", err)
		}
		row := consoleSessionRow{TokenHash: s.TokenHash, Credential: s.Credential, Role: s.Role, Subject: s.Subject, Reviews: string(reviews),
			ExpiresAt: ms(s.ExpiresAt), CreatedAt: ms(s.CreatedAt)}
		if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("storage: add console session: %w", err)
		}
		return nil
	})
}

// ConsoleSession reads the session with this token hash; ErrNotFound when there is none or it
// expired before now.
func (db *DB) ConsoleSession(ctx context.Context, tokenHash []byte, now time.Time) (ConsoleSession, error) {
	var r consoleSessionRow
	err := db.r.WithContext(ctx).Where("token_hash = ? AND expires_at > ?", tokenHash, now.UnixMilli()).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return ConsoleSession{}, ErrNotFound
	}
	if err != nil {
		return ConsoleSession{}, fmt.Errorf("storage: console session: %w", err)
	}
	s := ConsoleSession{TokenHash: r.TokenHash, Credential: r.Credential, Role: r.Role, Subject: r.Subject, ExpiresAt: fromMs(r.ExpiresAt),
		CreatedAt: fromMs(r.CreatedAt)}
	if err := json.Unmarshal([]byte(r.Reviews), &s.Reviews); err != nil {
		return ConsoleSession{}, fmt.Errorf("storage: console session: reviews: %w", err)
	}
	return s, nil
}

// DeleteConsoleSession ends a session (signing out twice is no error) and, once that is
// committed, wakes what this process holds open for it.
func (db *DB) DeleteConsoleSession(ctx context.Context, tokenHash []byte) error {
	if err := db.w.WithContext(ctx).Where("token_hash = ?", tokenHash).Delete(&consoleSessionRow{}).Error; err != nil {
		return fmt.Errorf("storage: delete console session: %w", err)
	}
	db.announce(TopicConsoleSessions)
	return nil
}
