package httpapi

import "testing"

func TestDuplicateMember(t *testing.T) {
	for in, want := range map[string]string{
		`{"a":1,"b":2}`:                 "",
		`{"a":{"x":1},"b":{"x":1}}`:     "",
		`[{"a":1},{"a":1}]`:             "",
		`{"a":1,"a":1}`:                 "a",
		`{"a":[1,{"k":"v","k":"w"}]}`:   "a[1].k",
		`{"a":"x","b":{"c":{},"c":{}}}`: "b.c",
		`{"a":`:                         "",
		`"just a string"`:               "",
	} {
		if got := duplicateMember([]byte(in)); got != want {
			t.Errorf("duplicateMember(%s) = %q, want %q", in, got, want)
		}
	}
}

// Only a callback URL's own path escapes the client API's checks: a path
// that starts like one but leads elsewhere does not.
func TestIsCallbackPath(t *testing.T) {
	for p, want := range map[string]bool{
		CallbackPath + "abc":              true,
		CallbackPath:                      false,
		CallbackPath + "abc/":             false,
		CallbackPath + "../../v1/threads": false,
		CallbackPath + "./abc":            false,
		CallbackPath + "a//b":             false,
		"/v1/threads":                     false,
	} {
		if got := IsCallbackPath(p); got != want {
			t.Errorf("IsCallbackPath(%q) = %v, want %v", p, got, want)
		}
	}
}
