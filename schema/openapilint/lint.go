// Package openapilint checks an OpenAPI document the way this project wants
// schema/openapi.yaml to be: valid OpenAPI 3.1 (against the specification's
// own schema, every $ref resolved), every operation with a unique operationId
// and a summary and only declared tags, and every example valid against the
// schema it illustrates. Tests use it on the file and on what the running
// engine serves; the engine itself does not import it.
package openapilint

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	"github.com/pb33f/libopenapi-validator/schema_validation"
	"github.com/pb33f/libopenapi/datamodel"
	"github.com/pb33f/libopenapi/datamodel/high/base"
	v3 "github.com/pb33f/libopenapi/datamodel/high/v3"
	"github.com/pb33f/libopenapi/orderedmap"
	"go.yaml.in/yaml/v4"
)

// operationID is the shape of an operationId: a lowerCamelCase Go and
// TypeScript identifier once capitalised.
var operationID = regexp.MustCompile(`^[a-z][A-Za-z0-9]*$`)

// Lint returns every problem of the document spec (YAML or JSON); none is nil.
func Lint(spec []byte) []error {
	doc, err := libopenapi.NewDocument(spec)
	if err != nil {
		return []error{fmt.Errorf("not an OpenAPI document: %w", err)}
	}
	info := doc.GetSpecInfo()
	if info.SpecFormat != datamodel.OAS31 {
		return []error{fmt.Errorf("openapi %q: want 3.1", info.Version)}
	}
	var errs []error
	v, verrs := validator.NewValidator(doc)
	if len(verrs) > 0 {
		return append(errs, verrs...)
	}
	if ok, ves := v.ValidateDocument(); !ok {
		for _, e := range ves {
			msg := e.Message + ": " + e.Reason
			for _, se := range e.SchemaValidationErrors {
				msg += " | " + se.FieldPath + " " + se.Reason
			}
			errs = append(errs, fmt.Errorf("not valid OpenAPI 3.1: %s", msg))
		}
	}
	m, err := doc.BuildV3Model()
	if err != nil {
		return append(errs, fmt.Errorf("model: %w", err))
	}
	tags := map[string]bool{}
	for _, t := range m.Model.Tags {
		tags[t.Name] = true
	}
	ids := map[string]string{}
	sv := schema_validation.NewSchemaValidator()
	example := func(where string, schema *base.SchemaProxy, n *yaml.Node) {
		if n == nil {
			return
		}
		if schema == nil {
			errs = append(errs, fmt.Errorf("%s: an example without a schema", where))
			return
		}
		var val any
		if err := n.Decode(&val); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", where, err))
			return
		}
		b, err := json.Marshal(val)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: the example is no JSON value: %w", where, err))
			return
		}
		s := schema.Schema()
		if s == nil {
			errs = append(errs, fmt.Errorf("%s: schema: %v", where, schema.GetBuildError()))
			return
		}
		if ok, ves := sv.ValidateSchemaBytesWithVersion(s, b, 3.1); !ok {
			for _, e := range ves {
				msg := e.Message + ": " + e.Reason
				for _, se := range e.SchemaValidationErrors {
					msg += " | " + se.FieldPath + " " + se.Reason
				}
				errs = append(errs, fmt.Errorf("%s: the example does not match its schema: %s", where, msg))
			}
		}
	}
	examples := func(where string, schema *base.SchemaProxy, one *yaml.Node, named *orderedmap.Map[string, *base.Example]) {
		example(where+" example", schema, one)
		for name, ex := range named.FromOldest() {
			example(fmt.Sprintf("%s examples.%s", where, name), schema, ex.Value)
		}
	}
	content := func(where string, c *orderedmap.Map[string, *v3.MediaType]) {
		for mt, media := range c.FromOldest() {
			examples(where+" "+mt, media.Schema, media.Example, media.Examples)
		}
	}
	for path, item := range m.Model.Paths.PathItems.FromOldest() {
		for method, op := range item.GetOperations().FromOldest() {
			at := strings.ToUpper(method) + " " + path
			switch prev, dup := ids[op.OperationId]; {
			case op.OperationId == "":
				errs = append(errs, fmt.Errorf("%s: no operationId", at))
			case dup:
				errs = append(errs, fmt.Errorf("%s: operationId %s is %s's already", at, op.OperationId, prev))
			case !operationID.MatchString(op.OperationId):
				errs = append(errs, fmt.Errorf("%s: operationId %s is not lowerCamelCase", at, op.OperationId))
			}
			ids[op.OperationId] = at
			if strings.TrimSpace(op.Summary) == "" {
				errs = append(errs, fmt.Errorf("%s: no summary", at))
			}
			for _, t := range op.Tags {
				if !tags[t] {
					errs = append(errs, fmt.Errorf("%s: tag %s is not declared under tags", at, t))
				}
			}
			params := append(append([]*v3.Parameter(nil), item.Parameters...), op.Parameters...)
			for _, p := range params {
				examples(fmt.Sprintf("%s parameter %s", at, p.Name), p.Schema, p.Example, p.Examples)
			}
			if op.RequestBody != nil {
				content(at+" request", op.RequestBody.Content)
			}
			if op.Responses == nil {
				errs = append(errs, fmt.Errorf("%s: no responses", at))
				continue
			}
			for code, r := range op.Responses.Codes.FromOldest() {
				content(at+" "+code, r.Content)
			}
			if r := op.Responses.Default; r != nil {
				content(at+" default", r.Content)
			}
		}
	}
	return errs
}
