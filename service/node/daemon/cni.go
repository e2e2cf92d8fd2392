package daemon

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// CNIConfFile is the name of the plugin's configuration in --cni-conf-dir.
const CNIConfFile = "nv-ipam.conf"

// PluginName is the plugin's file name in --cni-bin-dir.
const PluginName = "nv-ipam"

// cniConf is nv-ipam.conf.
type cniConf struct {
	DaemonSocket             string `json:"daemonSocket"`
	DaemonCallTimeoutSeconds int    `json:"daemonCallTimeoutSeconds"`
	LogFile                  string `json:"logFile"`
	LogLevel                 string `json:"logLevel"`
	ForcePoolName            bool   `json:"forcePoolName"`
}

// InstallCNI copies the plugin into the CNI bin directory and writes its
// configuration, each atomically (a temporary file in the same directory,
// fsynced, renamed), unless told to skip them.
func InstallCNI(c CNIConfig) error {
	if !c.SkipBinCopy {
		if err := os.MkdirAll(c.BinDir, 0o755); err != nil {
			return fmt.Errorf("copy the nv-ipam plugin: %w", err)
		}
		if err := copyAtomic(c.BinFile, filepath.Join(c.BinDir, PluginName), 0o755); err != nil {
			return fmt.Errorf("copy the nv-ipam plugin %s to %s: %w", c.BinFile, c.BinDir, err)
		}
	}
	if !c.SkipConfCreate {
		data, err := json.MarshalIndent(cniConf{DaemonSocket: c.DaemonSocket, DaemonCallTimeoutSeconds: c.CallTimeout,
			LogFile: c.LogFile, LogLevel: c.LogLevel, ForcePoolName: c.ForcePoolName}, "", "  ")
		if err != nil {
			return err
		}
		if err := os.MkdirAll(c.ConfDir, 0o755); err != nil {
			return fmt.Errorf("write %s: %w", CNIConfFile, err)
		}
		if err := writeAtomic(filepath.Join(c.ConfDir, CNIConfFile), 0o644, func(w io.Writer) error {
			_, err := w.Write(append(data, '\n'))
			return err
		}); err != nil {
			return fmt.Errorf("write %s: %w", CNIConfFile, err)
		}
	}
	return nil
}

func copyAtomic(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	if fi, err := in.Stat(); err != nil {
		return err
	} else if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", src)
	}
	return writeAtomic(dst, mode, func(w io.Writer) error {
		_, err := io.Copy(w, in)
		return err
	})
}

// writeAtomic writes dst through a temporary file in its directory.
func writeAtomic(dst string, mode os.FileMode, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer func() { _ = os.Remove(name) }()
	if err := write(tmp); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		_ = tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(name, dst)
}
