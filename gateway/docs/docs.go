// Package docs serves the API reference: the OpenAPI document as YAML and as
// JSON (converted once, by New) and a page on which Swagger UI, embedded in
// the binary (swaggerui/), renders the reference from that document in the
// browser. Nothing the page needs comes from another host, so it works
// offline; its Content-Security-Policy refuses any other host as well.
package docs

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"path"
	"strconv"
	"time"

	"go.yaml.in/yaml/v4"
)

//go:embed page.html init.js swaggerui/swagger-ui-bundle.js swaggerui/swagger-ui.css swaggerui/favicon-32x32.png swaggerui/LICENSE swaggerui/NOTICE swaggerui/swagger-ui-bundle.js.LICENSE.txt
var files embed.FS

// csp is the reference page's Content-Security-Policy: this origin only.
// Swagger UI sets inline styles and shows data: images.
const csp = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
	"font-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// Reference serves one OpenAPI document and the reference page rendered from it.
// It holds no mutable state after New.
type Reference struct {
	yaml, json, page []byte
	assets           map[string][]byte // by name
}

// New returns the reference of the OpenAPI document spec (YAML), converting
// it to JSON once; a document that is not YAML, or whose values JSON cannot
// hold, is an error.
func New(spec []byte) (*Reference, error) {
	j, err := YAMLToJSON(spec)
	if err != nil {
		return nil, fmt.Errorf("docs: the OpenAPI document: %w", err)
	}
	page, err := files.ReadFile("page.html")
	if err != nil {
		return nil, err
	}
	assets := map[string][]byte{}
	err = fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || p == "page.html" {
			return err
		}
		b, err := files.ReadFile(p)
		assets[path.Base(p)] = b
		return err
	})
	if err != nil {
		return nil, err
	}
	return &Reference{yaml: bytes.Clone(spec), json: j, page: page, assets: assets}, nil
}

// YAML serves the document as it is written.
func (ref *Reference) YAML() http.Handler {
	return document("application/yaml", ref.yaml)
}

// JSON serves the same document in JSON.
func (ref *Reference) JSON() http.Handler {
	return document("application/json", ref.json)
}

// Page serves the reference page (GET /docs); its scripts and styles are
// relative to it, under docs/.
func (ref *Reference) Page() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", csp)
		serve(w, r, "text/html; charset=utf-8", ref.page)
	})
}

// Assets are the page's files by name, each to be served at /docs/NAME:
// Swagger UI's bundle, styles, icon and licenses, and init.js.
func (ref *Reference) Assets() map[string]http.Handler {
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".png": "image/png"}
	out := map[string]http.Handler{}
	add := func(name string, b []byte) {
		ct, ok := types[path.Ext(name)]
		if !ok {
			ct = "text/plain; charset=utf-8"
		}
		out[name] = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serve(w, r, ct, b) })
	}
	for name, b := range ref.assets {
		add(name, b)
	}
	return out
}

func document(contentType string, b []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { serve(w, r, contentType, b) })
}

// serve writes b with an ETag of its digest, answering If-None-Match with 304.
func serve(w http.ResponseWriter, r *http.Request, contentType string, b []byte) {
	sum := sha256.Sum256(b)
	w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:16])+`"`)
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

// YAMLToJSON converts one YAML document to JSON, keeping the order of keys.
// Scalars keep their YAML type: a quoted '200' stays a string, an unquoted
// 200 is a number, and an unquoted date or time is its text.
func YAMLToJSON(y []byte) ([]byte, error) {
	dec := yaml.NewDecoder(bytes.NewReader(y))
	var doc, more yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || dec.Decode(&more) != io.EOF {
		return nil, errors.New("not one YAML document")
	}
	var buf bytes.Buffer
	if err := writeJSON(&buf, doc.Content[0], 0); err != nil {
		return nil, err
	}
	if !json.Valid(buf.Bytes()) {
		return nil, errors.New("the conversion made invalid JSON")
	}
	return buf.Bytes(), nil
}

// maxDepth bounds the nesting (and an alias's expansion) of the document.
const maxDepth = 256

func writeJSON(buf *bytes.Buffer, n *yaml.Node, depth int) error {
	if depth > maxDepth {
		return fmt.Errorf("line %d: nested more than %d deep", n.Line, maxDepth)
	}
	switch n.Kind {
	case yaml.AliasNode:
		return writeJSON(buf, n.Alias, depth+1)
	case yaml.MappingNode:
		buf.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode || k.Tag == "!!merge" {
				return fmt.Errorf("line %d: a key JSON cannot hold", k.Line)
			}
			if i > 0 {
				buf.WriteByte(',')
			}
			writeString(buf, k.Value)
			buf.WriteByte(':')
			if err := writeJSON(buf, v, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case yaml.SequenceNode:
		buf.WriteByte('[')
		for i, v := range n.Content {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeJSON(buf, v, depth+1); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case yaml.ScalarNode:
		return writeScalar(buf, n)
	default:
		return fmt.Errorf("line %d: an unexpected YAML node", n.Line)
	}
	return nil
}

func writeScalar(buf *bytes.Buffer, n *yaml.Node) error {
	switch n.ShortTag() {
	case "!!null":
		buf.WriteString("null")
	case "!!bool":
		var b bool
		if err := n.Decode(&b); err != nil {
			return err
		}
		buf.WriteString(strconv.FormatBool(b))
	case "!!int":
		var i int64
		if err := n.Decode(&i); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		buf.WriteString(strconv.FormatInt(i, 10))
	case "!!float":
		var f float64
		if err := n.Decode(&f); err != nil {
			return fmt.Errorf("line %d: %w", n.Line, err)
		}
		if math.IsInf(f, 0) || math.IsNaN(f) {
			return fmt.Errorf("line %d: %s has no JSON number", n.Line, n.Value)
		}
		b, _ := json.Marshal(f)
		buf.Write(b)
	default: // !!str, !!timestamp, !!binary and custom tags: the text
		writeString(buf, n.Value)
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) {
	b, _ := json.Marshal(s)
	buf.Write(b)
}
