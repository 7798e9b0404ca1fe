package news

import (
	"strings"
	"testing"
	"time"
)

func TestTagging(t *testing.T) {
	cases := map[string]string{
		"Crude climbs as OPEC+ cuts":            "CL",
		"Turmoil in markets":                    "", // no "oil" inside a word
		"Gold and the 10-year Treasury":         "GC,ZB,ZF,ZN",
		"European shares":                       "",
		"Euro zone PMI beats; ECB holds":        "6E",
		"Nasdaq leads as S&P 500 futures climb": "ES,NQ",
	}
	for text, want := range cases {
		if got := strings.Join(Tag(text), ","); got != want {
			t.Errorf("%q: %q, want %q", text, got, want)
		}
	}
	if got := strings.Join(Tag("nothing", "es", " CL "), ","); got != "CL,ES" {
		t.Errorf("given roots: %q", got)
	}
}

func TestCursorsAreOpaqueAndChecked(t *testing.T) {
	c := Cursor{T: time.Date(2024, 6, 3, 10, 0, 0, 5, time.UTC).UnixNano(), ID: "f-abc123"}
	got, err := DecodeCursor(c.Encode())
	if err != nil || got != c {
		t.Fatalf("round trip %+v %v", got, err)
	}
	for _, bad := range []string{"", "x", "bjEuMTIz", c.Encode() + "A", "bjEuenp6Lg", strings.Repeat("a", 300)} {
		if _, err := DecodeCursor(bad); err == nil {
			t.Errorf("accepted %q", bad)
		}
	}
}

func TestStorePagesNewestFirstPerRoot(t *testing.T) {
	s := NewStore()
	t0 := time.Date(2024, 6, 3, 0, 0, 0, 0, time.UTC)
	for i, id := range []string{"a", "b", "c", "d", "e"} {
		roots := []string{"ES"}
		if i%2 == 1 {
			roots = []string{"CL"}
		}
		s.Add(Item{ID: id, PublishedAt: t0.Add(time.Duration(i%3) * time.Minute), Roots: roots}) // ties on time
	}
	if s.Add(Item{ID: "a", PublishedAt: t0}) {
		t.Fatal("a known id is not stored twice")
	}
	var ids []string
	var after *Cursor
	for {
		items, next := s.Page("", after, 2)
		for _, it := range items {
			ids = append(ids, it.ID)
		}
		if next == nil {
			break
		}
		after = next
	}
	if got := strings.Join(ids, ","); got != "c,e,b,d,a" {
		t.Fatalf("order %s", got)
	}
	items, _ := s.Page("CL", nil, 10)
	if len(items) != 2 || items[0].ID != "b" {
		t.Fatalf("CL page %+v", items)
	}
	if items, next := s.Page("ZZ", nil, 10); items != nil || next != nil {
		t.Fatal("an unknown root is empty")
	}
}
