package commands_test

import (
	"fmt"
	"testing"

	"github.com/oklog/ulid/v2"

	"github.com/svc/engine/commands"
)

// A derived id is the command's id, the kind and the ordinal, as
// fmt.Sprintf("%s-%s%d") wrote it: replay derives the same ids.
func TestDerivedID(t *testing.T) {
	env := commands.Envelope{ID: ulid.MustParse("01HZX3V8Q9K2M4N6P8R0T2V4W6")}
	if got := env.DerivedID("", 0); got != env.ID.String() {
		t.Fatalf("DerivedID(\"\", 0) = %q, want %q", got, env.ID.String())
	}
	for _, c := range []struct {
		kind string
		n    int
	}{{"f", 1}, {"f", 12}, {"", 3}, {"c", 0}, {"stop", -4}, {"a-much-longer-kind-than-any-in-use", 1 << 40}} {
		if got, want := env.DerivedID(c.kind, c.n), fmt.Sprintf("%s-%s%d", env.ID, c.kind, c.n); got != want {
			t.Fatalf("DerivedID(%q, %d) = %q, want %q", c.kind, c.n, got, want)
		}
	}
}
