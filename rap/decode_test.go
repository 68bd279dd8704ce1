package rap

import (
	"strings"
	"testing"
)

// A body that is not JSON at all is named as such, whatever its first byte.
func TestDecodeNamesInvalidJSON(t *testing.T) {
	for _, body := range []string{"not json", "nope", "true-ish", "-x"} {
		_, err := DecodeCallback([]byte(body))
		if err == nil || !strings.Contains(err.Error(), "invalid JSON") {
			t.Errorf("DecodeCallback(%q) = %v, want an error saying the JSON is invalid", body, err)
		}
	}
}
