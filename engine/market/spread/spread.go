// Package spread parses and evaluates spread expressions: arithmetic over
// instruments such as "ES - 2*NQ" or "(BTC-PERP / ETH-PERP) ^ 2".
//
// Grammar, loosest binding first:
//
//	expr  := term  {("+" | "-") term}
//	term  := unary {("*" | "/") unary}
//	unary := ("-" | "+") unary | power
//	power := atom ["^" unary]          (right-associative; -2^2 is -4)
//	atom  := number | instrument | "(" expr ")"
//
// Instrument names may contain "-" and "/" (BTC-PERP): the lexer takes the
// longest name the resolver knows, so a string that exactly matches a catalog
// symbol is always that symbol. Numbers are decimal literals (2, 0.5, .25).
package spread

import (
	"fmt"
	"strings"

	"github.com/cockroachdb/apd/v3"
)

// Limits of an expression.
const (
	MaxLegs   = 4   // distinct instruments
	MaxLength = 256 // characters
	maxDepth  = 32  // nesting of parentheses and unary operators
)

// Resolver reports whether name is an instrument and returns its catalog spelling.
type Resolver func(name string) (symbol string, ok bool)

// Error is a parse error at a 1-based character position.
type Error struct {
	Pos int
	Msg string
}

func (e *Error) Error() string { return fmt.Sprintf("%s at position %d", e.Msg, e.Pos) }

// Expr is a parsed expression, ready to evaluate over its legs' values.
type Expr struct {
	// Legs are the distinct instruments, in order of first appearance.
	Legs []string
	// Canonical is the expression's tokens joined by single spaces; two
	// spellings of one expression share it.
	Canonical string
	prog      []instr
	depth     int // stack depth the program needs
}

// Single reports whether the expression is one instrument and nothing else.
func (e *Expr) Single() bool { return len(e.prog) == 1 && e.prog[0].op == opLeg }

type opcode byte

const (
	opLeg opcode = iota
	opNum
	opNeg
	opAdd
	opSub
	opMul
	opDiv
	opPow
)

type instr struct {
	op  opcode
	leg int
	num apd.Decimal
}

type tokKind byte

const (
	tEOF tokKind = iota
	tNum
	tIdent
	tOp // + - * / ^
	tLParen
	tRParen
)

type token struct {
	kind tokKind
	pos  int // 1-based
	text string
	op   byte
	num  apd.Decimal
}

// Parse reads s, resolving instrument names through known.
func Parse(s string, known Resolver) (*Expr, error) {
	if len(s) > MaxLength {
		return nil, &Error{Pos: MaxLength + 1, Msg: fmt.Sprintf("expression longer than %d characters", MaxLength)}
	}
	if sym, ok := known(strings.TrimSpace(s)); ok && strings.TrimSpace(s) != "" {
		return &Expr{Legs: []string{sym}, Canonical: sym, prog: []instr{{op: opLeg}}, depth: 1}, nil
	}
	toks, err := lex(s, known)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	if p.peek().kind == tEOF {
		return nil, &Error{Pos: p.peek().pos, Msg: "empty expression"}
	}
	if err := p.expr(0); err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, &Error{Pos: t.pos, Msg: fmt.Sprintf("unexpected %s", describe(t))}
	}
	if len(p.legs) == 0 {
		return nil, &Error{Pos: 1, Msg: "an expression needs at least one instrument"}
	}
	texts := make([]string, 0, len(toks))
	for _, t := range toks[:len(toks)-1] {
		texts = append(texts, t.text)
	}
	e := &Expr{Legs: p.legs, Canonical: strings.Join(texts, " "), prog: p.prog}
	e.depth = stackDepth(e.prog)
	return e, nil
}

func describe(t token) string {
	switch t.kind {
	case tEOF:
		return "end of expression"
	case tNum:
		return "number " + t.text
	case tIdent:
		return "instrument " + t.text
	}
	return "'" + t.text + "'"
}

func isIdentChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '.' || c == ':' || c == '!'
}

func isJoiner(c byte) bool { return c == '-' || c == '/' }

func lex(s string, known Resolver) ([]token, error) {
	var toks []token
	i := 0
	for i < len(s) {
		c := s[i]
		pos := i + 1
		switch {
		case c == ' ' || c == '\t':
			i++
		case c >= 0x80 || c < 0x20:
			return nil, &Error{Pos: pos, Msg: "unexpected character"}
		case c == '(':
			toks = append(toks, token{kind: tLParen, pos: pos, text: "("})
			i++
		case c == ')':
			toks = append(toks, token{kind: tRParen, pos: pos, text: ")"})
			i++
		case c == '+' || c == '-' || c == '*' || c == '/' || c == '^':
			toks = append(toks, token{kind: tOp, pos: pos, text: string(c), op: c})
			i++
		case isIdentChar(c):
			t, n, err := lexWord(s[i:], pos, known)
			if err != nil {
				return nil, err
			}
			toks = append(toks, t)
			i += n
		default:
			return nil, &Error{Pos: pos, Msg: fmt.Sprintf("unexpected character %q", c)}
		}
	}
	return append(toks, token{kind: tEOF, pos: len(s) + 1}), nil
}

// lexWord reads a number or an instrument name at the start of s.
func lexWord(s string, pos int, known Resolver) (token, int, error) {
	// The run of name characters, with joiners kept when a name character follows.
	end := 0
	for end < len(s) {
		c := s[end]
		if isIdentChar(c) || (isJoiner(c) && end+1 < len(s) && isIdentChar(s[end+1])) {
			end++
			continue
		}
		break
	}
	run := s[:end]
	if sym, ok := known(run); ok {
		return token{kind: tIdent, pos: pos, text: sym}, end, nil
	}
	for k := end - 1; k > 0; k-- { // the longest known name ending before a joiner
		if isJoiner(run[k]) {
			if sym, ok := known(run[:k]); ok {
				return token{kind: tIdent, pos: pos, text: sym}, k, nil
			}
		}
	}
	word := run
	if k := strings.IndexAny(run, "-/"); k >= 0 {
		word = run[:k]
	}
	if isNumeric(word) {
		var d apd.Decimal
		if _, _, err := d.SetString(word); err != nil || strings.Count(word, ".") > 1 || word == "." {
			return token{}, 0, &Error{Pos: pos, Msg: fmt.Sprintf("malformed number %q", word)}
		}
		return token{kind: tNum, pos: pos, text: word, num: d}, len(word), nil
	}
	if sym, ok := known(word); ok {
		return token{kind: tIdent, pos: pos, text: sym}, len(word), nil
	}
	return token{}, 0, &Error{Pos: pos, Msg: fmt.Sprintf("unknown instrument %q", word)}
}

func isNumeric(w string) bool {
	if w == "" {
		return false
	}
	for i := 0; i < len(w); i++ {
		if (w[i] < '0' || w[i] > '9') && w[i] != '.' {
			return false
		}
	}
	return true
}

type parser struct {
	toks []token
	i    int
	prog []instr
	legs []string
}

func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }

func (p *parser) expr(depth int) error {
	if err := p.term(depth); err != nil {
		return err
	}
	for t := p.peek(); t.kind == tOp && (t.op == '+' || t.op == '-'); t = p.peek() {
		p.next()
		if err := p.term(depth); err != nil {
			return err
		}
		p.emit(binop(t.op))
	}
	return nil
}

func (p *parser) term(depth int) error {
	if err := p.unary(depth); err != nil {
		return err
	}
	for t := p.peek(); t.kind == tOp && (t.op == '*' || t.op == '/'); t = p.peek() {
		p.next()
		if err := p.unary(depth); err != nil {
			return err
		}
		p.emit(binop(t.op))
	}
	return nil
}

func (p *parser) unary(depth int) error {
	t := p.peek()
	if depth > maxDepth {
		return &Error{Pos: t.pos, Msg: fmt.Sprintf("nested more than %d deep", maxDepth)}
	}
	if t.kind == tOp && (t.op == '-' || t.op == '+') {
		p.next()
		if err := p.unary(depth + 1); err != nil {
			return err
		}
		if t.op == '-' {
			p.emit(opNeg)
		}
		return nil
	}
	return p.power(depth)
}

func (p *parser) power(depth int) error {
	if err := p.atom(depth); err != nil {
		return err
	}
	if t := p.peek(); t.kind == tOp && t.op == '^' {
		p.next()
		if err := p.unary(depth + 1); err != nil {
			return err
		}
		p.emit(opPow)
	}
	return nil
}

func (p *parser) atom(depth int) error {
	t := p.next()
	switch t.kind {
	case tNum:
		p.prog = append(p.prog, instr{op: opNum, num: t.num})
		return nil
	case tIdent:
		leg := -1
		for i, l := range p.legs {
			if l == t.text {
				leg = i
			}
		}
		if leg < 0 {
			if len(p.legs) == MaxLegs {
				return &Error{Pos: t.pos, Msg: fmt.Sprintf("more than %d legs", MaxLegs)}
			}
			leg = len(p.legs)
			p.legs = append(p.legs, t.text)
		}
		p.prog = append(p.prog, instr{op: opLeg, leg: leg})
		return nil
	case tLParen:
		if err := p.expr(depth + 1); err != nil {
			return err
		}
		if c := p.next(); c.kind != tRParen {
			return &Error{Pos: c.pos, Msg: fmt.Sprintf("expected ')' to close '(' at position %d, found %s", t.pos, describe(c))}
		}
		return nil
	}
	return &Error{Pos: t.pos, Msg: fmt.Sprintf("expected a number, an instrument or '(', found %s", describe(t))}
}

func (p *parser) emit(op opcode) { p.prog = append(p.prog, instr{op: op}) }

func binop(c byte) opcode {
	switch c {
	case '+':
		return opAdd
	case '-':
		return opSub
	case '*':
		return opMul
	case '/':
		return opDiv
	}
	return opPow
}

func stackDepth(prog []instr) int {
	depth, most := 0, 0
	for _, in := range prog {
		switch in.op {
		case opLeg, opNum:
			depth++
		case opNeg:
		default:
			depth--
		}
		most = max(most, depth)
	}
	return most
}
