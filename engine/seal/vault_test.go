package seal_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/engine/seal"
)

const bucket = "TEST_SEALKEYS"

// jetStream is an embedded JetStream server in a temporary directory,
// reached in process (it listens on no port); it answers the connection and
// the server's store directory. Everything is closed at the test's end.
func jetStream(t testing.TB) (jetstream.JetStream, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := server.NewServer(&server.Options{JetStream: true, StoreDir: dir, DontListen: true, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	if !s.ReadyForConnections(10 * time.Second) {
		s.Shutdown()
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
	nc, err := nats.Connect("", nats.InProcessServer(s))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js, dir
}

// settings holds one fresh KEK per id, so a test can configure any subset.
type settings map[string]string

func newSettings(t testing.TB, ids ...string) settings {
	s := settings{}
	for _, id := range ids {
		e, err := seal.NewKeySetting(id)
		if err != nil {
			t.Fatal(err)
		}
		s[id] = e
	}
	return s
}

// vault opens the test bucket with the KEKs ids, the first current.
func (s settings) vault(t testing.TB, js jetstream.JetStream, ids ...string) *seal.Vault {
	t.Helper()
	var entries []string
	for _, id := range ids {
		entries = append(entries, s[id])
	}
	keys, err := seal.ParseKeys(strings.Join(entries, ","))
	if err != nil {
		t.Fatal(err)
	}
	v, err := seal.NewVault(context.Background(), seal.Config{JS: js, Bucket: bucket, Keys: keys})
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// material is every KEK of s in base64, to look for in errors.
func (s settings) material() []string {
	var m []string
	for _, e := range s {
		_, k, _ := strings.Cut(e, ":")
		m = append(m, k, k[:16])
	}
	return m
}

func kvKey(linkID string) string {
	return "link." + base64.RawURLEncoding.EncodeToString([]byte(linkID))
}

func bucketKV(t testing.TB, js jetstream.JetStream) jetstream.KeyValue {
	kv, err := js.KeyValue(context.Background(), bucket)
	if err != nil {
		t.Fatal(err)
	}
	return kv
}

// onDisk reports whether any file of the server's store holds b.
func onDisk(t *testing.T, dir string, b []byte) bool {
	t.Helper()
	found := false
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(data, b) {
			found = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// waitFor calls f until it returns nil, failing the test with its last error
// after d.
func waitFor(t *testing.T, d time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestSealOpen(t *testing.T) {
	ctx := context.Background()
	js, _ := jetStream(t)
	v := newSettings(t, "k1").vault(t, js, "k1")
	for _, c := range []struct {
		name, link string
		plain      []byte
	}{
		{"an API secret", "link-1", []byte("NhqPtmdSJYdKjVHjA7PZj4Mge3R5YNiP1e3UZjInClVN65XAbvqqM6A7H5fATj0j")},
		{"empty", "link-2", []byte{}},
		{"binary", "link-3", []byte{0, 1, 2, 0xff}},
		{"the longest", "link-4", bytes.Repeat([]byte("x"), seal.MaxPlaintext)},
		{"a link id of any bytes", "链接/\x00.*>", []byte("s")},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := v.Seal(ctx, c.link, c.plain)
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(s.Ciphertext, c.plain) && len(c.plain) > 2 {
				t.Fatal("the ciphertext holds the plaintext")
			}
			// Through the binary form, as an event carries it.
			b, err := s.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			back, err := seal.Parse(b)
			if err != nil {
				t.Fatal(err)
			}
			got, err := v.Open(ctx, c.link, back)
			if err != nil || !bytes.Equal(got, c.plain) {
				t.Fatalf("opened %d bytes, %v", len(got), err)
			}
		})
	}

	// Sealing again for a link uses its data key, with a new nonce.
	a, _ := v.Seal(ctx, "link-1", []byte("same"))
	b, _ := v.Seal(ctx, "link-1", []byte("same"))
	if a.DataKey != b.DataKey || a.Nonce == b.Nonce || bytes.Equal(a.Ciphertext, b.Ciphertext) {
		t.Fatalf("two seals of a link: keys %s %s, nonces equal %v", a.DataKey, b.DataKey, a.Nonce == b.Nonce)
	}
	if h, err := bucketKV(t, js).History(ctx, kvKey("link-1")); err != nil || len(h) != 1 {
		t.Fatalf("link-1 has %d stored data keys, %v; want one", len(h), err)
	}

	if _, err := v.Seal(ctx, "link-5", make([]byte, seal.MaxPlaintext+1)); !errors.Is(err, seal.ErrTooLarge) {
		t.Fatalf("a secret past MaxPlaintext: %v", err)
	}
	if _, err := v.Seal(ctx, "", []byte("s")); err == nil {
		t.Fatal("an empty link id was taken")
	}
	if _, err := v.Seal(ctx, strings.Repeat("l", 257), []byte("s")); err == nil {
		t.Fatal("a link id of 257 bytes was taken")
	}
}

func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	js, _ := jetStream(t)
	v := newSettings(t, "k1").vault(t, js, "k1")
	a, err := v.Seal(ctx, "link-a", []byte("secret of a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Seal(ctx, "link-b", []byte("secret of b")); err != nil {
		t.Fatal(err)
	}
	flip := func(f func(*seal.Sealed)) seal.Sealed {
		c := seal.Sealed{DataKey: a.DataKey, Nonce: a.Nonce, Ciphertext: append([]byte(nil), a.Ciphertext...)}
		f(&c)
		return c
	}
	for _, c := range []struct {
		name   string
		link   string
		s      seal.Sealed
		wantIs error
	}{
		{"another link's secret", "link-b", a, seal.ErrDestroyed},
		{"on a link that has no data key", "link-c", a, seal.ErrDestroyed},
		{"a ciphertext byte changed", "link-a", flip(func(s *seal.Sealed) { s.Ciphertext[3] ^= 0x10 }), seal.ErrNotAuthentic},
		{"the tag cut", "link-a", flip(func(s *seal.Sealed) { s.Ciphertext = s.Ciphertext[:len(s.Ciphertext)-4] }), seal.ErrNotAuthentic},
		{"the nonce changed", "link-a", flip(func(s *seal.Sealed) { s.Nonce[0] ^= 1 }), seal.ErrNotAuthentic},
		{"the data key id changed", "link-a", flip(func(s *seal.Sealed) { s.DataKey[15] ^= 1 }), seal.ErrDestroyed},
		{"no secret", "link-a", seal.Sealed{}, seal.ErrMalformed},
	} {
		if got, err := v.Open(ctx, c.link, c.s); !errors.Is(err, c.wantIs) || got != nil {
			t.Errorf("%s: opened %q, %v; want %v", c.name, got, err, c.wantIs)
		}
	}

	// Someone who can write the bucket copies a's stored data key to b's:
	// it does not open there (its wrapping is bound to its link).
	kv := bucketKV(t, js)
	e, err := kv.Get(ctx, kvKey("link-a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(ctx, kvKey("link-b"), e.Value()); err != nil {
		t.Fatal(err)
	}
	if got, err := v.Open(ctx, "link-b", a); err == nil || got != nil || !strings.Contains(err.Error(), "does not open") {
		t.Fatalf("a's data key moved to b opened a's secret there: %q, %v", got, err)
	}
}

// Unlinking destroys the data key: nothing sealed under it opens again, and
// no copy of it is left, neither in the bucket nor on the server's disk.
func TestDestroy(t *testing.T) {
	ctx := context.Background()
	js, dir := jetStream(t)
	v := newSettings(t, "k1").vault(t, js, "k1")
	kv := bucketKV(t, js)
	s, err := v.Seal(ctx, "link-d", []byte("to be shredded"))
	if err != nil {
		t.Fatal(err)
	}
	kept, err := v.Seal(ctx, "link-kept", []byte("stays"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := kv.Get(ctx, kvKey("link-d"))
	if err != nil {
		t.Fatal(err)
	}
	wrapped := e.Value()
	waitFor(t, 5*time.Second, func() error {
		if !onDisk(t, dir, wrapped) {
			return errors.New("the stored data key is not on disk yet")
		}
		return nil
	})

	if err := v.Destroy(ctx, "link-d"); err != nil {
		t.Fatal(err)
	}
	if got, err := v.Open(ctx, "link-d", s); !errors.Is(err, seal.ErrDestroyed) || got != nil {
		t.Fatalf("opened after Destroy: %q, %v", got, err)
	}
	// The bucket's history of the key holds its purge marker, no value.
	hist, err := kv.History(ctx, kvKey("link-d"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		if h.Operation() == jetstream.KeyValuePut || len(h.Value()) != 0 {
			t.Fatalf("revision %d (%s) of the destroyed key is left, %d bytes", h.Revision(), h.Operation(), len(h.Value()))
		}
	}
	// So do the stream's messages, read one by one.
	st, err := js.Stream(ctx, "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	info, err := st.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := st.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(m.Subject, kvKey("link-d")) && len(m.Data) != 0 {
			t.Fatalf("message %d of the destroyed key holds %d bytes", seq, len(m.Data))
		}
	}
	// And the server's files: the erased message was overwritten.
	waitFor(t, 5*time.Second, func() error {
		if onDisk(t, dir, wrapped) {
			return errors.New("the destroyed data key is still in the server's files")
		}
		return nil
	})

	// The other link is untouched; destroying again is no error.
	if got, err := v.Open(ctx, "link-kept", kept); err != nil || string(got) != "stays" {
		t.Fatalf("another link's secret: %q, %v", got, err)
	}
	if err := v.Destroy(ctx, "link-d"); err != nil {
		t.Fatal(err)
	}
	if err := v.Destroy(ctx, "never-sealed"); err != nil {
		t.Fatal(err)
	}
	// Sealing for the link again makes a new data key; the old secret stays shut.
	s2, err := v.Seal(ctx, "link-d", []byte("relinked"))
	if err != nil {
		t.Fatal(err)
	}
	if s2.DataKey == s.DataKey {
		t.Fatal("the destroyed data key came back")
	}
	if got, err := v.Open(ctx, "link-d", s); !errors.Is(err, seal.ErrDestroyed) {
		t.Fatalf("the old secret opened under the new data key: %q, %v", got, err)
	}
	if got, err := v.Open(ctx, "link-d", s2); err != nil || string(got) != "relinked" {
		t.Fatalf("the new secret: %q, %v", got, err)
	}
}

// Rotation: sealed under k1; with k2,k1 a Rotate re-wraps every data key
// under k2; with k2 alone every secret still opens, a destroyed link stays
// destroyed, and the copies under k1 are gone from the server's files.
func TestRotate(t *testing.T) {
	ctx := context.Background()
	js, dir := jetStream(t)
	keys := newSettings(t, "k1", "k2", "k3")
	v1 := keys.vault(t, js, "k1")
	kv := bucketKV(t, js)
	sealed := map[string]seal.Sealed{}
	var underK1 [][]byte
	for i := range 5 {
		link := fmt.Sprintf("link-%d", i)
		s, err := v1.Seal(ctx, link, []byte("secret "+link))
		if err != nil {
			t.Fatal(err)
		}
		sealed[link] = s
		e, err := kv.Get(ctx, kvKey(link))
		if err != nil {
			t.Fatal(err)
		}
		underK1 = append(underK1, e.Value())
	}
	if err := v1.Destroy(ctx, "link-4"); err != nil {
		t.Fatal(err)
	}

	v21 := keys.vault(t, js, "k2", "k1")
	n, err := v21.Rotate(ctx)
	if err != nil || n != 4 {
		t.Fatalf("rotated %d, %v; want 4", n, err)
	}
	if n, err := v21.Rotate(ctx); err != nil || n != 0 {
		t.Fatalf("a second rotation re-wrapped %d, %v; want 0", n, err)
	}

	v2 := keys.vault(t, js, "k2")
	for link, s := range sealed {
		got, err := v2.Open(ctx, link, s)
		if link == "link-4" {
			if !errors.Is(err, seal.ErrDestroyed) {
				t.Fatalf("the destroyed link opened after rotation: %q, %v", got, err)
			}
			continue
		}
		if err != nil || string(got) != "secret "+link {
			t.Fatalf("%s under k2 alone: %q, %v", link, got, err)
		}
		if h, err := kv.History(ctx, kvKey(link)); err != nil || len(h) != 1 {
			t.Fatalf("%s: %d revisions kept after rotation, %v; want 1", link, len(h), err)
		}
	}
	waitFor(t, 5*time.Second, func() error {
		for i, b := range underK1 {
			if onDisk(t, dir, b) {
				return fmt.Errorf("the copy of link-%d's data key under k1 is still in the server's files", i)
			}
		}
		return nil
	})
	// Seal with k2 alone: existing links keep their data key.
	s, err := v2.Seal(ctx, "link-0", []byte("again"))
	if err != nil || s.DataKey != sealed["link-0"].DataKey {
		t.Fatalf("sealed again after rotation under another data key, %v", err)
	}

	// A keyring without the KEK a data key is under: the error names that KEK,
	// by id, never by key, and Rotate goes on past it.
	v3 := keys.vault(t, js, "k3")
	_, err = v3.Open(ctx, "link-1", sealed["link-1"])
	var u *seal.UnknownKEKError
	if !errors.As(err, &u) || u.KEK != "k2" || !errors.Is(err, seal.ErrUnknownKEK) || !strings.Contains(err.Error(), `"k2"`) {
		t.Fatalf("open with k3 alone: %v; want an UnknownKEKError naming k2", err)
	}
	n, err = v3.Rotate(ctx)
	if n != 0 || !errors.As(err, &u) || u.KEK != "k2" {
		t.Fatalf("rotate with k3 alone: %d, %v; want 0 and an UnknownKEKError naming k2", n, err)
	}
	if _, err := v3.Seal(ctx, "link-2", []byte("s")); !errors.Is(err, seal.ErrUnknownKEK) {
		t.Fatalf("seal for a link under k2 with k3 alone: %v", err)
	}
	for _, m := range keys.material() {
		if strings.Contains(err.Error(), m) {
			t.Fatalf("error %q holds key material", err)
		}
	}
}

// Concurrent first Seals of a link agree on one data key (the bucket's
// Create is first-writer-wins), and every secret they sealed opens.
func TestConcurrentSealOneDataKey(t *testing.T) {
	ctx := context.Background()
	js, _ := jetStream(t)
	v := newSettings(t, "k1").vault(t, js, "k1")
	const n = 16
	var wg sync.WaitGroup
	out := make([]seal.Sealed, n)
	errs := make([]error, n)
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			out[i], errs[i] = v.Seal(ctx, "link-race", []byte(fmt.Sprint("secret ", i)))
		})
	}
	close(start)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if out[i].DataKey != out[0].DataKey {
			t.Fatalf("seal %d under data key %s, seal 0 under %s", i, out[i].DataKey, out[0].DataKey)
		}
		if got, err := v.Open(ctx, "link-race", out[i]); err != nil || string(got) != fmt.Sprint("secret ", i) {
			t.Fatalf("seal %d opened %q, %v", i, got, err)
		}
	}
	if h, err := bucketKV(t, js).History(ctx, kvKey("link-race")); err != nil || len(h) != 1 {
		t.Fatalf("%d data keys stored for the link, %v; want 1", len(h), err)
	}
}

func TestNewVaultValidates(t *testing.T) {
	_, err := seal.NewVault(context.Background(), seal.Config{Replicas: -1})
	for _, want := range []string{"no JetStream", "no bucket name", "no key-encryption keys", "-1 replicas"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("config error %v: want it to say %q", err, want)
		}
	}
	keys, _ := seal.ParseKeys(newSettings(t, "k1")["k1"])
	js, _ := jetStream(t)
	if _, err := seal.NewVault(context.Background(), seal.Config{JS: js, Bucket: "a.b", Keys: keys}); err == nil || !strings.Contains(err.Error(), `bucket name "a.b"`) {
		t.Errorf("a bucket name with a dot: %v", err)
	}
}

func BenchmarkSeal(b *testing.B) {
	ctx := context.Background()
	js, _ := jetStream(b)
	v := newSettings(b, "k1").vault(b, js, "k1")
	secret := bytes.Repeat([]byte("s"), 64)
	if _, err := v.Seal(ctx, "link-bench", secret); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Seal(ctx, "link-bench", secret); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	js, _ := jetStream(b)
	v := newSettings(b, "k1").vault(b, js, "k1")
	s, err := v.Seal(ctx, "link-bench", bytes.Repeat([]byte("s"), 64))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Open(ctx, "link-bench", s); err != nil {
			b.Fatal(err)
		}
	}
}
