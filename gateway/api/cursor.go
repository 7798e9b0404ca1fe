package api

import (
	"encoding/base64"
	"net/http"
	"regexp"
	"strings"

	"github.com/svc/engine/commands"
)

// PageCursor is the opaque cursor of one keyset-paged listing: a page's
// nextCursor names the key, below the listing's prefix, of the last item it
// gave, and the next request sends it back as cursor. A cursor names its
// listing, so one listing's cursor is refused by another.
type PageCursor struct {
	kind  string         // the token's tag: "<kind>."
	shape *regexp.Regexp // the keys the listing gives
}

// OrderCursor pages GET /api/account/orders; FillCursor GET /api/account/fills.
// Both list keys "<20-digit log sequence>/<id>".
var (
	OrderCursor = PageCursor{kind: "o1", shape: seqIDKey}
	FillCursor  = PageCursor{kind: "f1", shape: seqIDKey}
)

var seqIDKey = regexp.MustCompile(`^[0-9]{20}/[0-9A-Za-z_.:-]{1,128}$`)

// Encode is the cursor naming key.
func (c PageCursor) Encode(key string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.kind + "." + key))
}

// After reads the request's cursor: the key to list after, "" without
// one, or 400 invalid_cursor (params.field "cursor") for a cursor this
// listing did not give.
func (c PageCursor) After(r *http.Request) (string, error) {
	q := r.URL.Query()
	if !q.Has("cursor") {
		return "", nil
	}
	raw := q.Get("cursor")
	if len(raw) <= 300 {
		if b, err := base64.RawURLEncoding.DecodeString(raw); err == nil {
			if key, ok := strings.CutPrefix(string(b), c.kind+"."); ok && c.shape.MatchString(key) {
				return key, nil
			}
		}
	}
	return "", &commands.Refusal{Status: http.StatusBadRequest, Code: "invalid_cursor", Params: map[string]any{"field": "cursor"},
		Msg: "cursor is not one this listing gave: send back its nextCursor as it came"}
}
