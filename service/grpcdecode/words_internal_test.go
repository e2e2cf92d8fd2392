package grpcdecode

import (
	"errors"
	"testing"
)

// TestWords: protobuf-go's messages read the same whichever space it
// picked after "proto:".
func TestWords(t *testing.T) {
	for _, msg := range []string{"proto: invalid field number", "proto:\u00a0invalid field number", "invalid field number"} {
		if got := words(errors.New(msg)); got != "invalid field number" {
			t.Errorf("words(%q) = %q", msg, got)
		}
	}
}
