package events

import "errors"

// Errors returned by decoding; match them with errors.Is.
var (
	ErrUnknownType        = errors.New("unknown event type")
	ErrUnsupportedVersion = errors.New("unsupported event version")
	ErrMalformed          = errors.New("malformed event")
)
