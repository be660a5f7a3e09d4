package main

import (
	"context"
	"encoding/base64"
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
		Long: "With masterKeys: [new, old…] configured, rotate opens every stored secret with any of the keys and " +
			"seals it with the first, all in one transaction, then reports how many it re-sealed. Afterwards the " +
			"old keys can be removed from masterKeys.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := config.Load(path, os.Environ())
			if err != nil {
				return codeError{2, err}
			}
			if len(cfg.MasterKeys) == 0 && cfg.MasterKey == "" {
				return usageErrorf("keys rotate: configure masterKeys: [new, old…] first")
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

// openSealed opens the database with the configured master keys: masterKeys (the first seals),
// else masterKey, else the key file in dataDir, generated on first start. A key is never
// generated over a database that already holds sealed secrets: they would all be lost.
func openSealed(ctx context.Context, cfg config.Config, log *slog.Logger) (*storage.DB, error) {
	var key []byte
	var old [][]byte
	created := false
	if len(cfg.MasterKeys) > 0 {
		for i, s := range cfg.MasterKeys {
			k, err := base64.StdEncoding.DecodeString(s) // validated by config
			if err != nil {
				return nil, fmt.Errorf("masterKeys[%d]: %w", i, err)
			}
			if i == 0 {
				key = k
			} else {
				old = append(old, k)
			}
		}
	} else {
		var err error
		if key, created, err = storage.LoadOrCreateKey(cfg.MasterKey, cfg.ResolvedDataDir()); err != nil {
			return nil, err
		}
	}
	db, err := storage.Open(ctx, cfg.Database, storage.Options{Key: key, OldKeys: old, Logger: log})
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
