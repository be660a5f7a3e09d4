package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/hookd/hookd/config"
	"github.com/hookd/hookd/storage"
)

func newKeysCmd() *cobra.Command {
	var path string
	rotate := &cobra.Command{
		Use:   "rotate [--config FILE]",
		Short: "seal every stored secret again with the first of masterKeys, in one transaction",
		Long: "With masterKeys: [new, old…] (or masterKeyFiles) configured, rotate opens every stored secret with any of the keys and " +
			"seals it with the first, all in one transaction, then reports how many it re-sealed. Afterwards the " +
			"old keys can be removed.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path, os.Environ())
			if err != nil {
				return codeError{2, err}
			}
			if len(cfg.MasterKeys) == 0 && len(cfg.MasterKeyFiles) == 0 && cfg.MasterKey == "" {
				return usageErrorf("keys rotate: configure masterKeys: [new, old…] (or masterKeyFiles) first")
			}
			db, err := openSealed(cmd.Context(), cfg, slog.New(slog.DiscardHandler))
			if err != nil {
				return err
			}
			defer db.Close()
			n, err := db.ResealSecrets(cmd.Context())
			if err != nil {
				return fmt.Errorf("keys rotate: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "re-sealed %d hook secrets with the first master key\n", n)
			return nil
		},
	}
	rotate.Flags().StringVar(&path, "config", os.Getenv("HOOKD_CONFIG"), "YAML config file (HOOKD_CONFIG)")
	return newGroup("keys", "master key rotation", rotate)
}

// openSealed opens the database with the configured master keys (see masterKeys), the first
// sealing. A key is never generated over a database that already holds sealed secrets: they
// would all be lost.
func openSealed(ctx context.Context, cfg config.Config, log *slog.Logger) (*storage.DB, error) {
	keys, created, err := masterKeys(cfg, true)
	if err != nil {
		return nil, err
	}
	db, err := storage.Open(ctx, cfg.Database, storage.Options{Key: keys[0], OldKeys: keys[1:], MaxConns: cfg.DatabaseMaxConns, Logger: log})
	if err != nil {
		return nil, err
	}
	if created {
		keyFile := filepath.Join(cfg.ResolvedDataDir(), "master.key")
		sealed, err := db.HasSealedSecrets(ctx)
		if err == nil && sealed {
			err = errors.New("masterKey: no master key was found (" + keyFile + " did not exist), and the database " +
				"holds sealed secrets a new key could never open; restore the key file or set masterKey")
		}
		if err != nil {
			db.Close()
			os.Remove(keyFile) // ours: created just now
			return nil, err
		}
		log.Warn("generated a master key; back it up, secrets cannot be read without it", "path", keyFile)
	}
	return db, nil
}

// masterKeys returns the configured master keys, the sealing one first: masterKeys or
// masterKeyFiles when set, else masterKey, else the key file in dataDir. With create the key file
// is generated when missing (created says so); without it a missing file gives no keys.
func masterKeys(cfg config.Config, create bool) (keys [][]byte, created bool, err error) {
	if keys, err := cfg.RotationKeys(); err != nil || len(keys) > 0 {
		return keys, false, err // validated by config; a key file may have changed since
	}
	if !create && cfg.MasterKey == "" {
		if _, err := os.Stat(filepath.Join(cfg.ResolvedDataDir(), "master.key")); errors.Is(err, os.ErrNotExist) {
			return nil, false, nil
		}
	}
	key, created, err := storage.LoadOrCreateKey(cfg.MasterKey, cfg.ResolvedDataDir())
	if err != nil {
		return nil, false, err
	}
	return [][]byte{key}, created, nil
}
