package daemon

import (
	"log/slog"
	"strings"

	"github.com/go-logr/logr"

	"github.com/nephio-project/ipam/service/node/nodeipam"
)

// importNVIDIAStore imports NVIDIA's node store when path is a regular
// file (nodeipam.ImportNVIDIA); a directory or nothing at path is left
// alone.
func importNVIDIAStore(path string, log logr.Logger, slogger *slog.Logger) error {
	rep, err := nodeipam.ImportNVIDIA(path, nodeipam.Options{Logger: slogger})
	if err != nil {
		return err
	}
	if rep.Imported {
		log.Info("imported NVIDIA's store", "path", path, "kept", path+nodeipam.NVIDIAStoreSuffix, "pools", rep.Pools,
			"reservations", rep.Reserved, "skipped", len(rep.Skipped))
		if len(rep.Skipped) > 0 {
			log.Info("reservations not imported", "which", strings.Join(rep.Skipped[:min(len(rep.Skipped), 20)], "; "))
		}
	}
	return nil
}
