// Package contract checks the ledger's HTTP answers against its OpenAPI
// description (internal/api's openapi.json, served at /v1/openapi.json)
// with libopenapi-validator: an answer whose status the operation does
// not list, or whose body does not match the schema of its status and
// content type, is a violation. Tests wrap their servers' handlers
// (Handler) and their clients' transport (Transport, InstallDefault), so
// every answer an end-to-end test gets is checked; a violation fails the
// test, or the test binary.
package contract

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"
	verrors "github.com/pb33f/libopenapi-validator/errors"
	"github.com/pb33f/libopenapi-validator/helpers"

	"github.com/cluster-ledger/ledger/internal/api"
)

// maxChecked bounds the body a check keeps (larger answers are checked
// on their first maxChecked bytes, which then fail to parse: no test
// expects one that large).
const maxChecked = 64 << 20

// Checker checks answers against the contract and keeps the violations.
type Checker struct {
	mu         sync.Mutex
	v          validator.Validator
	violations map[string]int // violation -> how many answers had it
	checked    int
}

var (
	parseOnce sync.Once
	parsed    libopenapi.Document
	parseErr  error
)

// New returns a checker of the contract. The document itself must be a
// valid OpenAPI 3.1 document.
func New() (*Checker, error) {
	parseOnce.Do(func() {
		parsed, parseErr = libopenapi.NewDocument(api.OpenAPI)
	})
	if parseErr != nil {
		return nil, fmt.Errorf("contract: parse openapi.json: %w", parseErr)
	}
	v, errs := validator.NewValidator(parsed)
	if len(errs) > 0 {
		return nil, fmt.Errorf("contract: %w", errors.Join(errs...))
	}
	if ok, verrs := v.ValidateDocument(); !ok {
		return nil, fmt.Errorf("contract: openapi.json is not a valid OpenAPI document: %s", describe(verrs))
	}
	return &Checker{v: v, violations: map[string]int{}}, nil
}

// ForTest returns a checker whose violations fail t when it ends.
func ForTest(t testing.TB) *Checker {
	t.Helper()
	c, err := New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Err(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// Check checks one answer to req: its status, headers and body.
func (c *Checker) Check(req *http.Request, status int, header http.Header, body []byte) {
	resp := &http.Response{StatusCode: status, Header: header, Body: io.NopCloser(bytes.NewReader(body)), Request: req}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checked++
	if ok, errs := c.v.ValidateHttpResponse(req, resp); !ok && !unrouted(status, errs) {
		c.violations[fmt.Sprintf("%s %s answered %d: %s", req.Method, req.URL.Path, status, describe(errs))]++
	}
}

// unrouted reports whether the answer is the server's 404 (or 405) to a
// path (or method) the API does not have: the contract describes the
// routes there are, and says nothing of the others but that they are
// not found. Any other answer to an undescribed route is a violation (a
// route the document lacks).
func unrouted(status int, errs []*verrors.ValidationError) bool {
	if status != http.StatusNotFound && status != http.StatusMethodNotAllowed {
		return false
	}
	for _, e := range errs {
		if e.ValidationType != helpers.PathValidation || (e.ValidationSubType != helpers.ValidationMissing && e.ValidationSubType != helpers.ValidationMissingOperation) {
			return false
		}
	}
	return len(errs) > 0
}

// Checked is how many answers were checked.
func (c *Checker) Checked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.checked
}

// Violations are the violations found so far, each once, sorted.
func (c *Checker) Violations() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Sorted(maps.Keys(c.violations))
}

// Err is the violations found so far as one error (nil when none).
func (c *Checker) Err() error {
	v := c.Violations()
	if len(v) == 0 {
		return nil
	}
	return fmt.Errorf("%d answers do not match the API's OpenAPI description (internal/api/openapi.json):\n  %s", len(v), strings.Join(v, "\n  "))
}

func describe(errs []*verrors.ValidationError) string {
	var parts []string
	for _, e := range errs {
		s := e.Message
		if e.Reason != "" && e.Reason != e.Message {
			s += " (" + e.Reason + ")"
		}
		for _, se := range e.SchemaValidationErrors {
			s += fmt.Sprintf("; %s at %s", se.Reason, se.FieldPath)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}
