package storage

import "context"

// Exec runs a statement on db's writer: the tests edit rows behind the API's back, as an
// attacker with database access would.
func Exec(ctx context.Context, db *DB, q string, args ...any) error {
	return db.w.WithContext(ctx).Exec(q, args...).Error
}
