package web_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	ipamv1 "github.com/nephio-project/ipam/api/proto/ipam/v1"
	"github.com/nephio-project/ipam/service/server"
)

// EnvScreenshots names a directory where TestInBrowser writes screenshots
// of the pages (the web view's README shows them).
const EnvScreenshots = "IPAM_WEB_SCREENSHOTS"

// browser starts headless Chromium for t, or skips t, loudly, when there
// is none (make test installs Debian's chromium first).
func browser(t *testing.T) context.Context {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		msg := "SKIPPED: no Chromium on PATH, so the web view is not tested in a browser (install Debian's chromium: make browser)"
		fmt.Fprintln(os.Stderr, "web: "+msg)
		t.Skip(msg)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 800), chromedp.Flag("disable-gpu", true), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelBrowser(); cancelAlloc() })
	// The first action starts the browser, on a context without deadline
	// (a deadline there would end the browser); the rest have one.
	if err := chromedp.Do(bctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("starting %s: %v", path, err)
	}
	ctx, cancel := context.WithTimeout(bctx, 90*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// run runs action a and returns its value, failing t on error.
func run[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// do runs steps, failing t on error.
func do(t *testing.T, ctx context.Context, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, steps...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// shot writes a screenshot of the page to the screenshot directory, when
// one is set.
func shot(name string) chromedp.Action[chromedp.Void] {
	dir := os.Getenv(EnvScreenshots)
	return func(ctx context.Context, t *chromedp.Target) (chromedp.Void, error) {
		if dir == "" {
			return chromedp.Void{}, nil
		}
		png, err := chromedp.CaptureScreenshot()(ctx, t)
		if err != nil {
			return chromedp.Void{}, err
		}
		return chromedp.Void{}, os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644)
	}
}

// TestInBrowser drives the web view in headless Chromium: the tree with
// its utilization bars and free blocks, a prefix's allocations, search
// from the search box, and a live update after an Allocate.
func TestInBrowser(t *testing.T) {
	ctx := browser(t)
	s := startSite(t, server.Config{})
	s.api = s.srv.Client(t)
	s.seed(t, 40)
	if _, err := s.api.Allocate(context.Background(), &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{
		Key: &ipamv1.Key{Owner: "pkg-b", Namespace: "default", Name: "pods-a"}, NetworkInstance: "vpc-1", Kind: "network",
		PrefixLength: 20, Selector: map[string]string{"role": "pods"}}}); err != nil {
		t.Fatal(err)
	}

	// The network instance list and the tree.
	do(t, ctx, "the network instance list",
		chromedp.Navigate(s.base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`tr.vrf[data-vrf="vpc-1"] meter`)),
		shot("vrfs"))
	vrfBar := run(t, ctx, "the network instance's bar", chromedp.AttributeValue(chromedp.CSS(`tr.vrf[data-vrf="vpc-1"] meter`), "value"))
	do(t, ctx, "the tree",
		chromedp.Click(chromedp.CSS(`a[href="/vrf/vpc-1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-prefix="10.0.1.0/24"]`)),
		shot("tree"))
	netBar := run(t, ctx, "net1's bar", chromedp.AttributeValue(chromedp.CSS(`tr[data-prefix="10.0.1.0/24"] meter`), "value"))
	barWidth := run(t, ctx, "the bar's width", chromedp.Evaluate[float64](`document.querySelector('tr[data-prefix="10.0.1.0/24"] meter').getBoundingClientRect().width`))
	rows := run(t, ctx, "the tree's rows", chromedp.Evaluate[int](`document.querySelectorAll('tr.node').length`))
	// net1: gateway, network and broadcast addresses and 40 allocations of 256.
	if vrfBar.Value != "0.3" || netBar.Value != "16.7" || barWidth < 50 || rows != 4 {
		t.Fatalf("vpc-1 bar %q, net1 bar %q (%.0f px wide), %d tree rows; want 0.3, 16.7, a drawn bar, 4 rows (aggregate, net1, pool, its /20)", vrfBar.Value, netBar.Value, barWidth, rows)
	}
	free := run(t, ctx, "the pool's free blocks", chromedp.Text(chromedp.CSS(`tr[data-prefix="10.8.0.0/16"] td.free`)))
	if want := "10.8.16.0/20 10.8.32.0/19 10.8.64.0/18 10.8.128.0/17"; free != want {
		t.Errorf("the pool's free blocks: %q, want %q", free, want)
	}

	// Search from the box: an address finds its allocation.
	do(t, ctx, "search",
		chromedp.SetValue(chromedp.ID("q"), "10.0.1.7"),
		chromedp.Submit(chromedp.ID("q")),
		chromedp.WaitVisible(chromedp.CSS(`tr.holding`)),
		shot("search"))
	held := run(t, ctx, "the search result", chromedp.Text(chromedp.CSS(`tr.holding td:last-child`)))
	if want := "10.0.1.7/24 default/a0005 of pkg-a porch:default/blueprints/pkg-a"; held != want {
		t.Errorf("search 10.0.1.7: %q, want %q", held, want)
	}

	// A live update: the prefix page shows an allocation made after it loaded.
	do(t, ctx, "the prefix page",
		chromedp.Navigate(s.base+"/vrf/vpc-1/prefix?p=10.0.1.0/24"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-address="10.0.1.41/24"]`)),
		chromedp.WaitVisible(chromedp.CSS(`#live.on`)))
	if _, err := s.api.Allocate(context.Background(), &ipamv1.AllocateRequest{Allocation: &ipamv1.Allocation{
		Key:      &ipamv1.Key{Owner: "pkg-b", Namespace: "default", Name: "live-one"},
		Selector: map[string]string{"nephio.org/network-instance": "vpc-1", "nephio.org/network-name": "net1"}}}); err != nil {
		t.Fatal(err)
	}
	do(t, ctx, "the live update", chromedp.WaitVisible(chromedp.CSS(`tr[data-address="10.0.1.42/24"]`)), shot("prefix"))
	count := run(t, ctx, "the change count", chromedp.AttributeValue(chromedp.CSS(`#live`), "data-count"))
	if n, _ := strconv.Atoi(count.Value); n < 1 {
		t.Errorf("the page reloaded without counting a change event (data-count %q)", count.Value)
	}
}
