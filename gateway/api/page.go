package api

import (
	"encoding/base64"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/svc/engine/commands"
	"github.com/svc/engine/gateway/httpx"
)

// PageCursor is the opaque cursor of one keyset-paged listing: a page's
// nextCursor names the key, below the listing's prefix, of the last item it
// gave, and the next request sends it back as cursor. A cursor names its
// listing, so one listing's cursor is refused by another.
type PageCursor struct {
	kind  string         // the token's tag: "<kind>."
	shape *regexp.Regexp // the keys the listing gives
}

// OrderCursor pages GET /api/account/orders and FillCursor GET
// /api/account/fills, both over keys "<20-digit log sequence>/<id>";
// AccountCursor pages GET /api/partner/accounts and VenueAccountCursor a
// venue's accounts (both doors), over account ids.
var (
	OrderCursor        = PageCursor{kind: "o1", shape: seqIDKey}
	FillCursor         = PageCursor{kind: "f1", shape: seqIDKey}
	AccountCursor      = PageCursor{kind: "a1", shape: idKey}
	VenueAccountCursor = PageCursor{kind: "v1", shape: idKey}
)

// The shapes bound a cursor's key without narrowing the ids it may hold: a
// cursor this service gave always reads back, whatever an id's alphabet, and
// no key reaches a store with a control character or past 256 bytes.
var (
	seqIDKey = regexp.MustCompile(`^[0-9]{20}/[^\x00-\x1f\x7f]{1,256}$`)
	idKey    = regexp.MustCompile(`^[^\x00-\x1f\x7f]{1,256}$`)
)

// PageLimit reads the request's limit: def without one, else a whole
// number from 1 to max, or 400 invalid_request naming the bounds.
func PageLimit(r *http.Request, def, max int) (int, error) {
	s := r.URL.Query().Get("limit")
	if s == "" {
		return def, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 || n > max {
		return 0, httpx.Errorf(http.StatusBadRequest, commands.CodeInvalidRequest, "limit must be an integer from 1 to %d", max)
	}
	return n, nil
}

// Request reads a page request of this listing: its limit (PageLimit) and
// the key to list after (After).
func (c PageCursor) Request(r *http.Request, def, max int) (limit int, after string, err error) {
	if limit, err = PageLimit(r, def, max); err == nil {
		after, err = c.After(r)
	}
	return limit, after, err
}

// NextCursor is a page's nextCursor: the cursor naming next, null on the
// last page (next "").
func (c PageCursor) NextCursor(next string) any {
	if next == "" {
		return nil
	}
	return c.Encode(next)
}

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
	if len(raw) <= 400 {
		if b, err := base64.RawURLEncoding.DecodeString(raw); err == nil && utf8.Valid(b) {
			if key, ok := strings.CutPrefix(string(b), c.kind+"."); ok && c.shape.MatchString(key) {
				return key, nil
			}
		}
	}
	return "", &commands.Refusal{Malformed: true, Code: commands.CodeInvalidCursor, Params: map[string]any{"field": "cursor"},
		Msg: "cursor is not one this listing gave: send back its nextCursor as it came"}
}
