package runtime

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// duplicateMember returns the path of the first member name that occurs
// twice in one object of the JSON text data, such as `text` or
// `answers[1].choice`, and "" when every name is unique. encoding/json
// keeps the last of two equal names where other parsers keep the first:
// refusing them means a proxy or a log and the runtime never read two
// different requests from one body. Malformed JSON yields "": decoding
// reports it.
func duplicateMember(data []byte) string {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	path, _ := findDuplicate(dec, "")
	return path
}

// findDuplicate reads one JSON value from dec and returns the path of the
// first repeated member name in it, below path.
func findDuplicate(dec *json.Decoder, path string) (string, error) {
	tok, err := dec.Token()
	if err != nil {
		return "", err
	}
	switch tok {
	case json.Delim('{'):
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return "", err
			}
			k, _ := kt.(string)
			p := k
			if path != "" {
				p = path + "." + k
			}
			if seen[k] {
				return p, nil
			}
			seen[k] = true
			if dup, err := findDuplicate(dec, p); dup != "" || err != nil {
				return dup, err
			}
		}
		_, err = dec.Token() // '}'
		return "", err
	case json.Delim('['):
		for i := 0; dec.More(); i++ {
			if dup, err := findDuplicate(dec, path+"["+strconv.Itoa(i)+"]"); dup != "" || err != nil {
				return dup, err
			}
		}
		_, err = dec.Token() // ']'
		return "", err
	}
	return "", nil
}

// duplicateMemberError is readJSON's error for a body naming a member
// twice.
func duplicateMemberError(path string) error {
	return fmt.Errorf("request body has the member %q more than once; send each member once", path)
}
