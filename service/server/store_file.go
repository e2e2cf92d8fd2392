package server

import (
	"errors"
	"log/slog"
)

// openFileStore opens the file store in cfg.DataDir.
func openFileStore(cfg Config, log *slog.Logger) (Store, error) {
	return nil, errors.New("store file: waiting for service/store/file")
}
