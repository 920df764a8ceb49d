package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/cluster-ledger/ledger/events"
)

// Reasons of the strict reading of request bodies (docs/decisions.md
// 192-194).
const (
	ReasonInvalidUTF8    = "invalid_utf8"    // 400: bytes that are not UTF-8, or a \u escape of a lone surrogate
	ReasonUnknownField   = "unknown_field"   // 400: a key the object does not have (keys are case-sensitive)
	ReasonDuplicateField = "duplicate_field" // 400: a key twice in one object
	ReasonInvalidID      = "invalid_id"      // 400: an event id that is too long or holds an invisible character
	ReasonBodyTimeout    = "body_timeout"    // 408: the body was not received within BodyTimeout
)

// checkJSON reads raw, one JSON value a request sent, strictly against
// the Go type it is decoded into next, and answers in the API's words
// what is wrong, naming the field (a path from where, the value's own
// name: "" for an event, "data" for its data):
//
//   - text that is not UTF-8, or a \u escape of a lone UTF-16 surrogate
//     (\ud800): 400 invalid_utf8. encoding/json would store U+FFFD in
//     their place, changing what the client sent;
//   - a key the object does not have, a case variant of one included
//     ("Type", "DATA": encoding/json matches keys without regard to
//     case): 400 unknown_field, naming the key meant;
//   - a key twice in one object (encoding/json keeps the last): 400
//     duplicate_field;
//   - a value of the wrong kind (a string where a number of slots is
//     needed, a fraction, a number out of range): 400 malformed, saying
//     what the field needs.
//
// The syntax, UTF-8 and escapes are checked by jsontext (the JSON
// tokenizer the Go project develops as encoding/json/v2's), which refuses
// all three by default; the fields come from the type's json tags.
// Values whose type decodes itself (a max, a duration) are left to their
// own decoder, whose refusals are the ledger's words.
func checkJSON(raw []byte, t reflect.Type, where string) *apiError {
	if !utf8.Valid(raw) {
		return badRequest(ReasonInvalidUTF8, "%s: byte %d is not UTF-8: send text as UTF-8", name(where), firstInvalidUTF8(raw))
	}
	w := walker{dec: jsontext.NewDecoder(bytes.NewReader(raw)), root: where}
	return w.value(t)
}

// whatIfRoot names a what-if's body as a whole in checkJSON's messages.
const whatIfRoot = "~what-if"

// walker reads one value against a type. The path to where it is is a
// stack of keys and indexes, made into words only for a refusal: a body
// of a hundred thousand keys costs no string per key.
type walker struct {
	dec   *jsontext.Decoder
	root  string // the path of the value read
	stack []step
	key   []byte // the last key read, quoted as sent (reused)
}

// step is one level of the path: a key, or an index.
type step struct {
	key   string
	index int
}

func (w *walker) push(key string, index int) { w.stack = append(w.stack, step{key, index}) }
func (w *walker) pop()                       { w.stack = w.stack[:len(w.stack)-1] }

// path is the path of the value being read, and of its key last read
// when withKey.
func (w *walker) path(withKey bool) string {
	p := w.root
	for _, s := range w.stack {
		if s.index >= 0 {
			p = fmt.Sprintf("%s[%d]", p, s.index)
		} else {
			p = member(p, s.key)
		}
	}
	if withKey {
		p = member(p, w.keyString())
	}
	return p
}

func (w *walker) keyString() string {
	k, err := jsontext.AppendUnquote(nil, w.key)
	if err != nil {
		return string(w.key)
	}
	return string(k)
}

var (
	rawMessageType  = reflect.TypeFor[json.RawMessage]()
	timeType        = reflect.TypeFor[time.Time]()
	reqTimeType     = reflect.TypeFor[reqTime]()
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
)

// container reports whether values of t are objects or arrays to walk
// (after pointers).
func container(t reflect.Type) bool {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == rawMessageType || t == timeType || t == reqTimeType || t.Kind() == reflect.Interface:
		return false
	case t.Kind() != reflect.Slice && reflect.PointerTo(t).Implements(unmarshalerType):
		return false
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map, reflect.Slice, reflect.Array:
		return true
	}
	return false
}

// value reads the next value, which is decoded into a t; its key, when
// it is an object's member that is not a level of the stack, is w.key.
func (w *walker) value(t reflect.Type) *apiError { return w.valueAt(t, false) }

func (w *walker) valueAt(t reflect.Type, keyed bool) *apiError {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	kind := w.dec.PeekKind()
	if kind == 0 { // a syntax error (or the end): reading says which
		_, err := w.dec.ReadValue()
		return w.syntax(err, keyed)
	}
	switch {
	case t == rawMessageType, t.Kind() == reflect.Interface:
		return w.syntax(w.dec.SkipValue(), keyed)
	case t == timeType || t == reqTimeType:
		v, err := w.dec.ReadValue()
		if err != nil {
			return w.syntax(err, keyed)
		}
		if v.Kind() == 'n' {
			return nil
		}
		if v.Kind() != '"' {
			return w.wrongKind(keyed, "an RFC 3339 time as a string", v.Kind())
		}
		s, _ := jsontext.AppendUnquote(nil, v)
		if _, err := events.ParseTime(string(s)); err != nil {
			return malformedField(w.path(keyed), "%v", err)
		}
		return nil
	case t.Kind() != reflect.Slice && reflect.PointerTo(t).Implements(unmarshalerType):
		// A max, a duration: their own decoder's words, here with the
		// field's path (the event's decode later would only say "plan").
		v, err := w.dec.ReadValue()
		if err != nil {
			return w.syntax(err, keyed)
		}
		if v.Kind() == 'n' {
			return nil
		}
		if err := reflect.New(t).Interface().(json.Unmarshaler).UnmarshalJSON(v); err != nil {
			return malformedField(w.path(keyed), "%v", err)
		}
		return nil
	}
	if kind == 'n' {
		_, err := w.dec.ReadValue() // null: as encoding/json, nothing set
		return w.syntax(err, keyed)
	}
	if container(t) && keyed { // a level of its own: its key on the stack
		w.push(w.keyString(), -1)
		defer w.pop()
		keyed = false
	}
	switch t.Kind() {
	case reflect.Struct:
		fields := fieldsOf(t)
		return w.object(kind, func() *apiError {
			f, ok := fields[string(unquotedKey(w.key))]
			if !ok {
				return w.unknownField(t)
			}
			return w.valueAt(f, true)
		})
	case reflect.Map:
		return w.object(kind, func() *apiError { return w.valueAt(t.Elem(), true) })
	case reflect.Slice, reflect.Array:
		if kind != '[' {
			return w.wrongKind(keyed, "an array", kind)
		}
		if _, err := w.dec.ReadToken(); err != nil {
			return w.syntax(err, keyed)
		}
		for i := 0; w.dec.PeekKind() != ']'; i++ {
			w.push("", i)
			aerr := w.value(t.Elem())
			w.pop()
			if aerr != nil {
				return aerr
			}
		}
		_, err := w.dec.ReadToken()
		return w.syntax(err, keyed)
	}
	v, err := w.dec.ReadValue()
	if err != nil {
		return w.syntax(err, keyed)
	}
	return w.scalar(t, v, keyed)
}

// object reads an object, calling field for each member with its key
// in w.key.
func (w *walker) object(kind jsontext.Kind, field func() *apiError) *apiError {
	if kind != '{' {
		return w.wrongKind(false, "an object", kind)
	}
	if _, err := w.dec.ReadToken(); err != nil {
		return w.syntax(err, false)
	}
	for w.dec.PeekKind() != '}' {
		k, err := w.dec.ReadValue() // the key; jsontext refuses one seen before
		if err != nil {
			return w.syntax(err, false)
		}
		w.key = append(w.key[:0], k...)
		if aerr := field(); aerr != nil {
			return aerr
		}
	}
	_, err := w.dec.ReadToken()
	return w.syntax(err, false)
}

// unquotedKey is a quoted key without its quotes when it holds no
// escape (the usual case: no copy), else unquoted.
func unquotedKey(q []byte) []byte {
	if len(q) >= 2 && bytes.IndexByte(q, '\\') < 0 {
		return q[1 : len(q)-1]
	}
	k, _ := jsontext.AppendUnquote(nil, q)
	return k
}

// syntax words an error of the tokenizer (nil: nil).
func (w *walker) syntax(err error, keyed bool) *apiError {
	if err == nil {
		return nil
	}
	var se *jsontext.SyntacticError
	if !errors.As(err, &se) {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return malformedField(w.path(keyed), "the JSON value ends too early")
		}
		return malformedField(w.path(keyed), "cannot be read")
	}
	detail := strings.TrimPrefix(se.Err.Error(), "jsontext: ")
	switch {
	case errors.Is(se.Err, jsontext.ErrDuplicateName):
		// Found where it is (in a value skipped whole, too): the
		// tokenizer's pointer says which object.
		at := w.root
		for tok := range se.JSONPointer.Parent().Tokens() {
			if _, err := strconv.Atoi(tok); err == nil {
				at = fmt.Sprintf("%s[%s]", at, tok)
			} else {
				at = member(at, tok)
			}
		}
		return badRequest(ReasonDuplicateField, "%s: key %.64q appears twice: send each key once", name(at), se.JSONPointer.LastToken())
	case strings.Contains(detail, "escape sequence") || strings.Contains(detail, "surrogate pair"):
		if loneSurrogate(detail) {
			return badRequest(ReasonInvalidUTF8, "%s: a \\u escape of a lone UTF-16 surrogate (U+D800 to U+DFFF) is no character: send text as UTF-8 (or a \\u pair of a high and a low surrogate)", name(w.path(keyed)))
		}
		return malformedField(w.path(keyed), "a string holds an invalid escape (%s)", detail)
	case strings.Contains(detail, "UTF-8"):
		return badRequest(ReasonInvalidUTF8, "%s: text that is not UTF-8: send text as UTF-8", name(w.path(keyed)))
	}
	return malformedField(w.path(keyed), "not valid JSON at byte %d (%s)", se.ByteOffset, detail)
}

// loneSurrogate reports whether the tokenizer's words about an invalid
// escape name a \u escape in the surrogate range.
func loneSurrogate(detail string) bool {
	d := strings.ToLower(detail)
	for i := strings.Index(d, `\u`); i >= 0 && i+3 < len(d); {
		if d[i+2] == 'd' && strings.IndexByte("89abcdef", d[i+3]) >= 0 {
			return true
		}
		j := strings.Index(d[i+2:], `\u`)
		if j < 0 {
			break
		}
		i += 2 + j
	}
	return false
}

// scalar checks a string, number or boolean value against t.
func (w *walker) scalar(t reflect.Type, v jsontext.Value, keyed bool) *apiError {
	k := v.Kind()
	switch t.Kind() {
	case reflect.String:
		if k != '"' {
			return w.wrongKind(keyed, "a string", k)
		}
	case reflect.Bool:
		if k != 't' && k != 'f' {
			return w.wrongKind(keyed, "true or false", k)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		bits := t.Bits()
		lo, hi := int64(-1)<<(bits-1), int64(1)<<(bits-1)-1
		if k != '0' {
			return w.wrongKind(keyed, fmt.Sprintf("a whole number (%d to %d)", lo, hi), k)
		}
		if len(v) > 24 || !isInt(v, bits) {
			return malformedField(w.path(keyed), "%.40s is not a whole number from %d to %d", v, lo, hi)
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		bits := t.Bits()
		hi := uint64(math.MaxUint64) >> (64 - bits)
		if k != '0' {
			return w.wrongKind(keyed, fmt.Sprintf("a whole number (0 to %d)", hi), k)
		}
		if len(v) > 24 || !isUint(v, bits) {
			return malformedField(w.path(keyed), "%.40s is not a whole number from 0 to %d", v, hi)
		}
	case reflect.Float32, reflect.Float64:
		if k != '0' {
			return w.wrongKind(keyed, "a number", k)
		}
	}
	return nil
}

// isInt and isUint parse a short number (at most 24 bytes: the
// conversion stays on the stack).
func isInt(v []byte, bits int) bool {
	_, err := strconv.ParseInt(string(v), 10, bits)
	return err == nil
}

func isUint(v []byte, bits int) bool {
	_, err := strconv.ParseUint(string(v), 10, bits)
	return err == nil
}

// fieldsOf maps the JSON keys of struct type t (its json tags, exactly)
// to the types of their fields.
func fieldsOf(t reflect.Type) map[string]reflect.Type {
	if m, ok := fieldCache.Load(t); ok {
		return m.(map[string]reflect.Type)
	}
	m := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		key, _, _ := strings.Cut(tag, ",")
		switch {
		case key == "-" && !strings.HasPrefix(tag, "-,"):
			continue
		case f.Anonymous && key == "" && f.Type.Kind() == reflect.Struct:
			for k, v := range fieldsOf(f.Type) {
				m[k] = v
			}
			continue
		case !f.IsExported():
			continue
		case key == "":
			key = f.Name
		}
		m[key] = f.Type
	}
	fieldCache.Store(t, m)
	return m
}

var fieldCache sync.Map // reflect.Type -> map[string]reflect.Type

func (w *walker) unknownField(t reflect.Type) *apiError {
	key, path := w.keyString(), w.path(false)
	fields := fieldsOf(t)
	for k := range fields {
		if strings.EqualFold(k, key) {
			return badRequest(ReasonUnknownField, "%s: unknown field %.64q: did you mean %q? (field names are case-sensitive)", name(path), key, k)
		}
	}
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	slices.Sort(known)
	return badRequest(ReasonUnknownField, "%s: unknown field %.64q (its fields: %s)", name(path), key, strings.Join(known, ", "))
}

func (w *walker) wrongKind(keyed bool, want string, got jsontext.Kind) *apiError {
	return malformedField(w.path(keyed), "%s is needed, not %s", want, kindWords(got))
}

func malformedField(path, format string, args ...any) *apiError {
	return refusal(fmt.Errorf("%w: %s: %s", events.ErrMalformed, name(path), fmt.Sprintf(format, args...)), nil)
}

func kindWords(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "true or false"
	case '{':
		return "an object"
	case '[':
		return "an array"
	case 'n':
		return "null"
	}
	return "something else"
}

// member is the path of key in the object at path: data.plan, or
// data.demands["/a"] for a key that is not a plain name.
func member(path, key string) string {
	plain := key != ""
	for _, r := range key {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return fmt.Sprintf("%s[%.64q]", path, key)
	case path == "":
		return key
	}
	return path + "." + key
}

// name is how a message names the value at path.
func name(path string) string {
	switch {
	case path == "":
		return "the event"
	case path == whatIfRoot:
		return "the what-if"
	case strings.HasPrefix(path, whatIfRoot):
		return "field " + strings.TrimPrefix(strings.TrimPrefix(path, whatIfRoot), ".")
	}
	return "field " + path
}

// firstInvalidUTF8 is the offset of the first byte of b that is not
// part of a UTF-8 character.
func firstInvalidUTF8(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return len(b)
}

// jsonReadFailure words an error of encoding/json's Decoder reading a
// request's raw values (the array's brackets, each element, what
// follows): too large, too slow, not JSON, or cut short.
func jsonReadFailure(err error, what string) *apiError {
	var se *json.SyntaxError
	var ne net.Error
	switch {
	case tooLarge(err):
		return readFailure(err)
	case errors.As(err, &ne) && ne.Timeout():
		return bodyTimeout()
	case errors.As(err, &se):
		return refusal(fmt.Errorf("%w: %s is not valid JSON at byte %d (%s)", events.ErrMalformed, what, se.Offset, syntaxProblem(se)), nil)
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return refusal(fmt.Errorf("%w: the body ends inside %s: send complete JSON", events.ErrMalformed, what), nil)
	}
	return refusal(fmt.Errorf("%w: %s could not be read", events.ErrMalformed, what), nil)
}

// syntaxProblem says what is wrong at a syntax error's offset in the
// ledger's words, not the decoder's (decision 491): the character found
// where none of its kind may stand, nesting past the decoder's depth, or
// JSON that ends early.
func syntaxProblem(se *json.SyntaxError) string {
	msg := se.Error()
	switch {
	case strings.Contains(msg, "max depth"):
		return "arrays and objects nested too deeply"
	case strings.Contains(msg, "end of JSON input"):
		return "it ends early"
	}
	if m := syntaxCharacter.FindStringSubmatch(msg); m != nil {
		return "a " + m[1] + " cannot stand there"
	}
	return "the text there cannot stand there"
}

// syntaxCharacter finds the character a decoder's syntax error quotes
// ("invalid character 'x' ...").
var syntaxCharacter = regexp.MustCompile(`invalid character ('.{1,8}')`)

// bodyTimeout is the answer to a body not received within BodyTimeout.
func bodyTimeout() *apiError {
	return &apiError{status: 408, reason: ReasonBodyTimeout,
		msg: fmt.Sprintf("the request body was not received within %v: nothing was stored; send it again", BodyTimeout)}
}
