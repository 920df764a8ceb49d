package events

import "errors"

// Code is the stable, machine-readable identifier of a refusal
// ("unknown_consumer", "malformed", ...). Producers branch on it, the API
// answers with it, and the hash chain records it instead of the message
// text, so messages can be reworded without changing history.
type Code string

// CodeUnclassified is the code of an error that carries none.
const CodeUnclassified Code = "refused"

// Refusal is a reason an event can be refused: a sentinel error with a
// stable code. Errors wrap one (fmt.Errorf("%w: ...")) to add the
// specifics; callers match with errors.Is and read the code with CodeOf.
type Refusal struct {
	code Code
	text string
}

// NewRefusal declares a refusal reason. Every code is declared once, as a
// package-level sentinel: together they are the one table of codes.
func NewRefusal(code Code, text string) *Refusal { return &Refusal{code: code, text: text} }

func (r *Refusal) Error() string { return r.text }

// Code is the refusal's stable code.
func (r *Refusal) Code() Code { return r.code }

// CodeOf returns the code of the refusal err wraps, or CodeUnclassified.
func CodeOf(err error) Code {
	var r *Refusal
	if errors.As(err, &r) {
		return r.code
	}
	return CodeUnclassified
}

// Refusals of decoding; match them with errors.Is.
var (
	ErrUnknownType        = NewRefusal("unknown_type", "unknown event type")
	ErrUnsupportedVersion = NewRefusal("unsupported_version", "unsupported event version")
	ErrMalformed          = NewRefusal("malformed", "malformed event")
)
