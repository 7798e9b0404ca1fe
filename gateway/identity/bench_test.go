package identity_test

import (
	"testing"

	"github.com/svc/engine/gateway/identity"
)

// BenchmarkCheckPassword is one sign-in's password check at the stated
// argon2id parameters (19 MiB, 2 passes, 1 lane): its ops/s per core is the
// sign-in rate one core sustains.
func BenchmarkCheckPassword(b *testing.B) {
	d := identity.HashPassword(identity.Argon2, "correct horse battery")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !identity.CheckPassword(d, "correct horse battery") {
			b.Fatal("no match")
		}
	}
}

func TestCheckPassword(t *testing.T) {
	d := identity.HashPassword(identity.Argon2, "correct horse battery")
	if !identity.CheckPassword(d, "correct horse battery") || identity.CheckPassword(d, "correct horse batterY") {
		t.Fatal("CheckPassword")
	}
	for _, bad := range []string{"", "$argon2id$v=19$m=999999999,t=1,p=1$AAAA$AAAA", "$argon2i$v=19$m=19456,t=2,p=1$AAAA$AAAA",
		"$argon2id$v=19$m=19456,t=2,p=1$!!$AAAA", d + "x"} {
		if identity.CheckPassword(bad, "correct horse battery") {
			t.Errorf("%q matched", bad)
		}
	}
}
