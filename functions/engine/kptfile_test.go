package engine_test

import (
	"testing"

	"github.com/kptdev/krm-functions-sdk/go/fn"

	"github.com/nephio-project/ipam/functions/engine"
)

// kptfileWith is a Kptfile whose status holds conditions (YAML lines at
// the list's indentation); empty means no status at all.
func kptfileWith(conditions string) string {
	k := "apiVersion: kpt.dev/v1\nkind: Kptfile\nmetadata:\n  name: pkg # the package\n"
	if conditions == "" {
		return k
	}
	return k + "status:\n  conditions:\n" + conditions
}

// SetKptfileCondition writes the four fields it owns and keeps, byte for
// byte, every field and condition other tools wrote.
func TestSetKptfileConditionKeepsWhatItDoesNotOwn(t *testing.T) {
	const (
		foreign = "  - type: config.porch.kpt.dev.Other # set by Porch\n" +
			"    status: \"False\"\n    reason: Waiting\n    observedGeneration: 3\n    lastTransitionTime: \"2026-01-02T03:04:05Z\"\n"
		ours = "  - type: ipam.nephio.org.IPAllocation\n    status: \"True\"\n    reason: Allocated\n    message: 2 allocated\n"
	)
	failed := engine.Condition{Type: "ipam.nephio.org.IPAllocation", Status: "False", Reason: "AllocationFailed", Message: "no free address"}
	bare := engine.Condition{Type: failed.Type, Status: "False"}
	want := "  - type: ipam.nephio.org.IPAllocation\n    status: \"False\"\n    reason: AllocationFailed\n    message: no free address\n"
	tests := []struct {
		name     string
		c        engine.Condition
		in, want string
		changed  bool
	}{
		{"no status: added", failed, kptfileWith(""), kptfileWith(want), true},
		{"foreign condition kept, ours appended", failed, kptfileWith(foreign), kptfileWith(foreign + want), true},
		{"ours updated in place, foreign kept in order", failed, kptfileWith(ours + foreign), kptfileWith(want + foreign), true},
		{"foreign fields of ours kept", failed, kptfileWith(ours + "    lastTransitionTime: \"2026-01-02T03:04:05Z\"\n    x-tool/note: keep me # a comment\n" + foreign),
			kptfileWith(want + "    lastTransitionTime: \"2026-01-02T03:04:05Z\"\n    x-tool/note: keep me # a comment\n" + foreign), true},
		{"a duplicate of ours removed", failed, kptfileWith(ours + foreign + ours), kptfileWith(want + foreign), true},
		{"reason and message left out when empty", bare, kptfileWith(foreign + ours),
			kptfileWith(foreign + "  - type: ipam.nephio.org.IPAllocation\n    status: \"False\"\n"), true},
		{"unchanged", failed, kptfileWith(foreign + want), kptfileWith(foreign + want), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k, err := fn.ParseKubeObject([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			changed, err := engine.SetKptfileCondition(k, tc.c)
			if err != nil {
				t.Fatal(err)
			}
			if got := k.String(); got != tc.want || changed != tc.changed {
				t.Errorf("changed %v (want %v), Kptfile:\n%s\nwant:\n%s", changed, tc.changed, got, tc.want)
			}
			if got, ok := engine.KptfileCondition(k, tc.c.Type); !ok || got != tc.c {
				t.Errorf("KptfileCondition = %+v, %v; want %+v", got, ok, tc.c)
			}
		})
	}
}

func TestSetKptfileConditionRefusesMalformedConditions(t *testing.T) {
	k, err := fn.ParseKubeObject([]byte(kptfileWith("") + "status:\n  conditions: nope\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := engine.SetKptfileCondition(k, engine.Condition{Type: "t", Status: "True"}); err == nil {
		t.Error("a status.conditions that is not a list was accepted")
	}
}
