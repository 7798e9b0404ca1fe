package provider

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/binary"
	"strings"
)

// ClientOrderIDPrefix starts every client order id the engine derives, so
// an order the trader placed elsewhere is told apart from the engine's.
const ClientOrderIDPrefix = "sv"

// ClientOrderIDLen is the length of every derived id: within the 36
// characters of ^[\.A-Z\:/a-z0-9_-]{1,36}$ that exchanges such as Binance
// take, and within the engine's own key alphabet.
const ClientOrderIDLen = 36

var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// ClientOrderID derives the provider's client order id from the account and
// the engine's clientOrderId: the same pair always gives the same id, so a
// retry after a crash asks the provider for the same order. It is
// ClientOrderIDPrefix and 34 characters of lowercase base32 of SHA-256 over
// both inputs (length-prefixed, so no two pairs share an input): 170 bits,
// far beyond any collision between orders.
func ClientOrderID(accountID, engineClientOrderID string) string {
	h := sha256.New()
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(accountID)))
	h.Write([]byte("provider-client-order-id\x00"))
	h.Write(n[:])
	h.Write([]byte(accountID))
	h.Write([]byte(engineClientOrderID))
	sum := h.Sum(nil)
	return ClientOrderIDPrefix + idEncoding.EncodeToString(sum)[:ClientOrderIDLen-len(ClientOrderIDPrefix)]
}

// Derived reports whether id has the shape of an id ClientOrderID makes:
// an order of the engine rather than one placed elsewhere.
func Derived(id string) bool {
	if len(id) != ClientOrderIDLen || !strings.HasPrefix(id, ClientOrderIDPrefix) {
		return false
	}
	for i := len(ClientOrderIDPrefix); i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= '2' && c <= '7') {
			return false
		}
	}
	return true
}
