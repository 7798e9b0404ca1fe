package order

import (
	"slices"
	"testing"
)

// The table is consistent: each type once, its times in force known, and
// every value parses back to itself while anything else is refused.
func TestTheVocabularyParsesWhatItLists(t *testing.T) {
	seen := map[Type]bool{}
	for _, sp := range Types() {
		if seen[sp.Type] {
			t.Errorf("order type %s is listed twice", sp.Type)
		}
		seen[sp.Type] = true
		if got, ok := ParseType(string(sp.Type)); !ok || got != sp.Type {
			t.Errorf("ParseType(%q) = %q, %v", sp.Type, got, ok)
		}
		if sp.Type.Spec().Type != sp.Type {
			t.Errorf("%s.Spec() is not its row", sp.Type)
		}
		if len(sp.TIFs) == 0 {
			t.Errorf("order type %s allows no time in force", sp.Type)
		}
		for _, f := range sp.TIFs {
			if !slices.Contains(TIFs(), f) {
				t.Errorf("order type %s allows %q, which is no time in force", sp.Type, f)
			}
		}
	}
	for _, s := range Sides() {
		if got, ok := ParseSide(string(s)); !ok || got != s || s.Opposite().Opposite() != s || s.Opposite() == s {
			t.Errorf("side %s does not parse back or has no opposite", s)
		}
	}
	for _, f := range TIFs() {
		if got, ok := ParseTIF(string(f)); !ok || got != f {
			t.Errorf("ParseTIF(%q) = %q, %v", f, got, ok)
		}
	}
	for _, bad := range []string{"", "MARKET", "Buy", "stop-limit", "gtd", " day"} {
		_, a := ParseType(bad)
		_, b := ParseSide(bad)
		_, c := ParseTIF(bad)
		if a || b || c {
			t.Errorf("%q parsed as a value", bad)
		}
	}
	if sp := Type("trailing").Spec(); sp.Type != "" || sp.Rests() || sp.Allows(Day) {
		t.Errorf("an unknown type's spec allows something: %+v", sp)
	}
}

func TestOneOfSpellsASet(t *testing.T) {
	for _, c := range []struct {
		in   []string
		want string
	}{{nil, ""}, {[]string{"a"}, "a"}, {[]string{"buy", "sell"}, "buy or sell"}, {TypeNames(), "market, limit, stop or stop_limit"}} {
		if got := OneOf(c.in); got != c.want {
			t.Errorf("OneOf(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
