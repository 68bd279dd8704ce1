package bearer

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestTokenReadsOnlyTheBearerScheme(t *testing.T) {
	for _, tc := range []struct {
		header string
		want   string
		ok     bool
	}{
		{"Bearer abc", "abc", true},
		{"bearer abc", "abc", true},
		{"BEARER   abc  ", "abc", true},
		{"  Bearer abc", "abc", true},
		{"Basic abc", "", false},
		{"Bearer", "", false},
		{"Bearer    ", "", false},
		{"", "", false},
		{"Bearerabc", "", false},
	} {
		got, ok := Token(tc.header)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Token(%q) = %q, %v; want %q, %v", tc.header, got, ok, tc.want, tc.ok)
		}
	}
}

func TestTransportSendsTheTokenUnlessTheRequestHasOne(t *testing.T) {
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	c := Client("s3cret", 0)
	req, _ := http.NewRequest("GET", srv.URL, nil)
	if _, err := c.Do(req); err != nil {
		t.Fatal(err)
	}
	if req.Header.Get("Authorization") != "" {
		t.Error("the caller's request was modified")
	}
	own, _ := http.NewRequest("GET", srv.URL, nil)
	own.Header.Set("Authorization", "Bearer other")
	if _, err := c.Do(own); err != nil {
		t.Fatal(err)
	}
	if _, err := Client("", 0).Get(srv.URL); err != nil {
		t.Fatal(err)
	}
	want := []string{"Bearer s3cret", "Bearer other", ""}
	if len(seen) != len(want) {
		t.Fatalf("server saw %q, want %q", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("request %d carried %q, want %q", i, seen[i], want[i])
		}
	}
}
