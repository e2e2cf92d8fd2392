package server

import (
	"errors"
	"log/slog"

	"github.com/nephio-project/ipam/service/store/file"
)

var _ Store = (*file.Store)(nil)

// openFileStore opens the embedded file store in cfg.DataDir; it takes
// snapshots itself every cfg.SnapshotEvery records.
func openFileStore(cfg Config, log *slog.Logger) (Store, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("store file: --data-dir is required")
	}
	return file.Open(cfg.DataDir, file.Options{Logger: log, NoSync: cfg.NoSync, SnapshotEvery: cfg.SnapshotEvery,
		RecoverTruncated: cfg.RecoverTruncated})
}
