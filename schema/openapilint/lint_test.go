package openapilint_test

import (
	"strings"
	"testing"

	"github.com/svc/engine/schema"
	"github.com/svc/engine/schema/openapilint"
)

// schema/openapi.yaml is valid OpenAPI 3.1, every operation has an
// operationId and a summary, and every example matches its schema.
func TestTheDocumentLints(t *testing.T) {
	for _, err := range openapilint.Lint(schema.OpenAPI()) {
		t.Error(err)
	}
}

// The main trading routes carry examples, so a reader sees an exchange and
// the lint above checks them.
func TestTheTradingRoutesHaveExamples(t *testing.T) {
	doc := string(schema.OpenAPI())
	for _, want := range []string{"placeOrder", "cancelOrder", "listAccounts", "getAccountSnapshot"} {
		i := strings.Index(doc, "operationId: "+want+"\n")
		if i < 0 {
			t.Errorf("no operation %s", want)
			continue
		}
		op := doc[i:]
		if j := strings.Index(op, "\n  /"); j > 0 { // up to the next path
			op = op[:j]
		}
		if !strings.Contains(op, "examples:") {
			t.Errorf("%s has no examples", want)
		}
	}
}

// Lint finds what it is for: a bad example, a missing operationId or summary,
// an undeclared tag, a document that is not 3.1.
func TestLintFindsProblems(t *testing.T) {
	const doc = `openapi: 3.1.0
info: {title: t, version: '1'}
tags: [{name: a}]
paths:
  /x:
    get:
      tags: [b]
      responses:
        '200':
          description: ok
          content:
            application/json:
              schema: {type: object, required: [n], properties: {n: {type: integer}}}
              examples:
                bad: {value: {n: "one"}}
  /y:
    post:
      operationId: Y_y
      summary: y
      responses:
        '204': {description: none}
`
	var got []string
	for _, err := range openapilint.Lint([]byte(doc)) {
		got = append(got, err.Error())
	}
	all := strings.Join(got, "\n")
	for _, want := range []string{
		"GET /x: no operationId",
		"GET /x: no summary",
		"GET /x: tag b is not declared",
		"GET /x 200 application/json examples.bad: the example does not match its schema",
		"POST /y: operationId Y_y is not lowerCamelCase",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("lint missed %q; it said:\n%s", want, all)
		}
	}
	if errs := openapilint.Lint([]byte(strings.Replace(doc, "3.1.0", "3.0.3", 1))); len(errs) != 1 || !strings.Contains(errs[0].Error(), "want 3.1") {
		t.Errorf("a 3.0 document: %v", errs)
	}
}
