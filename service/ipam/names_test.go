package ipam

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// TestAllocationNameTooLong: names up to MaxNameLength are stored.
func TestAllocationNameTooLong(t *testing.T) {
	a := New()
	if _, err := a.Sync(context.Background(), seedRequest()); err != nil {
		t.Fatal(err)
	}
	sel := Labels{LabelNetworkInstance: "vpc-1", LabelNetworkName: "net1"}
	_, err := a.Allocate(context.Background(), Allocation{Key: k(strings.Repeat("n", MaxNameLength+1)), Selector: sel})
	var e *Error
	if !errors.As(err, &e) || !errors.Is(err, ErrInvalid) || e.Field != "metadata.name" {
		t.Fatalf("a name of %d bytes: %v, want ErrInvalid on metadata.name", MaxNameLength+1, err)
	}
	res, err := a.Allocate(context.Background(), Allocation{Key: k(strings.Repeat("n", MaxNameLength)), Selector: sel})
	if err != nil || res.Prefix != mustPrefix("10.0.1.2/24") {
		t.Fatalf("a name of %d bytes: %v, %v", MaxNameLength, res, err)
	}
	checkInvariants(t, a)
}
