package web_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/nephio-project/ipam/service/ipam"
	"github.com/nephio-project/ipam/service/server/servertest"
	"github.com/nephio-project/ipam/service/server/web"
)

// TestPagesShowOnlySettledState: a page rendered while a change it shows
// is still uncommitted, and whose commit then fails, is not sent: the
// view renders it again once the change is undone.
func TestPagesShowOnlySettledState(t *testing.T) {
	c := &servertest.UndoingCommitter{Owner: "o", Undone: "undone"}
	a := ipam.New(ipam.WithCommitter(c))
	c.A = a
	for _, name := range []string{"kept", "undone"} {
		if err := a.CreateNetworkInstance(context.Background(), ipam.NetworkInstance{Key: ipam.Key{Owner: "o", Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	rec := httptest.NewRecorder()
	web.New(web.Config{Allocator: a}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(body, "kept") {
		t.Fatalf("status %d, body without network instance kept:\n%s", rec.Code, body)
	}
	if strings.Contains(body, "undone") {
		t.Fatal("the page shows network instance undone, whose commit failed")
	}
	if rec.Header().Get("Content-Security-Policy") == "" || rec.Header().Get("Content-Type") == "" {
		t.Fatalf("headers lost: %v", rec.Header())
	}
}
