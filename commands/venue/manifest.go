// Package venue holds the pure rules of the venue platform's writes: decoding,
// shape checks and the digests the engine records. No I/O, no clock.
package venue

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/svc/engine/commands"
)

// CodeUnsupportedValue is the venue configuration code for a value outside
// the allowed set (400; params.field names it, params.allowed lists the set).
const CodeUnsupportedValue = commands.CodeUnsupportedValue

// Bounds of a manifest. A string bound counts characters (code points).
const (
	MaxVersion        = 64 // providerVersion and protocolVersion: 1 to 64 printable characters
	MaxListItems      = 16 // orderTypes, timeInForce, positionModels
	MaxListItem       = 32 // each list item: 1 to 32 printable characters
	SchemaDigestChars = 64 // schemaDigest: exactly 64 of 0-9a-f

	// MinReplayRetentionSeconds is rule 1's minimum for an execution-capable
	// provider: seven days.
	MinReplayRetentionSeconds = 604800
	// MaxReplayRetentionSeconds is 2^53-1, the largest integer every JSON
	// reader (and RFC 8785's IEEE double) holds exactly, so the digests are
	// reproducible anywhere.
	MaxReplayRetentionSeconds = 1<<53 - 1
)

// Allowed list values. They are the engine's own order types, times in
// force and position model: a manifest advertises only what the engine can
// route and show. Widening a set later is additive; narrowing would not be.
// positionModels allows `net` alone: the account frame's positionModel has
// no other value and hedge-mode accounts are refused (hedge_position_mode,
// position_mode_unsupported).
// The sets are never written; the functions return copies.
var (
	orderTypes     = []string{"market", "limit", "stop", "stop_limit"}
	timeInForces   = []string{"day", "gtc", "ioc", "fok"}
	positionModels = []string{"net"}
)

// OrderTypes returns the allowed orderTypes: market, limit, stop, stop_limit.
func OrderTypes() []string { return slices.Clone(orderTypes) }

// TimeInForces returns the allowed timeInForce values: day, gtc, ioc, fok.
func TimeInForces() []string { return slices.Clone(timeInForces) }

// PositionModels returns the allowed positionModels: net.
func PositionModels() []string { return slices.Clone(positionModels) }

// Manifest is a provider's declaration of what it serves (the request's and
// the provider version's `manifest`). Field order and names are the spec's.
//
// Its JSON form (MarshalJSON) is the form the engine stores and answers: the
// RFC 8785 canonical JSON of every property, so a property the request left
// out reads as false, [] or 0. ManifestHash and CreationHash digest exactly
// those bytes.
type Manifest struct {
	ProviderVersion string       `json:"providerVersion"`
	ProtocolVersion string       `json:"protocolVersion"`
	SchemaDigest    string       `json:"schemaDigest"`
	Capabilities    Capabilities `json:"capabilities"`
}

// Capabilities is the manifest's `capabilities`. An omitted boolean is false,
// an omitted list empty and an omitted replayRetentionSeconds 0; lists keep
// the order they were sent in.
type Capabilities struct {
	Accounts             bool `json:"accounts"`
	Execution            bool `json:"execution"`
	MarketData           bool `json:"marketData"`
	GenerationFencing    bool `json:"generationFencing"`
	CompleteOrderBook    bool `json:"completeOrderBook"`
	ExecutionHistory     bool `json:"executionHistory"`
	ExecutionCorrections bool `json:"executionCorrections"`
	ReduceOnly           bool `json:"reduceOnly"`
	NativeReplace        bool `json:"nativeReplace"`
	NativeOco            bool `json:"nativeOco"`
	AccountProvisioning  bool `json:"accountProvisioning"`

	OrderTypes     []string `json:"orderTypes"`
	TimeInForce    []string `json:"timeInForce"`
	PositionModels []string `json:"positionModels"`

	// ReplayRetentionSeconds is how long the provider can replay, in whole
	// seconds: 0 to MaxReplayRetentionSeconds, at least
	// MinReplayRetentionSeconds when Execution is true.
	ReplayRetentionSeconds int64 `json:"replayRetentionSeconds"`
}

// The JSON path of the manifest and its properties in a refusal's field.
const (
	fManifest     = "manifest"
	fCapabilities = "manifest.capabilities"
)

func capField(name string) string { return fCapabilities + "." + name }

func itemField(list string, i int) string { return capField(list) + "[" + strconv.Itoa(i) + "]" }

// ParseManifest strictly decodes one manifest object from raw JSON. It refuses,
// with a 400 invalid_request *commands.Refusal whose params.field names the
// JSON path (manifest.capabilities.orderTypes[2]):
//   - input that is not one JSON object, or that has anything but whitespace
//     after it (field manifest); malformed JSON names the value or object
//     being read where it breaks;
//   - an unknown property anywhere (its path; the parent's path when the name
//     is empty, longer than 64 characters or not printable) and a property
//     sent twice;
//   - a value of the wrong type, null included;
//   - a missing providerVersion, protocolVersion, schemaDigest or capabilities;
//   - replayRetentionSeconds that is not an integer literal (no fraction or
//     exponent) from 0 to MaxReplayRetentionSeconds;
//   - a string or list outside the bounds above (checked as it reads, so a
//     long list stops at its 17th item).
//
// It applies no allowed-value check and none of the spec's rules: call
// Validate on the result. The caller bounds the size of raw.
func ParseManifest(raw []byte) (Manifest, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	p := parser{d: d}
	m, err := p.manifest()
	if err != nil {
		return Manifest{}, err
	}
	if _, err := d.Token(); err != io.EOF {
		return Manifest{}, commands.BadField(fManifest, nil, "manifest must be one JSON object with nothing after it")
	}
	return m, nil
}

// UnmarshalJSON is ParseManifest, so a Manifest inside a request body is
// decoded as strictly. Its refusals name fields from "manifest".
func (m *Manifest) UnmarshalJSON(b []byte) error {
	v, err := ParseManifest(b)
	if err != nil {
		return err
	}
	*m = v
	return nil
}

// Canonical returns the manifest's canonical form, the bytes ManifestHash
// digests: RFC 8785 JSON with every property (see ManifestHash). Store these
// bytes: json.Marshal of a value holding a Manifest escapes '<', '>' and '&'
// as \u003c, \u003e and \u0026, equal JSON but other bytes.
func (m Manifest) Canonical() []byte { return m.canonical(nil) }

// MarshalJSON writes Canonical. It never fails.
func (m Manifest) MarshalJSON() ([]byte, error) { return m.canonical(nil), nil }

// parser reads one manifest token by token, so each refusal names the exact
// path and nothing past the first refusal is read.
type parser struct{ d *json.Decoder }

func (p parser) token(field string) (json.Token, error) {
	t, err := p.d.Token()
	if err != nil {
		return nil, commands.BadField(field, nil, "%s is not valid JSON", field)
	}
	return t, nil
}

// object reads an object at field, calling member with each property's name
// and path; member reads the value.
func (p parser) object(field string, member func(name, path string) error) error {
	t, err := p.token(field)
	if err != nil {
		return err
	}
	if t != json.Delim('{') {
		return wrongType(field, "an object")
	}
	seen := map[string]bool{}
	for p.d.More() {
		t, err := p.token(field)
		if err != nil {
			return err
		}
		name, _ := t.(string)
		path := field + "." + name
		if seen[name] {
			return commands.BadField(propertyField(field, name), nil, "%s is sent twice", path)
		}
		seen[name] = true
		if err := member(name, path); err != nil {
			return err
		}
	}
	_, err = p.token(field) // the closing '}'
	return err
}

// unknown refuses a property the manifest does not have.
func unknown(parent, name string) error {
	return commands.BadField(propertyField(parent, name), map[string]any{"property": name},
		"%s has no property %q", parent, name)
}

// propertyField is the path of a property, or of its parent when the name
// cannot be shown as it is.
func propertyField(parent, name string) string {
	if name == "" || commands.Text("", name, 64) != nil {
		return parent
	}
	return parent + "." + name
}

func wrongType(field, want string) error {
	return commands.BadField(field, nil, "%s must be %s", field, want)
}

func (p parser) str(field string) (string, error) {
	t, err := p.token(field)
	if err != nil {
		return "", err
	}
	s, ok := t.(string)
	if !ok {
		return "", wrongType(field, "a string")
	}
	return s, nil
}

func (p parser) boolean(field string) (bool, error) {
	t, err := p.token(field)
	if err != nil {
		return false, err
	}
	b, ok := t.(bool)
	if !ok {
		return false, wrongType(field, "true or false")
	}
	return b, nil
}

func (p parser) seconds(field string) (int64, error) {
	t, err := p.token(field)
	if err != nil {
		return 0, err
	}
	n, ok := t.(json.Number)
	if !ok {
		return 0, wrongType(field, "an integer")
	}
	s := string(n)
	if strings.ContainsAny(s, ".eE") {
		return 0, wrongType(field, "an integer, written without a fraction or exponent")
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v < 0 || v > MaxReplayRetentionSeconds {
		return 0, commands.BadField(field, map[string]any{"min": 0, "max": int64(MaxReplayRetentionSeconds)},
			"%s must be an integer from 0 to %d", field, int64(MaxReplayRetentionSeconds))
	}
	return v, nil
}

func (p parser) list(field string) ([]string, error) {
	t, err := p.token(field)
	if err != nil {
		return nil, err
	}
	if t != json.Delim('[') {
		return nil, wrongType(field, "an array of strings")
	}
	out := []string{}
	for p.d.More() {
		if len(out) == MaxListItems {
			return nil, tooMany(field)
		}
		f := field + "[" + strconv.Itoa(len(out)) + "]"
		s, err := p.str(f)
		if err != nil {
			return nil, err
		}
		if err := commands.Identifier(f, s, MaxListItem); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	_, err = p.token(field) // the closing ']'
	return out, err
}

func tooMany(field string) error {
	return commands.BadField(field, map[string]any{"max": MaxListItems}, "%s has more than %d items", field, MaxListItems)
}

func (p parser) manifest() (Manifest, error) {
	m := Manifest{Capabilities: Capabilities{OrderTypes: []string{}, TimeInForce: []string{}, PositionModels: []string{}}}
	var have [4]bool
	err := p.object(fManifest, func(name, path string) (err error) {
		switch name {
		case "providerVersion":
			have[0] = true
			if m.ProviderVersion, err = p.str(path); err == nil {
				err = commands.Identifier(path, m.ProviderVersion, MaxVersion)
			}
		case "protocolVersion":
			have[1] = true
			if m.ProtocolVersion, err = p.str(path); err == nil {
				err = commands.Identifier(path, m.ProtocolVersion, MaxVersion)
			}
		case "schemaDigest":
			have[2] = true
			if m.SchemaDigest, err = p.str(path); err == nil {
				err = checkDigest(m.SchemaDigest)
			}
		case "capabilities":
			have[3] = true
			err = p.capabilities(&m.Capabilities)
		default:
			err = unknown(fManifest, name)
		}
		return err
	})
	if err != nil {
		return Manifest{}, err
	}
	for i, name := range []string{"providerVersion", "protocolVersion", "schemaDigest", "capabilities"} {
		if !have[i] {
			return Manifest{}, commands.BadField(fManifest+"."+name, nil, "%s.%s is required", fManifest, name)
		}
	}
	return m, nil
}

func (p parser) capabilities(c *Capabilities) error {
	flags := c.flags()
	return p.object(fCapabilities, func(name, path string) (err error) {
		for _, f := range flags {
			if f.name == name {
				*f.v, err = p.boolean(path)
				return err
			}
		}
		switch name {
		case "orderTypes":
			c.OrderTypes, err = p.list(path)
		case "timeInForce":
			c.TimeInForce, err = p.list(path)
		case "positionModels":
			c.PositionModels, err = p.list(path)
		case "replayRetentionSeconds":
			c.ReplayRetentionSeconds, err = p.seconds(path)
		default:
			err = unknown(fCapabilities, name)
		}
		return err
	})
}

// flag is one boolean capability.
type flag struct {
	name string
	v    *bool
}

// flags lists the eleven booleans in the spec's order.
func (c *Capabilities) flags() []flag {
	return []flag{
		{"accounts", &c.Accounts}, {"execution", &c.Execution}, {"marketData", &c.MarketData},
		{"generationFencing", &c.GenerationFencing}, {"completeOrderBook", &c.CompleteOrderBook},
		{"executionHistory", &c.ExecutionHistory}, {"executionCorrections", &c.ExecutionCorrections},
		{"reduceOnly", &c.ReduceOnly}, {"nativeReplace", &c.NativeReplace}, {"nativeOco", &c.NativeOco},
		{"accountProvisioning", &c.AccountProvisioning},
	}
}

// list is one list capability with its allowed values.
type list struct {
	name    string
	items   []string
	allowed []string
}

func (c Capabilities) lists() []list {
	return []list{
		{"orderTypes", c.OrderTypes, orderTypes},
		{"timeInForce", c.TimeInForce, timeInForces},
		{"positionModels", c.PositionModels, positionModels},
	}
}

func checkDigest(s string) error {
	ok := len(s) == SchemaDigestChars
	for i := 0; ok && i < len(s); i++ {
		ok = (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')
	}
	if !ok {
		return commands.BadField(fManifest+".schemaDigest", nil,
			"manifest.schemaDigest must be %d lowercase hexadecimal characters", SchemaDigestChars)
	}
	return nil
}

// Validate checks a manifest whole and returns the first failure as a 400
// *commands.Refusal with params.field, in this order:
//  1. the bounds ParseManifest checks as it reads (invalid_request);
//  2. allowed values: an item outside OrderTypes(), TimeInForces() or
//     PositionModels() is unsupported_value naming the item
//     (manifest.capabilities.orderTypes[2]) with params.allowed;
//  3. spec rule 5: an item equal to an earlier one (invalid_request naming
//     the later item);
//  4. spec rule 4: neither accounts nor marketData (field
//     manifest.capabilities);
//  5. spec rule 1: with execution, the first of accounts, generationFencing,
//     completeOrderBook, executionHistory that is false, a
//     replayRetentionSeconds below MinReplayRetentionSeconds (params.min),
//     then the first empty list of orderTypes, timeInForce, positionModels;
//  6. spec rule 2: without execution, the first execution feature advertised
//     (params.requires "execution"). The execution features are the seven
//     booleans generationFencing, completeOrderBook, executionHistory,
//     executionCorrections, reduceOnly, nativeReplace and nativeOco, and a
//     nonempty orderTypes or timeInForce: each describes orders or their
//     history. positionModels is an account feature (rule 3 ties it to
//     accounts) and replayRetentionSeconds a retention, not a feature: rule
//     1 bounds it only for execution;
//  7. spec rule 3: without accounts, accountProvisioning true or a nonempty
//     positionModels (params.requires "accounts").
//
// Rule 6 (registration certifies nothing) needs no check. Validate reads no
// state; every refusal is invalid_request except the allowed-value one.
func (m Manifest) Validate() error {
	if err := m.checkBounds(); err != nil {
		return err
	}
	c := m.Capabilities
	for _, l := range c.lists() {
		for i, v := range l.items {
			if !slices.Contains(l.allowed, v) {
				f := itemField(l.name, i)
				return &commands.Refusal{Malformed: true, Code: CodeUnsupportedValue,
					Params: map[string]any{"field": f, "allowed": slices.Clone(l.allowed)},
					Msg:    fmt.Sprintf("%s must be one of %s", f, strings.Join(l.allowed, ", "))}
			}
		}
	}
	for _, l := range c.lists() { // rule 5
		for i, v := range l.items {
			if slices.Contains(l.items[:i], v) {
				f := itemField(l.name, i)
				return commands.BadField(f, nil, "%s repeats %q", f, v)
			}
		}
	}
	if !c.Accounts && !c.MarketData { // rule 4
		return commands.BadField(fCapabilities, nil, "%s must have accounts or marketData true", fCapabilities)
	}
	if c.Execution { // rule 1
		for _, f := range []flag{{"accounts", &c.Accounts}, {"generationFencing", &c.GenerationFencing},
			{"completeOrderBook", &c.CompleteOrderBook}, {"executionHistory", &c.ExecutionHistory}} {
			if !*f.v {
				return commands.BadField(capField(f.name), map[string]any{"requiredBy": "execution"},
					"%s must be true when execution is true", capField(f.name))
			}
		}
		if c.ReplayRetentionSeconds < MinReplayRetentionSeconds {
			f := capField("replayRetentionSeconds")
			return commands.BadField(f, map[string]any{"min": MinReplayRetentionSeconds},
				"%s must be at least %d when execution is true", f, MinReplayRetentionSeconds)
		}
		for _, l := range c.lists() {
			if len(l.items) == 0 {
				return commands.BadField(capField(l.name), map[string]any{"requiredBy": "execution"},
					"%s must not be empty when execution is true", capField(l.name))
			}
		}
	} else { // rule 2
		for _, f := range []flag{{"generationFencing", &c.GenerationFencing}, {"completeOrderBook", &c.CompleteOrderBook},
			{"executionHistory", &c.ExecutionHistory}, {"executionCorrections", &c.ExecutionCorrections},
			{"reduceOnly", &c.ReduceOnly}, {"nativeReplace", &c.NativeReplace}, {"nativeOco", &c.NativeOco}} {
			if *f.v {
				return requires(f.name, "execution")
			}
		}
		if len(c.OrderTypes) > 0 {
			return requires("orderTypes", "execution")
		}
		if len(c.TimeInForce) > 0 {
			return requires("timeInForce", "execution")
		}
	}
	if !c.Accounts { // rule 3
		if c.AccountProvisioning {
			return requires("accountProvisioning", "accounts")
		}
		if len(c.PositionModels) > 0 {
			return requires("positionModels", "accounts")
		}
	}
	return nil
}

func requires(name, needed string) error {
	f := capField(name)
	return commands.BadField(f, map[string]any{"requires": needed}, "%s needs %s to be true", f, needed)
}

// checkBounds repeats ParseManifest's value bounds for a manifest made in Go.
func (m Manifest) checkBounds() error {
	if err := commands.Identifier(fManifest+".providerVersion", m.ProviderVersion, MaxVersion); err != nil {
		return err
	}
	if err := commands.Identifier(fManifest+".protocolVersion", m.ProtocolVersion, MaxVersion); err != nil {
		return err
	}
	if err := checkDigest(m.SchemaDigest); err != nil {
		return err
	}
	c := m.Capabilities
	for _, l := range c.lists() {
		if len(l.items) > MaxListItems {
			return tooMany(capField(l.name))
		}
		for i, v := range l.items {
			if err := commands.Identifier(itemField(l.name, i), v, MaxListItem); err != nil {
				return err
			}
		}
	}
	if c.ReplayRetentionSeconds < 0 || c.ReplayRetentionSeconds > MaxReplayRetentionSeconds {
		f := capField("replayRetentionSeconds")
		return commands.BadField(f, map[string]any{"min": 0, "max": int64(MaxReplayRetentionSeconds)},
			"%s must be an integer from 0 to %d", f, int64(MaxReplayRetentionSeconds))
	}
	return nil
}

// ManifestHash is the provider version's manifestHash: the lowercase hex
// SHA-256 of the manifest's canonical JSON, RFC 8785 (JCS).
//
// A venue recomputes it from the `manifest` object of the provider version
// answer, which carries every property (a property the request omitted reads
// false, [] or 0): canonicalize that object with any RFC 8785 implementation
// (members sorted by the UTF-16 code units of their names, no whitespace,
// strings escaped minimally: only '"', '\' and U+0000-U+001F, the last as
// \b \t \n \f \r or \u00xx; everything else, non-ASCII included, as UTF-8;
// lists in the order sent, never sorted; replayRetentionSeconds as plain
// decimal digits, which is JCS's number form for an integer below 2^53) and
// take SHA-256 of the bytes, in lowercase hex. From the request instead: add
// the omitted properties with those defaults first. The manifest holds no
// other numbers and no nulls. Call it on a manifest that passed Validate.
func ManifestHash(m Manifest) string {
	sum := sha256.Sum256(m.canonical(nil))
	return hex.EncodeToString(sum[:])
}

// CreationHash is the provider version's creationHash: the lowercase hex
// SHA-256 of the RFC 8785 canonical JSON of {"manifest": <manifest>, "name":
// <name>}, the manifest as ManifestHash canonicalizes it and name as sent.
// Its bytes are therefore `{"manifest":` + the manifest's canonical bytes +
// `,"name":` + the JCS string of name + `}`. The same Idempotency-Key with
// another creation hash is changed input. Call it on a validated manifest
// and a name of valid UTF-8 (an invalid byte is digested as U+FFFD).
func CreationHash(name string, m Manifest) string {
	b := m.canonical(nil)
	sum := sha256.Sum256(appendObject(nil, []member{{"manifest", b}, {"name", appendString(nil, name)}}))
	return hex.EncodeToString(sum[:])
}

// canonical appends the manifest's RFC 8785 form to b.
func (m Manifest) canonical(b []byte) []byte {
	c := m.Capabilities
	caps := make([]member, 0, 15)
	for _, f := range c.flags() {
		caps = append(caps, member{f.name, strconv.AppendBool(nil, *f.v)})
	}
	for _, l := range c.lists() {
		v := []byte{'['}
		for i, s := range l.items {
			if i > 0 {
				v = append(v, ',')
			}
			v = appendString(v, s)
		}
		caps = append(caps, member{l.name, append(v, ']')})
	}
	caps = append(caps, member{"replayRetentionSeconds", strconv.AppendInt(nil, c.ReplayRetentionSeconds, 10)})
	return appendObject(b, []member{
		{"providerVersion", appendString(nil, m.ProviderVersion)},
		{"protocolVersion", appendString(nil, m.ProtocolVersion)},
		{"schemaDigest", appendString(nil, m.SchemaDigest)},
		{"capabilities", appendObject(nil, caps)},
	})
}

// member is one object member: its name and its value's canonical bytes.
type member struct {
	name string
	val  []byte
}

// appendObject appends the JCS object of ms: members sorted by the UTF-16
// code units of their names (RFC 8785 section 3.2.3). Names are unique.
func appendObject(b []byte, ms []member) []byte {
	slices.SortFunc(ms, func(x, y member) int { return compareUTF16(x.name, y.name) })
	b = append(b, '{')
	for i, m := range ms {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendString(b, m.name)
		b = append(b, ':')
		b = append(b, m.val...)
	}
	return append(b, '}')
}

func compareUTF16(x, y string) int {
	return slices.Compare(utf16.Encode([]rune(x)), utf16.Encode([]rune(y)))
}

// appendString appends s as a JCS string (RFC 8785 section 3.2.2.2, the
// ECMAScript JSON.stringify form): '"' and '\' escaped, U+0008, U+0009,
// U+000A, U+000C and U+000D as \b \t \n \f \r, the other controls below
// U+0020 as \u00xx in lowercase hex, everything else as its UTF-8. An
// invalid UTF-8 byte is written as U+FFFD.
func appendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for _, r := range s { // ranging turns an invalid byte into U+FFFD
		switch {
		case r == '"' || r == '\\':
			b = append(b, '\\', byte(r))
		case r == '\b':
			b = append(b, '\\', 'b')
		case r == '\t':
			b = append(b, '\\', 't')
		case r == '\n':
			b = append(b, '\\', 'n')
		case r == '\f':
			b = append(b, '\\', 'f')
		case r == '\r':
			b = append(b, '\\', 'r')
		case r < 0x20:
			b = append(b, '\\', 'u', '0', '0', hexDigits[r>>4], hexDigits[r&0xf])
		default:
			b = utf8.AppendRune(b, r)
		}
	}
	return append(b, '"')
}
