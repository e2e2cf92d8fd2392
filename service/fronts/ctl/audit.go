package ctl

import (
	"context"
	"encoding/json"
	"fmt"
	"text/tabwriter"

	flag "github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/functions/audit"
)

// findingsError says that an audit found differences: the findings are
// printed, and ipamctl exits with ExitFindings.
type findingsError struct{ n int }

func (e *findingsError) Error() string { return fmt.Sprintf("%d finding(s)", e.n) }

type auditOpts struct{ allOwners bool }

func auditFlags(fs *flag.FlagSet) any {
	o := &auditOpts{}
	fs.BoolVar(&o.allOwners, "all-owners", false, "also report owners the server holds objects for that no audited package has")
	return o
}

// runAudit compares the kpt packages under the directories with the
// server and prints one line per finding.
func runAudit(ctx context.Context, c ipamv1.IPAMClient, out *printer, dirs []string, opts any) error {
	o := opts.(*auditOpts)
	if out.format == "name" {
		return usagef("audit: -o name: findings have no names; use table, wide, yaml or json")
	}
	findings, err := audit.Run(ctx, c, dirs, audit.Options{AllOwners: o.allOwners})
	if err != nil {
		return err
	}
	switch out.format {
	case "json", "yaml":
		if findings == nil {
			findings = []audit.Finding{}
		}
		b, err := json.MarshalIndent(findings, "", "  ")
		if err != nil {
			return err
		}
		if out.format == "yaml" {
			if b, err = yaml.JSONToYAML(b); err != nil {
				return err
			}
		} else {
			b = append(b, '\n')
		}
		if _, err := out.w.Write(b); err != nil {
			return err
		}
	default:
		if len(findings) == 0 {
			if _, err := fmt.Fprintln(out.w, "no findings: the packages and ipam-server agree"); err != nil {
				return err
			}
			break
		}
		tw := tabwriter.NewWriter(out.w, 0, 4, 2, ' ', 0)
		row(tw, "FINDING", "OWNER", "PACKAGE", "OBJECT", "DETAIL")
		for _, f := range findings {
			row(tw, f.Kind, f.Owner, f.Package, f.Object, f.Detail)
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	if len(findings) > 0 {
		return &findingsError{len(findings)}
	}
	return nil
}
