package server

import (
	"errors"
	"log/slog"

	"github.com/nephio-project/ipam/service/internal/walmetrics"
	"github.com/nephio-project/ipam/service/store/file"
)

var _ Store = fileStore{}

// fileStore is the embedded file store with the histograms its log feeds.
type fileStore struct {
	*file.Store
	wal *walmetrics.Histograms
}

// walHistograms returns the histograms the store's log feeds.
func (s fileStore) walHistograms() *walmetrics.Histograms { return s.wal }

// openFileStore opens the embedded file store in cfg.DataDir; it takes
// snapshots itself every cfg.SnapshotEvery records.
func openFileStore(cfg Config, log *slog.Logger) (Store, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("store file: --data-dir is required")
	}
	h := walmetrics.New()
	s, err := file.Open(cfg.DataDir, file.Options{Logger: log, NoSync: cfg.NoSync, SnapshotEvery: cfg.SnapshotEvery,
		RecoverTruncated: cfg.RecoverTruncated, OnFsync: h.ObserveFsync, OnCommit: h.ObserveCommit})
	if err != nil {
		return nil, err
	}
	return fileStore{Store: s, wal: h}, nil
}
