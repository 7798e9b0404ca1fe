package seal

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/svc/engine/engine/eventlog"
)

// ErrDestroyed means the data key a secret was sealed under is not the
// link's data key in the vault: the link was unlinked (Destroy), so the
// secret can never be opened, or the secret belongs to another link.
var ErrDestroyed = errors.New("seal: the data key of the sealed secret is gone (its link was unlinked) or is not this link's")

// ErrNotAuthentic means a sealed secret does not open under its data key:
// it was altered, or sealed for another link.
var ErrNotAuthentic = errors.New("seal: the sealed secret does not open (altered, or sealed for another link)")

// ErrTooLarge refuses a plaintext longer than MaxPlaintext.
var ErrTooLarge = fmt.Errorf("seal: a secret is at most %d bytes", MaxPlaintext)

// BucketName is the name of the vault's bucket beside the commit stream
// named stream.
func BucketName(stream string) string { return stream + "_SEALKEYS" }

// maxLinkID bounds a link id; maxRecord a stored wrapped data key.
const (
	maxLinkID = 256
	maxRecord = 1024
)

// Config opens a Vault.
type Config struct {
	JS       jetstream.JetStream
	Bucket   string   // the bucket's name, e.g. BucketName(stream)
	Replicas int      // of the bucket: the commit stream's; 0 is 1
	Keys     *Keyring // from ParseKeys
}

func (c Config) validate() error {
	var errs []error
	if c.JS == nil {
		errs = append(errs, errors.New("seal: no JetStream"))
	}
	if c.Bucket == "" {
		errs = append(errs, errors.New("seal: no bucket name"))
	} else if !validBucket(c.Bucket) {
		errs = append(errs, fmt.Errorf("seal: bucket name %q: want A-Z a-z 0-9 _ - only", c.Bucket))
	}
	if c.Keys == nil || len(c.Keys.ids) == 0 {
		errs = append(errs, errors.New("seal: no key-encryption keys"))
	}
	if c.Replicas < 0 {
		errs = append(errs, fmt.Errorf("seal: %d replicas", c.Replicas))
	}
	return errors.Join(errs...)
}

func validBucket(b string) bool {
	for _, c := range []byte(b) {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return len(b) <= 200
}

// Vault keeps each link's data key, wrapped under a KEK of its Keyring, in a
// JetStream key-value bucket: one key per link, written first-writer-wins
// (Create), re-wrapped by compare-and-set (Update), and destroyed by erasing
// every stored revision (overwritten on the server's disk) and purging the
// key. The bucket keeps two revisions per key so that a rotation can erase
// the copy it replaced. A Vault caches no data key: every Seal and Open reads
// the bucket, so a Destroy on one node holds on every other. Seal and
// Destroy of the same link must not race (the link's owner does both); all
// methods are safe for concurrent use.
type Vault struct {
	kv     jetstream.KeyValue
	stream jetstream.Stream
	keys   *Keyring
}

// NewVault opens the vault's bucket, creating it when missing.
func NewVault(ctx context.Context, cfg Config) (*Vault, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	// The bucket is a key-value bucket of JetStream's own layout, made as a
	// stream because a key-value bucket made by CreateKeyValue denies
	// deleting a message, and Destroy erases its messages one by one.
	sc := jetstream.StreamConfig{
		Name:              "KV_" + cfg.Bucket,
		Subjects:          []string{"$KV." + cfg.Bucket + ".>"},
		Description:       "provider secrets' data keys, each wrapped under a key-encryption key (engine/seal); deleting a key makes its link's sealed secrets unreadable for good",
		MaxMsgsPerSubject: 2,
		MaxBytes:          -1,
		MaxMsgSize:        -1,
		MaxMsgs:           -1,
		MaxConsumers:      -1,
		Storage:           jetstream.FileStorage,
		Replicas:          max(cfg.Replicas, 1),
		AllowRollup:       true,
		AllowDirect:       true,
		Discard:           jetstream.DiscardNew,
		Duplicates:        2 * time.Minute,
	}
	err := eventlog.RetryTimeouts(ctx, func(ctx context.Context) error {
		_, err := cfg.JS.CreateOrUpdateStream(ctx, sc)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("seal: bucket %s: %w", cfg.Bucket, err)
	}
	kv, err := cfg.JS.KeyValue(ctx, cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("seal: bucket %s: %w", cfg.Bucket, err)
	}
	st, err := cfg.JS.Stream(ctx, sc.Name)
	if err != nil {
		return nil, fmt.Errorf("seal: bucket %s: %w", cfg.Bucket, err)
	}
	return &Vault{kv: kv, stream: st, keys: cfg.Keys}, nil
}

// record is a data key as stored: wrapped under the KEK named KEK, with the
// nonce of the wrapping. The wrapping's associated data binds it to its
// link, its data key id and its KEK.
type record struct {
	V       int    `json:"v"`
	KEK     string `json:"kek"`
	DataKey []byte `json:"dataKey"` // the data key's id
	Nonce   []byte `json:"nonce"`
	Wrapped []byte `json:"wrapped"`
}

const recordFormat = 1

// key is the bucket's key of a link: "link." and the id in unpadded
// base64url (an id may hold characters a key may not).
func key(linkID string) string { return "link." + base64.RawURLEncoding.EncodeToString([]byte(linkID)) }

// linkOf is the link id of a bucket key.
func linkOf(k string) (string, bool) {
	if len(k) < 5 || k[:5] != "link." {
		return "", false
	}
	b, err := base64.RawURLEncoding.DecodeString(k[5:])
	return string(b), err == nil
}

func checkLink(linkID string) error {
	if linkID == "" || len(linkID) > maxLinkID {
		return fmt.Errorf("seal: a link id is 1 to %d bytes", maxLinkID)
	}
	return nil
}

func wrapAD(linkID, kek string, dk DataKeyID) []byte {
	ad := make([]byte, 0, 16+len(kek)+1+dataKeyIDLen+len(linkID))
	ad = append(ad, "seal.datakey/v1\x00"...)
	ad = append(ad, kek...)
	ad = append(ad, 0)
	ad = append(ad, dk[:]...)
	return append(ad, linkID...)
}

// wrap seals the data key dk (id id) of linkID under the current KEK.
func (v *Vault) wrap(linkID string, id DataKeyID, dk []byte) ([]byte, error) {
	kekID := v.keys.Current()
	kek, err := v.keys.kek(kekID)
	if err != nil {
		return nil, err
	}
	r := record{V: recordFormat, KEK: kekID, DataKey: id[:], Nonce: make([]byte, nonceLen)}
	if _, err := rand.Read(r.Nonce); err != nil {
		return nil, err
	}
	r.Wrapped = kek.Seal(nil, r.Nonce, dk, wrapAD(linkID, kekID, id))
	return json.Marshal(r)
}

// unwrap reads a stored record of linkID: its data key's id and the key.
func (v *Vault) unwrap(linkID string, val []byte) (record, DataKeyID, []byte, error) {
	var r record
	var id DataKeyID
	if len(val) > maxRecord {
		return r, id, nil, fmt.Errorf("seal: the stored data key of link %q is %d bytes, not a data key", linkID, len(val))
	}
	if err := json.Unmarshal(val, &r); err != nil || r.V != recordFormat || len(r.DataKey) != dataKeyIDLen || len(r.Nonce) != nonceLen {
		return r, id, nil, fmt.Errorf("seal: the stored data key of link %q is not one of format %d", linkID, recordFormat)
	}
	copy(id[:], r.DataKey)
	kek, err := v.keys.kek(r.KEK)
	if err != nil {
		return r, id, nil, err
	}
	dk, err := kek.Open(nil, r.Nonce, r.Wrapped, wrapAD(linkID, r.KEK, id))
	if err != nil || len(dk) != KeyLen {
		return r, id, nil, fmt.Errorf("seal: the stored data key of link %q does not open under KEK %q: altered, or a different key under that id", linkID, r.KEK)
	}
	return r, id, dk, nil
}

// dataKey is linkID's data key, made and stored when the link has none.
func (v *Vault) dataKey(ctx context.Context, linkID string) (DataKeyID, []byte, error) {
	k := key(linkID)
	for range 3 {
		e, err := v.kv.Get(ctx, k)
		if err == nil {
			_, id, dk, err := v.unwrap(linkID, e.Value())
			return id, dk, err
		}
		if !errors.Is(err, jetstream.ErrKeyNotFound) {
			return DataKeyID{}, nil, fmt.Errorf("seal: read the data key of link %q: %w", linkID, err)
		}
		var id DataKeyID
		dk := make([]byte, KeyLen)
		if _, err := rand.Read(id[:]); err != nil {
			return id, nil, err
		}
		if _, err := rand.Read(dk); err != nil {
			return id, nil, err
		}
		val, err := v.wrap(linkID, id, dk)
		if err != nil {
			return id, nil, err
		}
		if _, err = v.kv.Create(ctx, k, val); err == nil {
			return id, dk, nil
		}
		clear(dk)
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return id, nil, fmt.Errorf("seal: store the data key of link %q: %w", linkID, err)
		}
		// Another writer stored the link's data key first: use theirs.
	}
	return DataKeyID{}, nil, fmt.Errorf("seal: the data key of link %q changed under every read", linkID)
}

// Seal seals plaintext for linkID under the link's data key, making and
// storing that key on the link's first Seal; later Seals of the link use
// the same key, and concurrent first Seals agree on one.
func (v *Vault) Seal(ctx context.Context, linkID string, plaintext []byte) (Sealed, error) {
	if err := checkLink(linkID); err != nil {
		return Sealed{}, err
	}
	if len(plaintext) > MaxPlaintext {
		return Sealed{}, ErrTooLarge
	}
	id, dk, err := v.dataKey(ctx, linkID)
	if err != nil {
		return Sealed{}, err
	}
	defer clear(dk)
	return sealWith(dk, id, linkID, plaintext)
}

// Open opens a secret sealed for linkID. It fails with ErrDestroyed when the
// data key s was sealed under is not the link's (destroyed, or s was sealed
// for another link), ErrNotAuthentic when s was altered (or moved to another
// link under a data key of the same id), and an *UnknownKEKError when the
// key setting lacks the KEK the link's data key is wrapped under; the zero
// Sealed is ErrMalformed.
func (v *Vault) Open(ctx context.Context, linkID string, s Sealed) ([]byte, error) {
	if err := checkLink(linkID); err != nil {
		return nil, err
	}
	if len(s.Ciphertext) < tagLen {
		return nil, fmt.Errorf("%w: ciphertext of %d bytes", ErrMalformed, len(s.Ciphertext))
	}
	e, err := v.kv.Get(ctx, key(linkID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, ErrDestroyed
	}
	if err != nil {
		return nil, fmt.Errorf("seal: read the data key of link %q: %w", linkID, err)
	}
	_, id, dk, err := v.unwrap(linkID, e.Value())
	if err != nil {
		return nil, err
	}
	defer clear(dk)
	return openWith(dk, id, linkID, s)
}

// sealWith seals plaintext for linkID under the data key dk of id id.
func sealWith(dk []byte, id DataKeyID, linkID string, plaintext []byte) (Sealed, error) {
	aead, err := newGCM(dk)
	if err != nil {
		return Sealed{}, err
	}
	s := Sealed{DataKey: id}
	if _, err := rand.Read(s.Nonce[:]); err != nil {
		return Sealed{}, err
	}
	s.Ciphertext = aead.Seal(nil, s.Nonce[:], plaintext, sealAD(linkID, id))
	return s, nil
}

// openWith opens s, sealed for linkID, under the data key dk of id id.
func openWith(dk []byte, id DataKeyID, linkID string, s Sealed) ([]byte, error) {
	if id != s.DataKey {
		return nil, ErrDestroyed
	}
	aead, err := newGCM(dk)
	if err != nil {
		return nil, err
	}
	pt, err := aead.Open(nil, s.Nonce[:], s.Ciphertext, sealAD(linkID, id))
	if err != nil {
		return nil, ErrNotAuthentic
	}
	return pt, nil
}

// OpenSecret is Open, its plaintext held as a Secret.
func (v *Vault) OpenSecret(ctx context.Context, linkID string, s Sealed) (Secret, error) {
	pt, err := v.Open(ctx, linkID, s)
	return Secret{b: pt}, err
}

// Destroy destroys linkID's data key: every stored revision of it is erased
// (the server overwrites it on disk) and the key purged, so no secret ever
// sealed for the link opens again, on any node. Destroying a link without a
// data key does nothing. A later Seal of the link makes a new data key,
// under which nothing sealed before opens.
func (v *Vault) Destroy(ctx context.Context, linkID string) error {
	if err := checkLink(linkID); err != nil {
		return err
	}
	k := key(linkID)
	hist, err := v.kv.History(ctx, k)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("seal: destroy the data key of link %q: %w", linkID, err)
	}
	if err := v.erase(ctx, hist, 0); err != nil {
		return fmt.Errorf("seal: destroy the data key of link %q: %w", linkID, err)
	}
	// The purge removes what a writer stored meanwhile, and leaves a marker
	// without a value.
	if err := v.kv.Purge(ctx, k); err != nil {
		return fmt.Errorf("seal: destroy the data key of link %q: %w", linkID, err)
	}
	return nil
}

// erase overwrites on the server every entry of hist with a value, but the
// one at revision keep.
func (v *Vault) erase(ctx context.Context, hist []jetstream.KeyValueEntry, keep uint64) error {
	for _, e := range hist {
		if e.Revision() == keep || e.Operation() != jetstream.KeyValuePut {
			continue
		}
		if err := v.stream.SecureDeleteMsg(ctx, e.Revision()); err != nil {
			// Gone already (a purge or a limit came first) is not a failure.
			if _, gerr := v.stream.GetMsg(ctx, e.Revision()); errors.Is(gerr, jetstream.ErrMsgNotFound) {
				continue
			}
			return fmt.Errorf("erase revision %d: %w", e.Revision(), err)
		}
	}
	return nil
}

// Rotate re-wraps every stored data key that is not under the current KEK,
// under it, and erases the copies it replaced (and any older copy a crashed
// rotation left). It answers how many it re-wrapped. It goes on past a data
// key it cannot re-wrap (its KEK is not in the setting) and reports each
// such in its error: a KEK may be removed from the setting once a Rotate
// returns no error. A link destroyed meanwhile stays destroyed.
func (v *Vault) Rotate(ctx context.Context) (int, error) {
	keys, err := v.kv.Keys(ctx)
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return 0, nil
	}
	if err == nil {
		err = ctx.Err() // the listing may have ended early
	}
	if err != nil {
		return 0, fmt.Errorf("seal: rotate: list: %w", err)
	}
	n := 0
	var errs []error
	for _, k := range keys {
		linkID, ok := linkOf(k)
		if !ok {
			continue
		}
		did, err := v.rotate(ctx, linkID)
		if did {
			n++
		}
		if err != nil {
			errs = append(errs, err)
		}
		if err := ctx.Err(); err != nil {
			errs = append(errs, fmt.Errorf("seal: rotate: %w", err))
			break
		}
	}
	return n, errors.Join(errs...)
}

// rotate re-wraps linkID's data key under the current KEK if it is not.
func (v *Vault) rotate(ctx context.Context, linkID string) (bool, error) {
	k := key(linkID)
	for range 3 {
		hist, err := v.kv.History(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("seal: rotate link %q: %w", linkID, err)
		}
		last := hist[len(hist)-1]
		if last.Operation() != jetstream.KeyValuePut {
			return false, nil // destroyed
		}
		if err := v.erase(ctx, hist, last.Revision()); err != nil {
			return false, fmt.Errorf("seal: rotate link %q: %w", linkID, err)
		}
		r, id, dk, err := v.unwrap(linkID, last.Value())
		if err != nil {
			return false, err
		}
		if r.KEK == v.keys.Current() {
			clear(dk)
			return false, nil
		}
		val, err := v.wrap(linkID, id, dk)
		clear(dk)
		if err != nil {
			return false, err
		}
		if _, err := v.kv.Update(ctx, k, val, last.Revision()); err != nil {
			if errors.Is(err, jetstream.ErrKeyRevisionMismatch) {
				continue // destroyed or rotated meanwhile: look again
			}
			return false, fmt.Errorf("seal: rotate link %q: %w", linkID, err)
		}
		if err := v.erase(ctx, []jetstream.KeyValueEntry{last}, 0); err != nil {
			return true, fmt.Errorf("seal: rotate link %q: the copy under KEK %q: %w", linkID, r.KEK, err)
		}
		return true, nil
	}
	return false, fmt.Errorf("seal: rotate link %q: it changed under every read", linkID)
}
