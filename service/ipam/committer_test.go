package ipam

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// scriptedCommitter refuses commits with the errors of script, in turn,
// and accepts the rest; it records what it accepted.
type scriptedCommitter struct {
	script    []error
	commits   int
	catchUps  int
	accepted  [][]Record
	catchUpFn func() error
}

func (c *scriptedCommitter) Commit(recs []Record) (func() error, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	c.commits++
	if len(c.script) > 0 {
		err := c.script[0]
		c.script = c.script[1:]
		if err != nil {
			return nil, err
		}
	}
	c.accepted = append(c.accepted, recs)
	return nil, nil
}

func (c *scriptedCommitter) CatchUp(error) error {
	c.catchUps++
	if c.catchUpFn != nil {
		return c.catchUpFn()
	}
	return nil
}

var errStale = fmt.Errorf("head moved: %w", ErrStale)

// TestCommitterRefusalRollsBack: a refused commit leaves the allocator
// exactly as before; ErrStale is retried after CatchUp up to the bound,
// other errors are returned at once.
func TestCommitterRefusalRollsBack(t *testing.T) {
	boom := errors.New("etcd down")
	stale := func(n int) []error {
		out := make([]error, n)
		for i := range out {
			out[i] = errStale
		}
		return out
	}
	cases := []struct {
		name         string
		script       []error
		wantErr      error
		wantCommits  int
		wantCatchUps int
	}{
		{"accepted", nil, nil, 1, 0},
		{"stale once, then accepted", stale(1), nil, 2, 1},
		{"stale up to the bound, then accepted", stale(MaxStaleRetries), nil, MaxStaleRetries + 1, MaxStaleRetries},
		{"stale beyond the bound", stale(MaxStaleRetries + 1), ErrStale, MaxStaleRetries + 1, MaxStaleRetries},
		{"other error", []error{boom}, boom, 1, 0},
	}
	calls := []struct {
		name string
		run  func(a *Allocator) error
	}{
		{"Allocate", func(a *Allocator) error {
			_, err := a.Allocate(context.Background(), Allocation{Key: key("a1"), Selector: net1})
			return err
		}},
		{"Sync", func(a *Allocator) error {
			_, err := a.Sync(context.Background(), SyncRequest{Owner: "app", Allocations: []Allocation{
				{Key: key("s1"), Selector: net1}, {Key: key("s2"), Selector: net1}, {Key: key("s3"), PrefixLength: 28, Selector: Labels{LabelNetworkInstance: "vpc-1", "purpose": "nat"}},
			}})
			return err
		}},
		{"CreateNetworkInstance", func(a *Allocator) error {
			return a.CreateNetworkInstance(context.Background(), NetworkInstance{Key: Key{Owner: "infra", Name: "vpc-2"}})
		}},
		{"DeletePrefix", func(a *Allocator) error { return a.DeletePrefix(context.Background(), Key{Owner: "infra", Name: "lo"}) }},
	}
	for _, call := range calls {
		for _, tc := range cases {
			t.Run(call.name+"/"+tc.name, func(t *testing.T) {
				a := fixture(t)
				before := dump(a)
				c := &scriptedCommitter{script: tc.script}
				a.committer = c
				err := call.run(a)
				if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				if c.commits != tc.wantCommits || c.catchUps != tc.wantCatchUps {
					t.Fatalf("commits %d, catch-ups %d; want %d, %d", c.commits, c.catchUps, tc.wantCommits, tc.wantCatchUps)
				}
				checkInvariants(t, a)
				if err != nil {
					if got := dump(a); got != before {
						t.Fatalf("a refused commit changed the state:\n%s\nwant:\n%s", got, before)
					}
					return
				}
				// What was accepted replays to the same state.
				b := fixture(t)
				for _, recs := range c.accepted {
					if err := b.Apply(recs); err != nil {
						t.Fatal(err)
					}
				}
				if dump(a) != dump(b) {
					t.Fatalf("accepted records replay to\n%s\nwant\n%s", dump(b), dump(a))
				}
			})
		}
	}
}

// TestCommitterCatchUpAppliesRemoteChange: a replica refused as stale
// applies the change another replica made (here: the same address taken)
// and its retry picks another address.
func TestCommitterCatchUpAppliesRemoteChange(t *testing.T) {
	a, other := fixture(t), fixture(t)
	res, err := other.Allocate(context.Background(), Allocation{Key: key("remote"), Selector: net1})
	if err != nil {
		t.Fatal(err)
	}
	remote := other.Snapshot(nil)
	c := &scriptedCommitter{script: []error{errStale}}
	c.catchUpFn = func() error { return a.Apply(remote) }
	a.committer = c
	mine, err := a.Allocate(context.Background(), Allocation{Key: key("local"), Selector: net1})
	if err != nil {
		t.Fatal(err)
	}
	if mine.Prefix == res.Prefix {
		t.Fatalf("both replicas got %s", mine.Prefix)
	}
	if c.catchUps != 1 {
		t.Fatalf("catch-ups = %d, want 1", c.catchUps)
	}
	checkInvariants(t, a)
}

// TestCommitterCatchUpError: a failing CatchUp ends the retries with its
// error and leaves the state unchanged.
func TestCommitterCatchUpError(t *testing.T) {
	a := fixture(t)
	before := dump(a)
	lost := errors.New("watch lost")
	a.committer = &scriptedCommitter{script: []error{errStale}, catchUpFn: func() error { return lost }}
	if _, err := a.Allocate(context.Background(), Allocation{Key: key("a1"), Selector: net1}); !errors.Is(err, lost) {
		t.Fatalf("err = %v, want %v", err, lost)
	}
	if dump(a) != before {
		t.Fatal("state changed")
	}
}
