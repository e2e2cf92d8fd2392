package cni

import (
	"strconv"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
)

// maxCNIArgsBytes caps CNI_ARGS.
const maxCNIArgsBytes = 64 << 10

// PodArgs name the pod a container belongs to.
type PodArgs struct {
	// Name is K8S_POD_NAME.
	Name string
	// Namespace is K8S_POD_NAMESPACE.
	Namespace string
	// UID is K8S_POD_UID, when the runtime passes it.
	UID string
}

// EnvArgs are the CNI_ARGS keys the plugin reads.
type EnvArgs struct {
	PodArgs
	// IP is a requested address (IP=192.168.0.30).
	IP string
}

// ParseCNIArgs reads CNI_ARGS (KEY=VALUE pairs separated by ';'). Unknown
// keys are ignored, whether or not IgnoreUnknown is set: runtimes pass keys
// for other plugins. A pair without '=' or a key given twice is an
// ErrInvalidEnvironmentVariables error.
func ParseCNIArgs(s string) (EnvArgs, error) {
	var a EnvArgs
	if s == "" {
		return a, nil
	}
	if len(s) > maxCNIArgsBytes {
		return a, types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_ARGS: longer than 64 KiB", "")
	}
	seen := map[string]bool{}
	for pair := range strings.SplitSeq(s, ";") {
		if pair == "" {
			continue
		}
		k, v, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return a, types.NewError(types.ErrInvalidEnvironmentVariables,
				capDetail("CNI_ARGS: "+quote(pair)+" is not KEY=VALUE"), "")
		}
		var dst *string
		switch k {
		case "K8S_POD_NAME":
			dst = &a.Name
		case "K8S_POD_NAMESPACE":
			dst = &a.Namespace
		case "K8S_POD_UID":
			dst = &a.UID
		case "IP":
			dst = &a.IP
		default:
			continue
		}
		if seen[k] {
			return a, types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_ARGS: "+k+" is given twice", "")
		}
		seen[k] = true
		if len(v) > 253 {
			return a, types.NewError(types.ErrInvalidEnvironmentVariables, capDetail("CNI_ARGS: "+k+" is longer than 253 characters"), "")
		}
		*dst = v
	}
	return a, nil
}

// quote quotes s for an error message, shortened to 64 bytes.
func quote(s string) string {
	if len(s) > 64 {
		s = s[:64] + "..."
	}
	return strconv.Quote(s)
}
