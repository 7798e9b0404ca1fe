package news

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/svc/engine/engine/egress"
)

// Image limits of the thumbnail proxy.
const (
	MaxImageBytes   = 2 << 20  // one image
	imageCacheBytes = 32 << 20 // the whole cache
	imageCacheItems = 512
)

// ErrNoImage is returned for an item without a thumbnail; ErrImageUnavailable
// when the upstream failed or answered something that is not an acceptable image.
var (
	ErrNoImage          = errors.New("news: no image")
	ErrImageUnavailable = errors.New("news: image unavailable")
)

var imageTypes = map[string]bool{"image/jpeg": true, "image/png": true, "image/gif": true, "image/webp": true}

// Image is a thumbnail ready to serve.
type Image struct {
	Type string
	Data []byte
}

// Images fetches item thumbnails, only from the URL a feed named for an item,
// checks their type and size and keeps the newest ones in a bounded LRU cache.
type Images struct {
	client *http.Client
	policy *egress.Policy // nil: no egress rules (NewImages)
	mu     sync.Mutex
	lru    *list.List // of *cached, most recent first
	byKey  map[string]*list.Element
	bytes  int
}

type cached struct {
	key string
	img Image
}

// NewImages makes a proxy that fetches through client as it is, with no
// egress rules; a server uses NewPublicImages.
func NewImages(client *http.Client) *Images {
	return &Images{client: client, lru: list.New(), byKey: map[string]*list.Element{}}
}

// NewPublicImages makes the server's proxy: it reaches only the public
// internet, as webhooks do. A URL whose host breaks the egress rules (a local
// name, an odd IPv4 form, an address that is not public) is refused before any
// fetch, every connection passes the egress dial check (so a name resolving
// inside the network is refused too), and no redirect is followed: only the
// URL the feed named is fetched. http:// and https:// are both accepted, as
// feeds name them. allowPrivate lifts the address rules (local development
// and tests).
func NewPublicImages(allowPrivate bool) *Images {
	im := NewImages(egress.NewClient(egress.Options{AllowPrivate: allowPrivate, Timeout: 10 * time.Second}))
	im.policy = &egress.Policy{AllowHTTP: true, AllowPrivate: allowPrivate}
	return im
}

// Get returns the thumbnail of it.
func (im *Images) Get(ctx context.Context, it Item) (Image, error) {
	if it.ImageURL == "" {
		return Image{}, ErrNoImage
	}
	if name, ok := strings.CutPrefix(it.ImageURL, "sample:"); ok {
		b, ok := SampleImage(name)
		if !ok {
			return Image{}, ErrNoImage
		}
		return Image{Type: http.DetectContentType(b), Data: b}, nil
	}
	im.mu.Lock()
	if el, ok := im.byKey[it.ImageURL]; ok {
		im.lru.MoveToFront(el)
		img := el.Value.(*cached).img
		im.mu.Unlock()
		return img, nil
	}
	im.mu.Unlock()
	img, err := im.fetch(ctx, it.ImageURL)
	if err != nil {
		return Image{}, err
	}
	im.put(it.ImageURL, img)
	return img, nil
}

func (im *Images) fetch(ctx context.Context, url string) (Image, error) {
	if !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "http://") {
		return Image{}, ErrNoImage
	}
	if im.policy != nil {
		if err := egress.CheckURL(ctx, url, *im.policy); err != nil {
			return Image{}, fmt.Errorf("%w: %w", ErrImageUnavailable, err)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return Image{}, fmt.Errorf("%w: %v", ErrImageUnavailable, err)
	}
	req.Header.Set("Accept", "image/jpeg, image/png, image/gif, image/webp")
	resp, err := im.client.Do(req)
	if err != nil {
		return Image{}, fmt.Errorf("%w: %v", ErrImageUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Image{}, fmt.Errorf("%w: upstream answered %d", ErrImageUnavailable, resp.StatusCode)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if !imageTypes[mt] {
		return Image{}, fmt.Errorf("%w: content type %q is not an image", ErrImageUnavailable, mt)
	}
	if resp.ContentLength > MaxImageBytes {
		return Image{}, fmt.Errorf("%w: larger than %d bytes", ErrImageUnavailable, MaxImageBytes)
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, MaxImageBytes+1))
	if err != nil {
		return Image{}, fmt.Errorf("%w: %v", ErrImageUnavailable, err)
	}
	if len(b) > MaxImageBytes {
		return Image{}, fmt.Errorf("%w: larger than %d bytes", ErrImageUnavailable, MaxImageBytes)
	}
	if sniffed := http.DetectContentType(b); sniffed != mt && !(mt == "image/webp" && sniffed == "image/webp") {
		return Image{}, fmt.Errorf("%w: declared %s but the bytes are %s", ErrImageUnavailable, mt, sniffed)
	}
	return Image{Type: mt, Data: b}, nil
}

func (im *Images) put(key string, img Image) {
	im.mu.Lock()
	defer im.mu.Unlock()
	if _, ok := im.byKey[key]; ok {
		return
	}
	im.byKey[key] = im.lru.PushFront(&cached{key: key, img: img})
	im.bytes += len(img.Data)
	for im.lru.Len() > imageCacheItems || im.bytes > imageCacheBytes {
		el := im.lru.Back()
		c := el.Value.(*cached)
		im.lru.Remove(el)
		delete(im.byKey, c.key)
		im.bytes -= len(c.img.Data)
	}
}

// Cached counts cached images.
func (im *Images) Cached() int {
	im.mu.Lock()
	defer im.mu.Unlock()
	return im.lru.Len()
}
