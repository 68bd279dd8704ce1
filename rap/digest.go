package rap

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/gowebpki/jcs"
)

// ToolsetDigest returns the integrity digest of a toolset manifest (RAP
// TS-11): the lowercase hex SHA-256 of the document in its RFC 8785 JSON
// Canonicalization Scheme (JCS) form. Canonical form sorts object members
// by their UTF-16 code units, drops insignificant whitespace and writes
// numbers and strings one way only, so two copies of one document that
// differ only in member order, whitespace, escapes or number spelling have
// the same digest, and any other implementation of RFC 8785 computes the
// same one. A runtime pins a tool server's manifest with it ("sha256" of a
// toolset_server entry, docs/config.md); "rap validate URL" prints it.
//
// A document that is not valid JSON, holds a duplicate member name, or a
// number or string that I-JSON (RFC 7493) does not allow, has no canonical
// form: ToolsetDigest returns an error saying so.
func ToolsetDigest(manifest []byte) (string, error) {
	canon, err := CanonicalJSON(manifest)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// CanonicalJSON returns doc in RFC 8785 (JCS) canonical form, the bytes
// ToolsetDigest hashes.
func CanonicalJSON(doc []byte) ([]byte, error) {
	canon, err := jcs.Transform(doc)
	if err != nil {
		return nil, fmt.Errorf("the document has no RFC 8785 canonical form (%v); a toolset manifest must be I-JSON: valid UTF-8, no duplicate member names, numbers a float64 holds", err)
	}
	return canon, nil
}

// IsToolsetDigest reports whether s has the form of a digest ToolsetDigest
// returns: 64 lowercase hex digits.
func IsToolsetDigest(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
