package storage

import (
	"context"
	"database/sql"
)

// Exec runs a statement on db's writer: the tests edit rows behind the API's back, as an
// attacker with database access would.
func Exec(ctx context.Context, db *DB, q string, args ...any) error {
	return db.w.WithContext(ctx).Exec(q, args...).Error
}

// Pool is the writer's connection pool (on PostgreSQL every query's): the tests read its limits
// and hold its connections.
func Pool(db *DB) *sql.DB {
	s, _ := db.w.DB()
	return s
}

// AfterVerifyPage runs f after each page of rows a chain verification reads, until the test ends.
func AfterVerifyPage(t interface{ Cleanup(func()) }, f func()) {
	afterVerifyPage = f
	t.Cleanup(func() { afterVerifyPage = nil })
}

// QueryRow scans the one row of q, read on db's writer, into dest.
func QueryRow(ctx context.Context, db *DB, q string, dest ...any) error {
	return db.w.WithContext(ctx).Raw(q).Row().Scan(dest...)
}
