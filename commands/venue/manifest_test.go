package venue

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/svc/engine/commands"
)

var testDigest = strings.Repeat("ab", 32)

// execBaseManifest is a valid execution-capable manifest; mdBaseManifest a valid market-data-only one.
func execBaseManifest() map[string]any {
	return map[string]any{
		"providerVersion": "1.4.2",
		"protocolVersion": "2026-01",
		"schemaDigest":    testDigest,
		"capabilities": map[string]any{
			"accounts": true, "execution": true, "marketData": true,
			"generationFencing": true, "completeOrderBook": true, "executionHistory": true,
			"executionCorrections": false, "reduceOnly": true, "nativeReplace": false, "nativeOco": false,
			"accountProvisioning":    false,
			"orderTypes":             []any{"market", "limit"},
			"timeInForce":            []any{"day"},
			"positionModels":         []any{"net"},
			"replayRetentionSeconds": 604800,
		},
	}
}

func mdBaseManifest() map[string]any {
	return map[string]any{
		"providerVersion": "1", "protocolVersion": "1", "schemaDigest": testDigest,
		"capabilities": map[string]any{"marketData": true},
	}
}

// manifestWith returns base's JSON after setting top-level and capability properties;
// a nil value deletes the property.
func manifestWith(base func() map[string]any, topLevel, caps map[string]any) string {
	m := base()
	c := m["capabilities"].(map[string]any)
	for k, v := range topLevel {
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
	}
	for k, v := range caps {
		if v == nil {
			delete(c, k)
		} else {
			c[k] = v
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func execManifest(caps map[string]any) string { return manifestWith(execBaseManifest, nil, caps) }
func mdManifest(caps map[string]any) string   { return manifestWith(mdBaseManifest, nil, caps) }
func withTop(kv map[string]any) string        { return manifestWith(execBaseManifest, kv, nil) }

// replaceInExec swaps the first occurrence of old in the valid execution manifest.
func replaceInExec(old, new string) string { return strings.Replace(execManifest(nil), old, new, 1) }

const codeInvalid, codeUnsup = "invalid_request", string(CodeUnsupportedValue)

func TestManifestRefusals(t *testing.T) {
	const c = "manifest.capabilities."
	for _, tc := range []struct {
		name, raw, code, field string
	}{
		{name: "a valid execution manifest passes", raw: execManifest(nil)},
		{name: "a valid market-data manifest passes", raw: mdManifest(nil)},
		{name: "whitespace around the object passes", raw: " \n\t" + mdManifest(nil) + " \r\n"},

		// Strict decoding.
		{"not JSON: the value being read", `{"providerVersion":`, codeInvalid, "manifest.providerVersion"},
		{"not JSON: a member", `{"providerVersion":"1" "x"}`, codeInvalid, "manifest"},
		{"empty input", ``, codeInvalid, "manifest"},
		{"an array", `[]`, codeInvalid, "manifest"},
		{"null", `null`, codeInvalid, "manifest"},
		{"trailing object", mdManifest(nil) + `{}`, codeInvalid, "manifest"},
		{"trailing garbage", mdManifest(nil) + `x`, codeInvalid, "manifest"},
		{"unknown property at withTop level", withTop(map[string]any{"extra": 1}), codeInvalid, "manifest.extra"},
		{"unknown property in capabilities", execManifest(map[string]any{"foo": true}), codeInvalid, c + "foo"},
		{"settings is no capability", execManifest(map[string]any{"settings": map[string]any{"broker": "x"}}), codeInvalid, c + "settings"},
		{"an unprintable unknown name names the parent", execManifest(map[string]any{"a\u0001": 1}), codeInvalid, "manifest.capabilities"},
		{"a property sent twice", strings.Replace(mdManifest(nil), `{`, `{"providerVersion":"2",`, 1), codeInvalid, "manifest.providerVersion"},
		{"a capability sent twice", replaceInExec(`"accounts":true`, `"accounts":true,"accounts":true`), codeInvalid, c + "accounts"},
		{"providerVersion a number", withTop(map[string]any{"providerVersion": 1}), codeInvalid, "manifest.providerVersion"},
		{"capabilities an array", withTop(map[string]any{"capabilities": []any{}}), codeInvalid, "manifest.capabilities"},
		{"a boolean as a string", execManifest(map[string]any{"accounts": "true"}), codeInvalid, c + "accounts"},
		{"a boolean null", replaceInExec(`"nativeOco":false`, `"nativeOco":null`), codeInvalid, c + "nativeOco"},
		{"a list as a string", execManifest(map[string]any{"orderTypes": "market"}), codeInvalid, c + "orderTypes"},
		{"a list null", replaceInExec(`"orderTypes":["market","limit"]`, `"orderTypes":null`), codeInvalid, c + "orderTypes"},
		{"a list item an object", execManifest(map[string]any{"orderTypes": []any{"market", map[string]any{}}}), codeInvalid, c + "orderTypes[1]"},
		{"retention a string", execManifest(map[string]any{"replayRetentionSeconds": "604800"}), codeInvalid, c + "replayRetentionSeconds"},
		{"retention manifestWith a fraction", replaceInExec(`604800`, `604800.0`), codeInvalid, c + "replayRetentionSeconds"},
		{"retention manifestWith an exponent", replaceInExec(`604800`, `6.048e5`), codeInvalid, c + "replayRetentionSeconds"},
		{"retention negative", execManifest(map[string]any{"replayRetentionSeconds": -1}), codeInvalid, c + "replayRetentionSeconds"},
		{"retention 2^53", replaceInExec(`604800`, `9007199254740992`), codeInvalid, c + "replayRetentionSeconds"},
		{name: "retention 2^53-1 passes", raw: replaceInExec(`604800`, `9007199254740991`)},

		// Required properties.
		{"providerVersion missing", withTop(map[string]any{"providerVersion": nil}), codeInvalid, "manifest.providerVersion"},
		{"protocolVersion missing", withTop(map[string]any{"protocolVersion": nil}), codeInvalid, "manifest.protocolVersion"},
		{"schemaDigest missing", withTop(map[string]any{"schemaDigest": nil}), codeInvalid, "manifest.schemaDigest"},
		{"capabilities missing", withTop(map[string]any{"capabilities": nil}), codeInvalid, "manifest.capabilities"},

		// String bounds.
		{"providerVersion empty", withTop(map[string]any{"providerVersion": ""}), codeInvalid, "manifest.providerVersion"},
		{name: "providerVersion of 64 characters passes", raw: withTop(map[string]any{"providerVersion": strings.Repeat("é", 64)})},
		{"providerVersion of 65 characters", withTop(map[string]any{"providerVersion": strings.Repeat("é", 65)}), codeInvalid, "manifest.providerVersion"},
		{"protocolVersion of 65 characters", withTop(map[string]any{"protocolVersion": strings.Repeat("v", 65)}), codeInvalid, "manifest.protocolVersion"},
		{"protocolVersion manifestWith a control character", withTop(map[string]any{"protocolVersion": "1\n"}), codeInvalid, "manifest.protocolVersion"},
		{"providerVersion manifestWith a leading space", withTop(map[string]any{"providerVersion": " 1"}), codeInvalid, "manifest.providerVersion"},
		{"schemaDigest of 63", withTop(map[string]any{"schemaDigest": testDigest[:63]}), codeInvalid, "manifest.schemaDigest"},
		{name: "schemaDigest of 64 passes", raw: withTop(map[string]any{"schemaDigest": "0123456789abcdef" + testDigest[16:]})},
		{"schemaDigest of 65", withTop(map[string]any{"schemaDigest": testDigest + "a"}), codeInvalid, "manifest.schemaDigest"},
		{"schemaDigest uppercase", withTop(map[string]any{"schemaDigest": strings.ToUpper(testDigest)}), codeInvalid, "manifest.schemaDigest"},
		{"schemaDigest not hex", withTop(map[string]any{"schemaDigest": "g" + testDigest[1:]}), codeInvalid, "manifest.schemaDigest"},

		// List bounds.
		{"a list of 17", execManifest(map[string]any{"orderTypes": distinctItems(17)}), codeInvalid, c + "orderTypes"},
		{"a list of 16 is read (its first value is then unsupported)", execManifest(map[string]any{"orderTypes": distinctItems(16)}), codeUnsup, c + "orderTypes[0]"},
		{"an empty item", execManifest(map[string]any{"timeInForce": []any{"day", ""}}), codeInvalid, c + "timeInForce[1]"},
		{"an item of 33", execManifest(map[string]any{"orderTypes": []any{strings.Repeat("m", 33)}}), codeInvalid, c + "orderTypes[0]"},
		{"an item of 32 is read (and unsupported)", execManifest(map[string]any{"orderTypes": []any{strings.Repeat("m", 32)}}), codeUnsup, c + "orderTypes[0]"},

		// Allowed values.
		{name: "every order type and time in force passes", raw: execManifest(map[string]any{
			"orderTypes":  []any{"market", "limit", "stop", "stop_limit"},
			"timeInForce": []any{"day", "gtc", "ioc", "fok"}})},
		{"an unknown order type", execManifest(map[string]any{"orderTypes": []any{"market", "limit", "trailing_stop"}}), codeUnsup, c + "orderTypes[2]"},
		{"order types are case-sensitive", execManifest(map[string]any{"orderTypes": []any{"Market"}}), codeUnsup, c + "orderTypes[0]"},
		{"an unknown time in force", execManifest(map[string]any{"timeInForce": []any{"day", "gtd"}}), codeUnsup, c + "timeInForce[1]"},
		{"hedge is no position model", execManifest(map[string]any{"positionModels": []any{"net", "hedge"}}), codeUnsup, c + "positionModels[1]"},

		// Rule 5.
		{"a repeated order type", execManifest(map[string]any{"orderTypes": []any{"market", "limit", "market"}}), codeInvalid, c + "orderTypes[2]"},
		{"a repeated time in force", execManifest(map[string]any{"timeInForce": []any{"day", "day"}}), codeInvalid, c + "timeInForce[1]"},
		{"a repeated position model", execManifest(map[string]any{"positionModels": []any{"net", "net"}}), codeInvalid, c + "positionModels[1]"},

		// Rule 4.
		{"neither accounts nor marketData", mdManifest(map[string]any{"marketData": false}), codeInvalid, "manifest.capabilities"},
		{"neither, all omitted", mdManifest(map[string]any{"marketData": nil}), codeInvalid, "manifest.capabilities"},
		{name: "accounts alone passes", raw: mdManifest(map[string]any{"marketData": false, "accounts": true})},

		// Rule 1.
		{"execution without accounts", execManifest(map[string]any{"accounts": false}), codeInvalid, c + "accounts"},
		{"execution without generationFencing", execManifest(map[string]any{"generationFencing": false}), codeInvalid, c + "generationFencing"},
		{"execution without completeOrderBook", execManifest(map[string]any{"completeOrderBook": nil}), codeInvalid, c + "completeOrderBook"},
		{"execution without executionHistory", execManifest(map[string]any{"executionHistory": false}), codeInvalid, c + "executionHistory"},
		{"execution manifestWith retention 604799", execManifest(map[string]any{"replayRetentionSeconds": 604799}), codeInvalid, c + "replayRetentionSeconds"},
		{"execution manifestWith retention omitted", execManifest(map[string]any{"replayRetentionSeconds": nil}), codeInvalid, c + "replayRetentionSeconds"},
		{name: "execution manifestWith retention 604801 passes", raw: execManifest(map[string]any{"replayRetentionSeconds": 604801})},
		{"execution without order types", execManifest(map[string]any{"orderTypes": []any{}}), codeInvalid, c + "orderTypes"},
		{"execution without times in force", execManifest(map[string]any{"timeInForce": nil}), codeInvalid, c + "timeInForce"},
		{"execution without position models", execManifest(map[string]any{"positionModels": []any{}}), codeInvalid, c + "positionModels"},
		{name: "execution without marketData passes", raw: execManifest(map[string]any{"marketData": false})},

		// Rule 2.
		{"generationFencing without execution", mdManifest(map[string]any{"generationFencing": true}), codeInvalid, c + "generationFencing"},
		{"completeOrderBook without execution", mdManifest(map[string]any{"completeOrderBook": true}), codeInvalid, c + "completeOrderBook"},
		{"executionHistory without execution", mdManifest(map[string]any{"executionHistory": true}), codeInvalid, c + "executionHistory"},
		{"executionCorrections without execution", mdManifest(map[string]any{"executionCorrections": true}), codeInvalid, c + "executionCorrections"},
		{"reduceOnly without execution", mdManifest(map[string]any{"reduceOnly": true}), codeInvalid, c + "reduceOnly"},
		{"nativeReplace without execution", mdManifest(map[string]any{"nativeReplace": true}), codeInvalid, c + "nativeReplace"},
		{"nativeOco without execution", mdManifest(map[string]any{"nativeOco": true}), codeInvalid, c + "nativeOco"},
		{"order types without execution", mdManifest(map[string]any{"orderTypes": []any{"market"}}), codeInvalid, c + "orderTypes"},
		{"times in force without execution", mdManifest(map[string]any{"timeInForce": []any{"day"}}), codeInvalid, c + "timeInForce"},
		{"the execution base less execution", execManifest(map[string]any{"execution": false}), codeInvalid, c + "generationFencing"},
		{name: "retention without execution passes", raw: mdManifest(map[string]any{"replayRetentionSeconds": 60})},
		{name: "every execution feature manifestWith execution passes", raw: execManifest(map[string]any{
			"executionCorrections": true, "reduceOnly": true, "nativeReplace": true, "nativeOco": true})},

		// Rule 3.
		{"accountProvisioning without accounts", mdManifest(map[string]any{"accountProvisioning": true}), codeInvalid, c + "accountProvisioning"},
		{"position models without accounts", mdManifest(map[string]any{"positionModels": []any{"net"}}), codeInvalid, c + "positionModels"},
		{name: "accountProvisioning and position models manifestWith accounts pass", raw: mdManifest(map[string]any{
			"accounts": true, "accountProvisioning": true, "positionModels": []any{"net"}})},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseManifest([]byte(tc.raw))
			if err == nil {
				err = m.Validate()
			}
			if tc.code == "" {
				if err != nil {
					t.Fatalf("want no refusal, got %v", err)
				}
				return
			}
			var r *commands.Refusal
			if !errors.As(err, &r) {
				t.Fatalf("want a *commands.Refusal %s, got %v", tc.code, err)
			}
			if commands.StatusOf(r.Code, r.Malformed) != http.StatusBadRequest || string(r.Code) != tc.code || r.Params["field"] != tc.field {
				t.Fatalf("got %d %s field %v (%s); want 400 %s field %s", commands.StatusOf(r.Code, r.Malformed), r.Code, r.Params["field"], r.Msg, tc.code, tc.field)
			}
		})
	}
}

func distinctItems(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = "type" + strings.Repeat("x", i)
	}
	return out
}

// A manifest inside a request body is decoded as strictly.
func TestManifestInABody(t *testing.T) {
	var body struct {
		Name     string   `json:"name"`
		Manifest Manifest `json:"manifest"`
	}
	err := json.Unmarshal([]byte(`{"name":"feed","manifest":`+execManifest(map[string]any{"foo": 1})+`}`), &body)
	var r *commands.Refusal
	if !errors.As(err, &r) || r.Params["field"] != "manifest.capabilities.foo" {
		t.Fatalf("got %v; want the refusal of manifest.capabilities.foo", err)
	}
	if err := json.Unmarshal([]byte(`{"name":"feed","manifest":`+execManifest(nil)+`}`), &body); err != nil {
		t.Fatal(err)
	}
	if body.Manifest.Capabilities.ReplayRetentionSeconds != 604800 || body.Manifest.Validate() != nil {
		t.Fatalf("decoded %+v", body.Manifest)
	}
}

func mustParseManifest(t *testing.T, raw string) Manifest {
	t.Helper()
	m, err := ParseManifest([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// The digests depend on the manifest, not on how its JSON was written.
func TestHashesIgnoreKeyOrderAndWhitespace(t *testing.T) {
	a := mustParseManifest(t, execManifest(nil)) // encoding/json writes keys sorted
	b := mustParseManifest(t, `
	{ "capabilities" : { "replayRetentionSeconds" : 604800, "positionModels" : [ "net" ],
	    "timeInForce":["day"], "orderTypes":["market","limit"], "accountProvisioning":false,
	    "nativeOco":false, "nativeReplace":false, "reduceOnly":true, "executionCorrections":false,
	    "executionHistory":true, "completeOrderBook":true, "generationFencing":true,
	    "marketData":true, "execution":true, "accounts":true },
	  "schemaDigest":"`+testDigest+`", "protocolVersion":"2026-01", "providerVersion":"1.4.2" }
	`)
	// Omitted capabilities are their defaults.
	c := mustParseManifest(t, strings.NewReplacer(`"accountProvisioning":false,`, ``, `"nativeOco":false,`, ``).Replace(execManifest(nil)))
	for _, m := range []Manifest{b, c} {
		if ManifestHash(m) != ManifestHash(a) || CreationHash("feed", m) != CreationHash("feed", a) {
			t.Fatalf("hashes differ for %+v", m)
		}
	}
}

// Every value, the order of a list and the name change the digests.
func TestHashesChangeWithEveryValue(t *testing.T) {
	base := mustParseManifest(t, execManifest(nil))
	seen := map[string]string{ManifestHash(base): "base"}
	creation := map[string]string{CreationHash("feed", base): "base"}
	add := func(what string, m Manifest) {
		t.Helper()
		h, ch := ManifestHash(m), CreationHash("feed", m)
		if prev, ok := seen[h]; ok {
			t.Errorf("%s has the manifest hash of %s", what, prev)
		}
		if prev, ok := creation[ch]; ok {
			t.Errorf("%s has the creation hash of %s", what, prev)
		}
		seen[h], creation[ch] = what, what
	}
	for i := range base.Capabilities.flags() {
		m := cloneManifest(base)
		f := m.Capabilities.flags()[i]
		*f.v = !*f.v
		add(f.name, m)
	}
	m := cloneManifest(base)
	m.ProviderVersion += "1"
	add("providerVersion", m)
	m = cloneManifest(base)
	m.ProtocolVersion += "1"
	add("protocolVersion", m)
	m = cloneManifest(base)
	m.SchemaDigest = "0" + m.SchemaDigest[1:]
	add("schemaDigest", m)
	m = cloneManifest(base)
	m.Capabilities.ReplayRetentionSeconds++
	add("replayRetentionSeconds", m)
	m = cloneManifest(base)
	m.Capabilities.OrderTypes = []string{"limit", "market"}
	add("orderTypes order", m)
	m = cloneManifest(base)
	m.Capabilities.TimeInForce = append(m.Capabilities.TimeInForce, "gtc")
	add("timeInForce", m)
	m = cloneManifest(base)
	m.Capabilities.PositionModels = []string{}
	add("positionModels", m)
	// The version strings are told apart, not concatenated.
	m = cloneManifest(base)
	m.ProviderVersion, m.ProtocolVersion = m.ProtocolVersion, m.ProviderVersion
	add("versions swapped", m)

	if CreationHash("feed2", base) == CreationHash("feed", base) {
		t.Error("the name does not change the creation hash")
	}
	if CreationHash("feed", base) == ManifestHash(base) {
		t.Error("the creation hash is the manifest hash")
	}
}

func cloneManifest(m Manifest) Manifest {
	c := m.Capabilities
	c.OrderTypes, c.TimeInForce, c.PositionModels = append([]string{}, c.OrderTypes...),
		append([]string{}, c.TimeInForce...), append([]string{}, c.PositionModels...)
	m.Capabilities = c
	return m
}

// Known answers: the canonical bytes written out by hand from RFC 8785, and
// their SHA-256 as sha256sum computes it.
func TestHashKnownAnswers(t *testing.T) {
	const canonical = `{"capabilities":{"accountProvisioning":false,"accounts":false,"completeOrderBook":false,` +
		`"execution":false,"executionCorrections":false,"executionHistory":false,"generationFencing":false,` +
		`"marketData":true,"nativeOco":false,"nativeReplace":false,"orderTypes":[],"positionModels":[],` +
		`"reduceOnly":false,"replayRetentionSeconds":0,"timeInForce":[]},"protocolVersion":"1",` +
		`"providerVersion":"1","schemaDigest":"0000000000000000000000000000000000000000000000000000000000000000"}`
	const manifestHash = "b9d136d25bb6f6041cc265e1b986a9a1e71e9222c37ffb3c1b30a20f2e22909f"
	const name = "Acme \"Feed\" \\ é\n"
	const creation = `{"manifest":` + canonical + `,"name":"Acme \"Feed\" \\ é\n"}`
	const creationHash = "93a073f816b5cfe279014079e03be5d7cd71990a8cbc79fef7bef38d3ab9b85f"

	m := mustParseManifest(t, `{"schemaDigest":"`+strings.Repeat("0", 64)+`","providerVersion":"1","protocolVersion":"1","capabilities":{"marketData":true}}`)
	if err := m.Validate(); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(m); string(b) != canonical {
		t.Fatalf("canonical form\n got %s\nwant %s", b, canonical)
	}
	if got := ManifestHash(m); got != sha256Hex(canonical) || got != manifestHash {
		t.Fatalf("ManifestHash = %s; sha256 of the canonical bytes is %s, pinned %s", got, sha256Hex(canonical), manifestHash)
	}
	if got := CreationHash(name, m); got != sha256Hex(creation) || got != creationHash {
		t.Fatalf("CreationHash = %s; sha256 of the creation bytes is %s, pinned %s", got, sha256Hex(creation), creationHash)
	}
}

func sha256Hex(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func TestJCSStrings(t *testing.T) {
	for in, want := range map[string]string{
		"plain":                  `"plain"`,
		`q"b\`:                   `"q\"b\\"`,
		"\b\t\n\f\r":             `"\b\t\n\f\r"`,
		"\x00\x01\x0b\x1f":       `"\u0000\u0001\u000b\u001f"`,
		"\x7f\u0080\u2028\u2029": "\"\x7f\u0080\u2028\u2029\"",
		"<>&/é😀":                 `"<>&/é😀"`,
		"a\xffb":                 "\"a\ufffdb\"",
	} {
		if got := string(appendString(nil, in)); got != want {
			t.Errorf("appendString(%q) = %s; want %s", in, got, want)
		}
	}
}

// The sorting example of RFC 8785 section 3.2.3: UTF-16 code units, not code points.
func TestJCSMemberOrder(t *testing.T) {
	var ms []member
	for i, k := range []string{"\u20ac", "\r", "\ufb33", "1", "\U0001F600", "\u0080", "\u00f6"} {
		ms = append(ms, member{k, []byte{'0' + byte(i)}})
	}
	want := "{\"\\r\":1,\"1\":3,\"\u0080\":5,\"ö\":6,\"€\":0,\"😀\":4,\"\ufb33\":2}"
	if got := string(appendObject(nil, ms)); got != want {
		t.Fatalf("got %s\nwant %s", got, want)
	}
}

// The canonical form agrees manifestWith an independent RFC 8785 implementation,
// for manifests and for creation inputs manifestWith names that need escaping.
func TestCanonicalFormAgreesWithJSONText(t *testing.T) {
	odd := mustParseManifest(t, withTop(map[string]any{"providerVersion": `a"b\c<>&é😀`, "protocolVersion": "\u00f6\u20ac"}))
	for _, m := range []Manifest{mustParseManifest(t, execManifest(nil)), mustParseManifest(t, mdManifest(nil)), odd} {
		got, _ := json.Marshal(m) // HTML-escaped by encoding/json; Canonicalize undoes it
		checkCanonicalManifest(t, got, m.Canonical())
		for _, name := range []string{"feed", "\x00\x1f\"\\\u007f\u2028", "😀\ufb33"} {
			in, _ := json.Marshal(map[string]any{"name": name, "manifest": m})
			want := appendObject(nil, []member{{"manifest", m.Canonical()}, {"name", appendString(nil, name)}})
			checkCanonicalManifest(t, in, want)
			if CreationHash(name, m) != sha256Hex(string(want)) {
				t.Errorf("CreationHash(%q) is not the sha256 of its canonical input", name)
			}
		}
	}
}

func checkCanonicalManifest(t *testing.T, in, want []byte) {
	t.Helper()
	v := jsontext.Value(append([]byte{}, in...))
	if err := v.Canonicalize(); err != nil {
		t.Fatalf("Canonicalize(%s): %v", in, err)
	}
	if string(v) != string(want) {
		t.Fatalf("RFC 8785 form\n ours %s\n jsontext %s", want, v)
	}
}

// The allowed sets are what the doc comments say and are not aliased.
func TestAllowedValues(t *testing.T) {
	got := map[string][]string{"orderTypes": OrderTypes(), "timeInForce": TimeInForces(), "positionModels": PositionModels()}
	got["orderTypes"][0] = "changed"
	got["orderTypes"] = OrderTypes()
	want := map[string][]string{
		"orderTypes":     {"market", "limit", "stop", "stop_limit"},
		"timeInForce":    {"day", "gtc", "ioc", "fok"},
		"positionModels": {"net"},
	}
	if !maps.EqualFunc(got, want, func(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }) {
		t.Fatalf("allowed values %v; want %v", got, want)
	}
}
