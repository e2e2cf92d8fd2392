package nodeipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/nephio-project/ipam/service/ipam"
)

// MaxNVIDIAStoreBytes caps the NVIDIA store file an import reads.
const MaxNVIDIAStoreBytes = 64 << 20

// Suffixes of the paths an import uses next to the store path.
const (
	// NVIDIAStoreSuffix is where NVIDIA's store file is kept after the
	// import: <path>.nvidia.json.
	NVIDIAStoreSuffix = ".nvidia.json"
	importSuffix      = ".import"
)

// nvRoot is the layout of NVIDIA's node store (version 1): reservations
// by pool key ("name" for an IPPool, "cidrpool/name" for a CIDRPool) and
// the pool's configuration at its last change.
type nvRoot struct {
	Version int                `json:"version"`
	Pools   map[string]nvPoolR `json:"pools"`
}

type nvPoolR struct {
	Entries        map[string]nvReservation `json:"entries"`
	LastPoolConfig string                   `json:"last_pool_config"`
}

type nvReservation struct {
	ContainerID   string `json:"container_id"`
	InterfaceName string `json:"interface_name"`
	IPAddress     string `json:"ip_address"`
	Metadata      struct {
		CreateTime   string `json:"create_time"`
		PodUUID      string `json:"pod_uuid"`
		PodName      string `json:"pod_name"`
		PodNamespace string `json:"pod_namespace"`
		DeviceID     string `json:"device_id"`
	} `json:"metadata"`
}

type nvPoolConfig struct {
	Subnet     string `json:"subnet"`
	StartIP    string `json:"startIP"`
	EndIP      string `json:"endIP"`
	Gateway    string `json:"gateway"`
	Exclusions []struct {
		StartIP string `json:"startIP"`
		EndIP   string `json:"endIP"`
	} `json:"exclusions"`
	Routes []struct {
		Dst string `json:"dst"`
	} `json:"routes"`
	DefaultGateway bool `json:"defaultGateway"`
}

// ImportReport says what an import did.
type ImportReport struct {
	// Imported is false when there was nothing to import.
	Imported bool
	Pools    int
	Reserved int
	// Skipped names the reservations that could not be imported.
	Skipped []string
}

// ImportNVIDIA imports NVIDIA's node store when path is a regular file:
// its reservations (pool, address, container id, interface, pod) and each
// pool's last configuration (the node's block) go into a new store of
// this engine, built beside path; then the file is renamed to
// <path>.nvidia.json and the new store renamed to path. A crash at any
// point leaves either NVIDIA's file at path (the import starts over) or
// the new store (finished on the next call). A directory or nothing at
// path is left alone.
func ImportNVIDIA(path string, opts Options) (ImportReport, error) {
	staging, kept := path+importSuffix, path+NVIDIAStoreSuffix
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A crash between the two renames: finish the second.
		if _, err := os.Stat(staging); err == nil {
			if _, err := os.Stat(kept); err == nil {
				return ImportReport{Imported: true}, renameSync(staging, path)
			}
		}
		return ImportReport{}, nil
	case err != nil:
		return ImportReport{}, err
	case fi.IsDir():
		return ImportReport{}, nil
	case !fi.Mode().IsRegular():
		return ImportReport{}, fmt.Errorf("store %s: neither a directory nor NVIDIA's store file", path)
	}
	f, err := os.Open(path)
	if err != nil {
		return ImportReport{}, err
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxNVIDIAStoreBytes+1))
	_ = f.Close()
	if err != nil {
		return ImportReport{}, fmt.Errorf("NVIDIA store %s: %w", path, err)
	}
	if len(data) > MaxNVIDIAStoreBytes {
		return ImportReport{}, fmt.Errorf("NVIDIA store %s: larger than %d bytes", path, MaxNVIDIAStoreBytes)
	}
	var root nvRoot
	if err := json.Unmarshal(data, &root); err != nil {
		return ImportReport{}, fmt.Errorf("NVIDIA store %s: %w", path, err)
	}
	if root.Version != 1 {
		return ImportReport{}, fmt.Errorf("NVIDIA store %s: version %d; this import reads version 1", path, root.Version)
	}
	if err := os.RemoveAll(staging); err != nil {
		return ImportReport{}, err
	}
	e, err := Open(staging, opts)
	if err != nil {
		return ImportReport{}, err
	}
	rep, err := e.importRoot(&root)
	if cerr := e.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return rep, fmt.Errorf("NVIDIA store %s: %w", path, err)
	}
	if err := renameSync(path, kept); err != nil {
		return rep, err
	}
	rep.Imported = true
	return rep, renameSync(staging, path)
}

func renameSync(from, to string) error {
	if err := os.Rename(from, to); err != nil {
		return err
	}
	d, err := os.Open(filepath.Dir(to))
	if err != nil {
		return err
	}
	defer func() { _ = d.Close() }()
	return d.Sync()
}

// importRoot loads NVIDIA's pools and reservations: each pool's networks
// are set up without exclusions, every reservation is allocated at its
// address, and only then is each block set up (exclusions over what is
// not the block nor held).
func (e *Engine) importRoot(root *nvRoot) (ImportReport, error) {
	ctx := context.Background()
	var rep ImportReport
	for _, pk := range slices.Sorted(maps.Keys(root.Pools)) {
		pr := root.Pools[pk]
		k := PoolKey{Type: IPPool, Name: pk}
		if t, name, ok := strings.Cut(pk, "/"); ok {
			k = PoolKey{Type: PoolType(t), Name: name}
		}
		if (k.Type != IPPool && k.Type != CIDRPool) || k.Name == "" || checkText("pool", k.Name, ipam.MaxNameLength) != nil {
			rep.Skipped = append(rep.Skipped, "pool "+ipam.Quote(pk))
			continue
		}
		blk := blockOfNVIDIAConfig(pr.LastPoolConfig)
		type res struct {
			r  nvReservation
			ip netip.Addr
		}
		var rs []res
		nets := map[netip.Prefix]bool{}
		if blk != nil {
			nets[blk.Network] = true
		}
		for _, id := range slices.Sorted(maps.Keys(pr.Entries)) {
			r := pr.Entries[id]
			ip, err := netip.ParseAddr(r.IPAddress)
			if err != nil || checkContainerID("containerID", r.ContainerID) != nil || checkIfName("interfaceName", r.InterfaceName) != nil {
				rep.Skipped = append(rep.Skipped, k.String()+" "+ipam.Quote(id))
				continue
			}
			ip = ip.Unmap()
			rs = append(rs, res{r, ip})
			if blk == nil || !blk.Network.Contains(ip) {
				nets[netip.PrefixFrom(ip, ip.BitLen())] = true
			}
		}
		p := &pool{key: k, vrf: vrfName(k), block: blk}
		e.mu.Lock()
		e.pools[k] = p
		err := e.savePools()
		e.mu.Unlock()
		if err != nil {
			return rep, err
		}
		req := ipam.SyncRequest{Owner: p.vrf, NetworkInstances: []ipam.NetworkInstance{{Key: ipam.Key{Owner: p.vrf, Name: p.vrf},
			Prefixes: []ipam.VRFPrefix{{Prefix: netip.MustParsePrefix("0.0.0.0/0")}, {Prefix: netip.MustParsePrefix("::/0")}}}}}
		for n := range nets {
			req.Prefixes = append(req.Prefixes, e.network(p, n, []ipam.AddrRange{{Start: n.Addr(), End: lastAddr(n)}}))
		}
		if _, err := e.a.Sync(ctx, req); err != nil {
			return rep, fmt.Errorf("%s: %w", k, err)
		}
		for _, x := range rs {
			n := netip.PrefixFrom(x.ip, x.ip.BitLen())
			if blk != nil && blk.Network.Contains(x.ip) {
				n = blk.Network
			}
			created, err := time.Parse(time.RFC3339Nano, x.r.Metadata.CreateTime)
			if err != nil {
				created = e.now()
			}
			pod := Pod{Name: x.r.Metadata.PodName, Namespace: x.r.Metadata.PodNamespace, UID: x.r.Metadata.PodUUID, DeviceID: x.r.Metadata.DeviceID}
			r := Request{Type: k.Type, Pools: []string{k.Name}, ContainerID: x.r.ContainerID, IfName: x.r.InterfaceName, Pod: pod}
			if r.Validate() != nil {
				rep.Skipped = append(rep.Skipped, k.String()+" "+ipam.Quote(x.r.ContainerID+"_"+x.r.InterfaceName))
				continue
			}
			a := ipam.Allocation{Key: allocKey(ownerOf(x.r.ContainerID, x.r.InterfaceName), k), NetworkInstance: p.vrf, Kind: ipam.KindNetwork,
				Prefix: netip.PrefixFrom(x.ip, n.Bits()), Selector: ipam.Labels{ipam.LabelNetworkInstance: p.vrf, ipam.LabelNetworkName: netName(n)},
				Labels: podLabels(pod, created)}
			if _, err := e.a.Allocate(ctx, a); err != nil {
				rep.Skipped = append(rep.Skipped, k.String()+" "+ipam.Quote(x.r.ContainerID+"_"+x.r.InterfaceName)+": "+capMsg(err.Error()))
				continue
			}
			rep.Reserved++
		}
		p.mu.Lock()
		err = e.syncInfra(ctx, p)
		p.mu.Unlock()
		if err != nil {
			return rep, err
		}
		rep.Pools++
	}
	return rep, nil
}

// blockOfNVIDIAConfig reads the pool configuration NVIDIA's store keeps
// (the node's block at the last change); nil when it does not parse.
func blockOfNVIDIAConfig(s string) *Block {
	var c nvPoolConfig
	if s == "" || json.Unmarshal([]byte(s), &c) != nil {
		return nil
	}
	n, err1 := netip.ParsePrefix(c.Subnet)
	start, err2 := netip.ParseAddr(c.StartIP)
	end, err3 := netip.ParseAddr(c.EndIP)
	if err1 != nil || err2 != nil || err3 != nil {
		return nil
	}
	b := &Block{Network: n.Masked(), Start: start.Unmap(), End: end.Unmap(), DefaultGateway: c.DefaultGateway}
	if gw, err := netip.ParseAddr(c.Gateway); err == nil {
		b.Gateway = gw.Unmap()
	}
	for _, x := range c.Exclusions {
		s, err1 := netip.ParseAddr(x.StartIP)
		e, err2 := netip.ParseAddr(x.EndIP)
		if err1 == nil && err2 == nil && !e.Less(s) {
			b.Exclusions = append(b.Exclusions, ipam.AddrRange{Start: s.Unmap(), End: e.Unmap()})
		}
	}
	b.Exclusions = clipExclusions(b.Exclusions, b.Start, b.End)
	for _, r := range c.Routes {
		if p, err := netip.ParsePrefix(r.Dst); err == nil {
			b.Routes = append(b.Routes, p.Masked())
		}
	}
	if b.check() != nil {
		return nil
	}
	return b
}
