// Package openapi holds the OpenAPI 3.1 description of the public API (the
// routes of the edge, edge/gateway.Routes, plus GET /openapi.json itself)
// and a validator that checks a response body against it.
//
// The document, openapi.json, is embedded: Document returns it for the edge
// to serve, and Load parses it into a Spec whose ValidateResponse lets tests
// catch drift between what the service answers and what it documents.
package openapi

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

//go:embed openapi.json
var document []byte

// Document returns the OpenAPI document as served at GET /openapi.json. The
// slice is shared: callers must not modify it.
func Document() []byte { return document }

// Spec is a parsed OpenAPI document. It is safe for concurrent use.
type Spec struct {
	root     map[string]any
	ops      []*Op
	patterns map[string]*regexp.Regexp
}

// Endpoint is one operation's method and templated path.
type Endpoint struct {
	Method string // upper case
	Path   string // as the document writes it, e.g. /b2b/branches/{branch}/quota
}

// Op is one operation of the document.
type Op struct {
	Method      string // upper case
	Path        string // templated, as the document writes it
	OperationID string
	Summary     string
	// Version is the x-api-version of the operation: "v1", "v2", or "" for
	// routes without a versioned body (health answers v2 bodies, the
	// document none).
	Version string
	// Budget is the x-rate-budget: "bank", "wallet", or "" when the route is
	// not rate limited.
	Budget string
	// Permission is the x-permission a /b2b operation requires.
	Permission string
	// Security lists the alternatives that authenticate a request; each is
	// the sorted names of the security schemes that must all be present.
	// Empty: no authentication.
	Security [][]string
	// Responses by status key ("200", "4XX", "default").
	Responses map[string]Response
	// Params holds the values of the path's template parameters; set only
	// on the Op that Operation returns for a concrete path.
	Params map[string]string

	segs      []string
	responses map[string]any // the raw response objects, $refs resolved
}

// Response summarises one documented response of an operation.
type Response struct {
	// Headers are the response headers documented, sorted.
	Headers []string
	// Codes are the error codes the response may carry (error.code of a v2
	// error, message of a v1 error), sorted; nil for a success.
	Codes []string
}

var (
	loadOnce sync.Once
	loaded   *Spec
	loadErr  error
)

// Load parses the embedded document. The Spec is parsed once and shared.
func Load() (*Spec, error) {
	loadOnce.Do(func() { loaded, loadErr = Parse(document) })
	return loaded, loadErr
}

// Parse parses an OpenAPI 3.1 document and checks that it is one the
// validator understands: every $ref resolves inside the document, every
// schema uses only keywords the validator implements, and every pattern
// compiles.
func Parse(doc []byte) (*Spec, error) {
	v, err := decode(doc)
	if err != nil {
		return nil, fmt.Errorf("openapi: document: %w", err)
	}
	root, ok := v.(map[string]any)
	if !ok {
		return nil, errors.New("openapi: document is not a JSON object")
	}
	s := &Spec{root: root, patterns: map[string]*regexp.Regexp{}}
	if ver, _ := root["openapi"].(string); !strings.HasPrefix(ver, "3.1.") {
		return nil, fmt.Errorf("openapi: version %q, want 3.1.x", ver)
	}
	var problems []string
	s.check(root, "#", &problems)
	if len(problems) > 0 {
		return nil, fmt.Errorf("openapi: %s", strings.Join(problems, "; "))
	}
	paths, _ := root["paths"].(map[string]any)
	for _, path := range sortedKeys(paths) {
		item, _ := s.deref(paths[path]).(map[string]any)
		for _, m := range methods {
			raw, ok := item[strings.ToLower(m)].(map[string]any)
			if !ok {
				continue
			}
			op, err := s.newOp(m, path, raw)
			if err != nil {
				return nil, err
			}
			s.ops = append(s.ops, op)
		}
	}
	return s, nil
}

// methods are the HTTP methods an OpenAPI path item may hold, in the order
// Paths lists them.
var methods = []string{"GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE"}

func (s *Spec) newOp(method, path string, raw map[string]any) (*Op, error) {
	op := &Op{Method: method, Path: path, segs: strings.Split(path, "/"),
		Responses: map[string]Response{}, responses: map[string]any{}}
	op.OperationID, _ = raw["operationId"].(string)
	op.Summary, _ = raw["summary"].(string)
	op.Version, _ = raw["x-api-version"].(string)
	op.Budget, _ = raw["x-rate-budget"].(string)
	op.Permission, _ = raw["x-permission"].(string)
	sec, ok := raw["security"].([]any)
	if !ok {
		sec, _ = s.root["security"].([]any)
	}
	for _, alt := range sec {
		m, _ := alt.(map[string]any)
		op.Security = append(op.Security, sortedKeys(m))
	}
	resps, _ := raw["responses"].(map[string]any)
	if len(resps) == 0 {
		return nil, fmt.Errorf("openapi: %s %s: no responses", method, path)
	}
	for key, r := range resps {
		r = s.deref(r)
		rm, _ := r.(map[string]any)
		op.responses[key] = rm
		var resp Response
		hs, _ := rm["headers"].(map[string]any)
		resp.Headers = sortedKeys(hs)
		if schema := jsonSchema(rm); schema != nil {
			codes, ok := s.enumAt(schema, []string{"error", "code"})
			if !ok {
				codes, ok = s.enumAt(schema, []string{"message"})
			}
			if ok && len(codes) > 0 && !strings.HasPrefix(key, "2") {
				resp.Codes = codes
			}
		}
		op.Responses[key] = resp
	}
	return op, nil
}

// Paths lists every operation of the document, by path, then method.
func (s *Spec) Paths() []Endpoint {
	out := make([]Endpoint, len(s.ops))
	for i, op := range s.ops {
		out[i] = Endpoint{op.Method, op.Path}
	}
	return out
}

// Operation returns the operation that answers method on a concrete path
// such as /b2b/branches/br-1/quota (a query string is ignored), with the
// values of its template parameters in Params. Where several templates
// match, the one with the most literal segments wins. The Op's slices and
// Responses map are shared with the Spec: callers must not modify them.
func (s *Spec) Operation(method, path string) (Op, bool) {
	op, params := s.match(method, path)
	if op == nil {
		return Op{}, false
	}
	out := *op
	out.Params = params
	return out, true
}

func (s *Spec) match(method, path string) (*Op, map[string]string) {
	method = strings.ToUpper(method)
	if i := strings.IndexByte(path, '?'); i >= 0 {
		path = path[:i]
	}
	segs := strings.Split(path, "/")
	var best *Op
	bestLit := -1
	for _, op := range s.ops {
		if op.Method != method || len(op.segs) != len(segs) {
			continue
		}
		lit, ok := 0, true
		for i, t := range op.segs {
			switch {
			case isParam(t):
				ok = segs[i] != ""
			case t == segs[i]:
				lit++
			default:
				ok = false
			}
			if !ok {
				break
			}
		}
		if ok && lit > bestLit {
			best, bestLit = op, lit
		}
	}
	if best == nil {
		return nil, nil
	}
	var params map[string]string
	for i, t := range best.segs {
		if isParam(t) {
			if params == nil {
				params = map[string]string{}
			}
			params[t[1:len(t)-1]] = segs[i]
		}
	}
	return best, params
}

func isParam(seg string) bool {
	return len(seg) > 2 && seg[0] == '{' && seg[len(seg)-1] == '}'
}

// ValidateResponse checks a response of method on the concrete path with
// HTTP status against the document: the status must be documented (exactly,
// as its range such as "4XX", or as "default"), and a JSON body must match
// the response's application/json schema. A failing body gives a
// *ValidationError naming every problem by its path in the body.
func (s *Spec) ValidateResponse(method, path string, status int, body []byte) error {
	op, _ := s.match(method, path)
	if op == nil {
		return fmt.Errorf("openapi: no operation %s %s", strings.ToUpper(method), path)
	}
	code := strconv.Itoa(status)
	resp, ok := op.responses[code]
	if !ok && len(code) == 3 {
		resp, ok = op.responses[code[:1]+"XX"]
	}
	if !ok {
		resp, ok = op.responses["default"]
	}
	if !ok {
		return fmt.Errorf("openapi: %s %s: status %d is not documented", op.Method, op.Path, status)
	}
	r, _ := resp.(map[string]any)
	content, _ := r["content"].(map[string]any)
	if len(content) == 0 {
		if len(bytes.TrimSpace(body)) > 0 {
			return fmt.Errorf("openapi: %s %s: status %d is documented without a body, got %d bytes", op.Method, op.Path, status, len(body))
		}
		return nil
	}
	schema := jsonSchema(r)
	if schema == nil {
		return nil // not a JSON response: nothing the validator can check
	}
	v, err := decode(body)
	if err != nil {
		return fmt.Errorf("openapi: %s %s: status %d: body is not JSON: %w", op.Method, op.Path, status, err)
	}
	if p := s.validate(schema, v, ""); len(p) > 0 {
		return &ValidationError{Method: op.Method, Path: op.Path, Status: status, Problems: p}
	}
	return nil
}

// ValidateSchema checks a JSON value against the schema of
// #/components/schemas/name.
func (s *Spec) ValidateSchema(name string, body []byte) error {
	schema, ok := s.resolve("#/components/schemas/" + name)
	if !ok {
		return fmt.Errorf("openapi: no schema %q", name)
	}
	v, err := decode(body)
	if err != nil {
		return fmt.Errorf("openapi: body is not JSON: %w", err)
	}
	if p := s.validate(schema, v, ""); len(p) > 0 {
		return &ValidationError{Schema: name, Problems: p}
	}
	return nil
}

// jsonSchema returns the schema of a response's JSON content, or nil.
func jsonSchema(resp map[string]any) any {
	content, _ := resp["content"].(map[string]any)
	for _, mt := range sortedKeys(content) {
		base, _, _ := strings.Cut(mt, ";")
		base = strings.TrimSpace(base)
		if base == "application/json" || strings.HasSuffix(base, "+json") {
			m, _ := content[mt].(map[string]any)
			if schema, ok := m["schema"]; ok {
				return schema
			}
		}
	}
	return nil
}

// ValidationError lists every way a body differs from its schema.
type ValidationError struct {
	Method, Path string // the operation, for a response
	Status       int
	Schema       string // the component, for ValidateSchema
	Problems     []Problem
}

// Problem is one difference between a value and its schema. Path names the
// value in the body, e.g. data.rawSlip.amount.local.currency or data[2].id;
// it is empty for the body itself.
type Problem struct {
	Path    string
	Message string
}

func (p Problem) String() string {
	if p.Path == "" {
		return "(root): " + p.Message
	}
	return p.Path + ": " + p.Message
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	if e.Schema != "" {
		fmt.Fprintf(&b, "openapi: schema %s: ", e.Schema)
	} else {
		fmt.Fprintf(&b, "openapi: %s %s %d: ", e.Method, e.Path, e.Status)
	}
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	return b.String()
}

// decode parses one JSON value, keeping numbers exact.
func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
