package commands

import (
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/svc/engine/events"
)

// Limits of the values a client chooses, in characters (Unicode code points).
const (
	MaxClientOrderID = 64  // clientOrderId: [A-Za-z0-9._:-] only
	MaxReference     = 128 // a firm's referenceId
	MaxLabel         = 128 // an account's label
	MaxName          = 128 // a tenant's name; a registration's loginName
	MaxEmail         = 254 // an email address (local part at most 64)
	MaxReason        = 256 // an operator's free-text reason
	MaxShortName     = 64  // a registration's accountNumber and provider; an event type name
)

// ClientOrderID checks a clientOrderId: 1 to 64 characters of A-Z, a-z, 0-9,
// '.', '_', ':' and '-'. Anything else is 400 invalid_request naming field.
func ClientOrderID(field, v string) error { return Key(field, v, MaxClientOrderID) }

// Key checks an id that travels in paths, keys and derived ids (clientOrderId,
// brokerOrderId): 1 to max characters of A-Z, a-z, 0-9, '.', '_', ':' and '-'.
// Anything else is 400 invalid_request naming field.
func Key(field, v string, max int) error {
	if v == "" || len(v) > max {
		return BadField(field, map[string]any{"max": max}, "%s is required, 1 to %d characters", field, max)
	}
	for i := 0; i < len(v); i++ {
		if !keyByte(v[i]) {
			return BadField(field, map[string]any{"max": max},
				"%s may hold only letters, digits, '.', '_', ':' and '-'", field)
		}
	}
	return nil
}

func keyByte(b byte) bool {
	return (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9') ||
		b == '.' || b == '_' || b == ':' || b == '-'
}

// Identifier checks a required key the client names things by: 1 to max
// characters of printable text (see Text). Anything else is 400
// invalid_request naming field.
func Identifier(field, v string, max int) error {
	if v == "" {
		return BadField(field, map[string]any{"max": max}, "%s is required, 1 to %d characters", field, max)
	}
	return Text(field, v, max)
}

// Text checks optional free text (a label, a reason): at most max characters
// of valid UTF-8, every one printable (letters, marks, digits, punctuation,
// symbols and the ASCII space; no control characters such as U+0000, ESC,
// U+007F or C1, no format characters such as the bidi overrides
// U+202A-U+202E and U+2066-U+2069, no other spaces, no U+FFFD), and no space
// at either end. The empty string passes. Anything else is 400
// invalid_request naming field.
func Text(field, v string, max int) error {
	if !utf8.ValidString(v) {
		return BadField(field, nil, "%s must be valid UTF-8", field)
	}
	if utf8.RuneCountInString(v) > max {
		return BadField(field, map[string]any{"max": max}, "%s is at most %d characters", field, max)
	}
	for _, r := range v {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return BadField(field, nil, "%s must hold printable characters only: no control or format characters", field)
		}
	}
	if strings.TrimSpace(v) != v {
		return BadField(field, nil, "%s must not begin or end with a space", field)
	}
	return nil
}

// Email checks a plain email address: at most 254 characters, printable text
// (see Text), one address with no display name or angle brackets, a local part
// of at most 64 characters and a domain with a dot. Anything else is 400
// invalid_request naming field. Callers compare addresses lower-cased.
func Email(field, v string) error {
	if v == "" {
		return BadField(field, map[string]any{"max": MaxEmail}, "%s is required", field)
	}
	if err := Text(field, v, MaxEmail); err != nil {
		return err
	}
	at := strings.LastIndexByte(v, '@')
	if at < 1 || at > 64 || strings.ContainsAny(v, "<> \"(),;[]\\") || !plainAddress(v) {
		return BadField(field, nil, "%s must be a plain email address", field)
	}
	domain := v[at+1:]
	if !strings.Contains(domain, ".") || strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") {
		return BadField(field, nil, "%s must be a plain email address", field)
	}
	return nil
}

func plainAddress(v string) bool {
	a, err := mail.ParseAddress(v)
	return err == nil && a.Name == "" && a.Address == v
}

// Money bounds, in the account's currency.
var (
	// MaxAmount bounds one balance operation (credit, debit, adjustment) and a
	// starting balance, in magnitude.
	MaxAmount = events.MustDecimal("1000000000")
	// MaxBalance bounds the balance an account may be left with, in magnitude.
	MaxBalance = events.MustDecimal("1000000000000")
)

// Amount refuses a money amount above max in magnitude: 422 invalid_request
// with params.field and params.max.
func Amount(field string, v, max events.Decimal) error {
	if v.Abs().Cmp(max) > 0 {
		return InvalidField(field, map[string]any{"max": max.String()}, "%s is above the maximum of %s", field, max)
	}
	return nil
}
