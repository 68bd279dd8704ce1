package httpapi

// This file owns reading a client API request body: bounded, UTF-8, one
// JSON object with known members, each named once.

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/gorap/gorap/rap"
	"github.com/gorap/gorap/runtime/api"
)

// maxRequestBytes bounds a client API request body.
const maxRequestBytes = api.MaxMessageBytes + 4096

// invalidUTF8At returns the offset of the first byte of b that is not
// part of valid UTF-8, or -1.
func invalidUTF8At(b []byte) int {
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// readJSON decodes a bounded JSON body into v.
func readJSON(w http.ResponseWriter, req *http.Request, v any) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, maxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return fmt.Errorf("request body is larger than %d bytes", maxRequestBytes)
		}
		return fmt.Errorf("reading the request body: %w", err)
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	if !utf8.Valid(body) {
		return fmt.Errorf("request body is not valid UTF-8 (the first bad byte is at offset %d): send text encoded as UTF-8", invalidUTF8At(body))
	}
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("request body is not the expected JSON object: %w", err)
	}
	if dup := duplicateMember(body); dup != "" {
		return duplicateMemberError(dup)
	}
	return nil
}

// duplicateMember returns the path of the first member name that occurs
// twice in one object of the JSON text data, such as `text` or
// `answers[1].choice`, and "" when every name is unique. encoding/json
// keeps the last of two equal names where other parsers keep the first:
// refusing them means a proxy or a log and the runtime never read two
// different requests from one body. Malformed JSON yields "": decoding
// reports it.
func duplicateMember(data []byte) string { return rap.DuplicateKey(data) }

// duplicateMemberError is readJSON's error for a body naming a member
// twice.
func duplicateMemberError(path string) error {
	return fmt.Errorf("request body has the member %q more than once; send each member once", path)
}
