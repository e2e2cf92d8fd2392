package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/nephio-project/ipam/service/server"
	"github.com/nephio-project/ipam/service/server/servertest"
)

// TestMonitoringFiles checks the alert rules and the Grafana dashboard
// shipped in monitoring/ against what a running server exports: every
// metric they query exists, and every label their texts print is a label
// of the metrics of that expression.
func TestMonitoringFiles(t *testing.T) {
	// The file store, as ipam-server runs by default: its log's histograms too.
	ts := servertest.Start(t, server.Config{Demo: true, Store: "file", DataDir: t.TempDir()}, true)
	ts.Client(t) // waits until it serves
	resp, err := http.Get("http://" + ts.MetricsAddr + "/metrics")
	must(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	must(t, err)
	// Metric families and their labels, from the exposition text.
	labels := map[string]map[string]bool{}
	sample := regexp.MustCompile(`(?m)^(ipam_[a-z_]+?)(?:_bucket|_count|_sum)?(?:\{([^}]*)\})? `)
	for _, m := range sample.FindAllStringSubmatch(string(body), -1) {
		if labels[m[1]] == nil {
			labels[m[1]] = map[string]bool{}
		}
		for _, kv := range strings.Split(m[2], ",") {
			if k, _, ok := strings.Cut(kv, "="); ok {
				labels[m[1]][k] = true
			}
		}
	}
	metric := regexp.MustCompile(`ipam_[a-z_]+`)
	printed := regexp.MustCompile(`\{\{\s*(?:\$labels\.)?([a-z_]+)\s*\}\}`)
	check := func(where, expr, text string) {
		t.Helper()
		used := map[string]bool{}
		for _, name := range metric.FindAllString(expr, -1) {
			name = strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_count"), "_sum")
			if labels[name] == nil {
				t.Errorf("%s: %s is not exported (%s)", where, name, expr)
				continue
			}
			for l := range labels[name] {
				used[l] = true
			}
		}
		if len(used) == 0 && !strings.Contains(expr, "ipam_") {
			t.Errorf("%s: %q queries no ipam metric", where, expr)
		}
		for _, m := range printed.FindAllStringSubmatch(text, -1) {
			if !used[m[1]] {
				t.Errorf("%s: prints label %s that %s does not have", where, m[1], expr)
			}
		}
	}

	b, err := os.ReadFile("monitoring/alerts.yaml")
	must(t, err)
	var rules struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert       string            `json:"alert"`
				Expr        string            `json:"expr"`
				For         string            `json:"for"`
				Labels      map[string]string `json:"labels"`
				Annotations map[string]string `json:"annotations"`
			} `json:"rules"`
		} `json:"groups"`
	}
	must(t, yaml.UnmarshalStrict(b, &rules))
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			n++
			check("alert "+r.Alert, r.Expr, r.Annotations["summary"])
		}
	}
	if n == 0 {
		t.Fatal("monitoring/alerts.yaml holds no rule")
	}

	b, err = os.ReadFile("monitoring/dashboard.json")
	must(t, err)
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr         string `json:"expr"`
				LegendFormat string `json:"legendFormat"`
			} `json:"targets"`
		} `json:"panels"`
	}
	must(t, json.Unmarshal(b, &dash))
	if len(dash.Panels) == 0 {
		t.Fatal("monitoring/dashboard.json holds no panel")
	}
	for _, p := range dash.Panels {
		for _, tg := range p.Targets {
			check("panel "+p.Title, tg.Expr, tg.LegendFormat)
		}
	}
}
