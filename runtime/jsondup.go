package runtime

// This file owns refusing request bodies that name one JSON member twice.

import (
	"fmt"

	"github.com/gorap/gorap/rap"
)

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
