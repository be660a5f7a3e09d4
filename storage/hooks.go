package storage

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"gorm.io/gorm"
)

// ErrNotFound is returned when a row asked for by id does not exist.
var ErrNotFound = errors.New("not found")

// Hook is a registered hook as stored. Storage knows only the columns it filters on; the
// definition itself is the dispatcher's JSON document, and its secrets travel beside it in
// plaintext in memory and sealed at rest.
type Hook struct {
	ID       int64
	HookType string
	AgentID  *int64 // nil: every agent
	Enabled  bool
	Priority int
	Doc      []byte // the definition without secrets (JSON)
	Secrets  []byte // the secrets (JSON); never written unsealed
	// SecretsUnreadable says the sealed secrets open with none of the master keys (Secrets is
	// nil): the key was lost or changed. Only a new secret heals the hook.
	SecretsUnreadable bool
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// HookFilter narrows ListHooks; zero values do not filter.
type HookFilter struct {
	HookType string
	// AppliesTo keeps the hooks that apply to this agent: its own and those of every agent.
	AppliesTo *int64
	Enabled   *bool
	AfterID   int64 // pages forwards: only hooks with a larger id
	Limit     int   // 0: all
}

type hookRow struct {
	ID         int64 `gorm:"primaryKey"`
	HookType   string
	AgentID    *int64
	Enabled    bool
	Priority   int
	Doc        string
	SecretsEnc []byte
	CreatedAt  int64 `gorm:"autoCreateTime:false"`
	UpdatedAt  int64 `gorm:"autoUpdateTime:false"`
}

func (hookRow) TableName() string { return "hooks" }

const hookSecretsAAD = "hooks.secrets_enc"

func (db *DB) toHookRow(h *Hook) hookRow {
	return hookRow{ID: h.ID, HookType: h.HookType, AgentID: h.AgentID, Enabled: h.Enabled, Priority: h.Priority,
		Doc: string(h.Doc), SecretsEnc: db.sealer.Seal(h.Secrets, hookSecretsAAD),
		CreatedAt: ms(h.CreatedAt), UpdatedAt: ms(h.UpdatedAt)}
}

func (db *DB) fromHookRow(r hookRow) (Hook, error) {
	// A secret that does not open stops nothing but its hook: it is marked, and the dispatcher
	// keeps it from calling its receiver without its secret.
	secrets, err := db.sealer.Open(r.SecretsEnc, hookSecretsAAD)
	return Hook{ID: r.ID, HookType: r.HookType, AgentID: r.AgentID, Enabled: r.Enabled, Priority: r.Priority,
		Doc: []byte(r.Doc), Secrets: secrets, SecretsUnreadable: err != nil,
		CreatedAt: fromMs(r.CreatedAt), UpdatedAt: fromMs(r.UpdatedAt)}, nil
}

// CreateHook inserts h and sets its ID and times.
func (db *DB) CreateHook(ctx context.Context, h *Hook) error {
	now := time.Now().UTC().Truncate(time.Millisecond)
	h.CreatedAt, h.UpdatedAt = now, now
	row := db.toHookRow(h)
	row.ID = 0
	err := db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := tx.Create(&row).Error; err != nil {
			return fmt.Errorf("storage: create hook: %w", err)
		}
		return db.bumpHooksVersion(tx)
	})
	if err != nil {
		return err
	}
	h.ID = row.ID
	return nil
}

// bumpHooksVersion moves the hooks' version counter, in the transaction of the write that
// changes them; on PostgreSQL it also notifies ChannelHooks, which goes out at the commit, so the
// other replicas look at once rather than at their next poll.
func (db *DB) bumpHooksVersion(tx *gorm.DB) error {
	if err := tx.Exec(`UPDATE hooks_version SET version = version + 1 WHERE id = 1`).Error; err != nil {
		return fmt.Errorf("storage: hooks version: %w", err)
	}
	if db.dialect == Postgres {
		if err := tx.Exec(`SELECT pg_notify(` + channelExpr(ChannelHooks) + `, '')`).Error; err != nil {
			return fmt.Errorf("storage: notify hook change: %w", err)
		}
	}
	return nil
}

// GetHook reads one hook; ErrNotFound if there is none.
func (db *DB) GetHook(ctx context.Context, id int64) (Hook, error) {
	var row hookRow
	err := db.r.WithContext(ctx).Where("id = ?", id).Take(&row).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Hook{}, ErrNotFound
	}
	if err != nil {
		return Hook{}, fmt.Errorf("storage: get hook %d: %w", id, err)
	}
	return db.fromHookRow(row)
}

// ListHooks returns the hooks that pass f, by id.
func (db *DB) ListHooks(ctx context.Context, f HookFilter) ([]Hook, error) {
	q := db.r.WithContext(ctx).Order("id")
	if f.HookType != "" {
		q = q.Where("hook_type = ?", f.HookType)
	}
	if f.AppliesTo != nil {
		q = q.Where("(agent_id = ? OR agent_id IS NULL)", *f.AppliesTo)
	}
	if f.Enabled != nil {
		q = q.Where("enabled = ?", *f.Enabled)
	}
	if f.AfterID != 0 {
		q = q.Where("id > ?", f.AfterID)
	}
	if f.Limit > 0 {
		q = q.Limit(f.Limit)
	}
	var rows []hookRow
	if err := q.Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: list hooks: %w", err)
	}
	out := make([]Hook, 0, len(rows))
	for _, r := range rows {
		h, err := db.fromHookRow(r)
		if err != nil {
			return nil, fmt.Errorf("storage: list hooks: %w", err)
		}
		out = append(out, h)
	}
	return out, nil
}

// UpdateHook replaces the stored hook h.ID; ErrNotFound if there is none.
func (db *DB) UpdateHook(ctx context.Context, h *Hook) error {
	h.UpdatedAt = time.Now().UTC().Truncate(time.Millisecond)
	row := db.toHookRow(h)
	return db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var before hookRow
		if err := tx.Select("secrets_enc").Where("id = ?", h.ID).Take(&before).Error; err != nil &&
			!errors.Is(err, gorm.ErrRecordNotFound) { // not found: oneRow below says so
			return fmt.Errorf("storage: update hook %d: %w", h.ID, err)
		}
		_, openErr := db.sealer.Open(before.SecretsEnc, hookSecretsAAD)
		res := tx.Model(&hookRow{}).Where("id = ?", h.ID).Updates(map[string]any{
			"hook_type": row.HookType, "agent_id": row.AgentID, "enabled": row.Enabled, "priority": row.Priority,
			"doc": row.Doc, "secrets_enc": row.SecretsEnc, "updated_at": row.UpdatedAt,
		})
		if err := oneRow(res, "update hook %d", h.ID); err != nil {
			return err
		}
		// A disabled hook's queued deliveries pause, and resume when it is enabled again; in the
		// same transaction, so no claim sees the hook in one state and its rows in the other.
		if err := tx.Exec(`UPDATE deliveries SET paused = ? WHERE hook_id = ? AND status = ? AND paused = ?`,
			!h.Enabled, h.ID, StatusPending, h.Enabled).Error; err != nil {
			return fmt.Errorf("storage: pause deliveries of hook %d: %w", h.ID, err)
		}
		// Healed: secrets no key opened are replaced by h's. What waited for them is due now; the
		// wait spent no attempt, so nothing is owed to the retry schedule.
		if errors.Is(openErr, ErrSealedUnreadable) {
			if err := tx.Exec(`UPDATE deliveries SET next_attempt_at = ? WHERE hook_id = ? AND status = ? AND next_attempt_at > ?`,
				ms(h.UpdatedAt), h.ID, StatusPending, ms(h.UpdatedAt)).Error; err != nil {
				return fmt.Errorf("storage: resume deliveries of hook %d: %w", h.ID, err)
			}
		}
		return db.bumpHooksVersion(tx)
	})
}

// DeleteHook removes a hook; ErrNotFound if there is none. Its queued deliveries end as dead
// ("hook deleted"); they and the finished ones stay for the record.
func (db *DB) DeleteHook(ctx context.Context, id int64) error {
	return db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		if err := oneRow(tx.Where("id = ?", id).Delete(&hookRow{}), "delete hook %d", id); err != nil {
			return err
		}
		if err := tx.Exec(`UPDATE deliveries SET status = ?, paused = ?, last_error = ?, updated_at = ?
			WHERE hook_id = ? AND status = ?`, StatusDead, false, "hook deleted", time.Now().UnixMilli(), id,
			StatusPending).Error; err != nil {
			return fmt.Errorf("storage: end deliveries of hook %d: %w", id, err)
		}
		return db.bumpHooksVersion(tx)
	})
}

// ResealSecrets seals every hook's secrets again with the first master key, in one transaction,
// and returns how many it re-sealed. A secret that opens with no key stops it with nothing changed.
func (db *DB) ResealSecrets(ctx context.Context) (int, error) {
	n := 0
	err := db.w.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		var rows []hookRow
		if err := tx.Where("secrets_enc IS NOT NULL").Order("id").Find(&rows).Error; err != nil {
			return fmt.Errorf("storage: reseal: %w", err)
		}
		for _, r := range rows {
			if len(r.SecretsEnc) == 0 {
				continue
			}
			pt, err := db.sealer.Open(r.SecretsEnc, hookSecretsAAD)
			if err != nil {
				return fmt.Errorf("hook %d: %w; nothing was re-sealed", r.ID, err)
			}
			res := tx.Model(&hookRow{}).Where("id = ?", r.ID).Update("secrets_enc", db.sealer.Seal(pt, hookSecretsAAD))
			if res.Error != nil {
				return fmt.Errorf("storage: reseal hook %d: %w", r.ID, res.Error)
			}
			n++
		}
		if n == 0 {
			return nil
		}
		return db.bumpHooksVersion(tx)
	})
	if err != nil {
		return 0, err
	}
	return n, nil
}

// SealedSecretKeys tells, for every hook with sealed secrets, which master key opens them: its
// index in Options' keys (0 = Key, 1 = OldKeys[0], …), or -1 when none does. It changes nothing.
func (db *DB) SealedSecretKeys(ctx context.Context) (map[int64]int, error) {
	var rows []hookRow
	if err := db.r.WithContext(ctx).Select("id", "secrets_enc").Where("secrets_enc IS NOT NULL").
		Order("id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("storage: sealed secrets: %w", err)
	}
	out := make(map[int64]int, len(rows))
	for _, r := range rows {
		if len(r.SecretsEnc) == 0 {
			continue
		}
		_, key, _ := db.sealer.open(r.SecretsEnc, hookSecretsAAD)
		out[r.ID] = key
	}
	return out, nil
}

// HasSealedSecrets reports whether any sealed value is stored: a new master key would lose them.
func (db *DB) HasSealedSecrets(ctx context.Context) (bool, error) {
	var n int64
	if err := db.r.WithContext(ctx).Model(&hookRow{}).Where("secrets_enc IS NOT NULL AND LENGTH(secrets_enc) > 0").
		Count(&n).Error; err != nil {
		return false, fmt.Errorf("storage: sealed secrets: %w", err)
	}
	return n > 0, nil
}

// HooksVersion changes whenever a hook is added, changed or removed, by this process or another
// sharing the database, so a cached registry can tell it is stale with one cheap query. Its
// first part is the counter every write moves (bumpHooksVersion), which never goes back; the
// rest (count, newest updated_at, sum of ids) also catches the writes of a replica older than
// the counter.
func (db *DB) HooksVersion(ctx context.Context) (string, error) {
	var v struct{ Counter, N, MaxUpdated, SumID int64 }
	err := db.r.WithContext(ctx).Raw(`SELECT (SELECT version FROM hooks_version WHERE id = 1) AS counter,
		COUNT(*) AS n, COALESCE(MAX(updated_at), 0) AS max_updated, COALESCE(SUM(id), 0) AS sum_id FROM hooks`).Scan(&v).Error
	if err != nil {
		return "", fmt.Errorf("storage: hooks version: %w", err)
	}
	return strconv.FormatInt(v.Counter, 10) + ":" + strconv.FormatInt(v.N, 10) + ":" + strconv.FormatInt(v.MaxUpdated, 10) + ":" +
		strconv.FormatInt(v.SumID, 10), nil
}
