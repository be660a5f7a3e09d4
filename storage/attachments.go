package storage

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"
)

// Attachment is a file of a session: uploaded by the user or produced by the agent.
type Attachment struct {
	ID          int64
	SessionID   int64
	MessageID   *int64
	Path        string // virtual path inside the session's workspace
	FileName    string
	Extension   string
	ContentType string
	Size        int64
	Source      string // AGENT_GENERATED | USER_UPLOAD
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

type attachmentRow struct {
	ID          int64 `gorm:"primaryKey"`
	SessionID   int64
	MessageID   *int64
	Path        string
	FileName    string
	Extension   string
	ContentType string
	Size        int64
	Source      string
	CreatedAt   int64 `gorm:"autoCreateTime:false"`
	UpdatedAt   int64 `gorm:"autoUpdateTime:false"`
}

func (attachmentRow) TableName() string { return "attachments" }

func (r attachmentRow) plain() Attachment {
	return Attachment{ID: r.ID, SessionID: r.SessionID, MessageID: r.MessageID, Path: r.Path, FileName: r.FileName,
		Extension: r.Extension, ContentType: r.ContentType, Size: r.Size, Source: r.Source,
		CreatedAt: fromMs(r.CreatedAt), UpdatedAt: fromMs(r.UpdatedAt)}
}

// UpsertAttachment records a file of a session by its path: a new path is created, a known one
// updated. created says which.
func (db *DB) UpsertAttachment(ctx context.Context, a Attachment) (Attachment, bool, error) {
	now := time.Now().UnixMilli()
	var out attachmentRow
	created := false
	err := db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		err := tx.Where("session_id = ? AND path = ?", a.SessionID, a.Path).Take(&out).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			created = true
			out = attachmentRow{SessionID: a.SessionID, MessageID: a.MessageID, Path: a.Path, FileName: a.FileName,
				Extension: a.Extension, ContentType: a.ContentType, Size: a.Size, Source: a.Source, CreatedAt: now, UpdatedAt: now}
			return tx.Create(&out).Error
		}
		if err != nil {
			return err
		}
		out.MessageID, out.Size, out.ContentType, out.UpdatedAt = a.MessageID, a.Size, a.ContentType, now
		return tx.Model(&attachmentRow{}).Where("id = ?", out.ID).Updates(map[string]any{
			"message_id": a.MessageID, "size": a.Size, "content_type": a.ContentType, "updated_at": now}).Error
	})
	if err != nil {
		return Attachment{}, false, fmt.Errorf("storage: record attachment %s: %w", a.Path, err)
	}
	return out.plain(), created, nil
}

// Attachments lists a session's attachments by id.
func (db *DB) Attachments(ctx context.Context, sessionID int64) ([]Attachment, error) {
	var rows []attachmentRow
	if err := db.r.WithContext(ctx).Where("session_id = ?", sessionID).Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: attachments of session %d: %w", sessionID, err)
	}
	out := make([]Attachment, len(rows))
	for i, r := range rows {
		out[i] = r.plain()
	}
	return out, nil
}
